//! Runs a list of cases over `jobs` workers at once, each case within its time
//! limit, re-running failures up to `retries` times; calls back as each case
//! ends and gives the records in the order of the list.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::time::Duration;

use crate::outcome::{Outcome, Status, Verdict};
use crate::report::CaseRecord;
use crate::suite::{Decision, Entry, Suite};
use crate::worker::{Spawn, Worker};

/// The time limit of a case that sets none, unless `--timeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How to run the cases.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Cases at once, each in its own worker; at least 1.
    pub jobs: usize,
    /// Re-runs of a failing case; a pass on a re-run is a flake.
    pub retries: u32,
    /// The limit of a case without its own `timeout:`.
    pub timeout: Duration,
    /// How to start workers; `None` runs the cases in this process (no
    /// isolation, no time limit).
    pub spawn: Option<Spawn>,
}

/// Runs `entries`; `each(record, done, total)` is called on this thread as each
/// case ends. Records come back in the order of `entries`.
pub fn run(
    suite: &Suite,
    entries: &[Entry],
    schedule: &Schedule,
    mut each: impl FnMut(&CaseRecord, usize, usize),
) -> Vec<CaseRecord> {
    let total = entries.len();
    let next = AtomicUsize::new(0);
    let mut records: Vec<Option<CaseRecord>> = vec![None; total];
    let (tx, rx) = channel();
    std::thread::scope(|scope| {
        for _ in 0..schedule.jobs.clamp(1, total.max(1)) {
            let (tx, next) = (tx.clone(), &next);
            scope.spawn(move || {
                let mut worker = None;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(entry) = entries.get(i) else { break };
                    let record = run_case(suite, entry, schedule, &mut worker);
                    if tx.send((i, record)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (done, (i, record)) in rx.into_iter().enumerate() {
            each(&record, done + 1, total);
            records[i] = Some(record);
        }
    });
    records.into_iter().flatten().collect()
}

/// Runs one case, re-running it while it fails and retries are left.
pub fn run_case(
    suite: &Suite,
    entry: &Entry,
    schedule: &Schedule,
    worker: &mut Option<Worker>,
) -> CaseRecord {
    let mut attempts = vec![attempt(suite, entry, schedule, worker)];
    let runs = matches!(entry.decision, Decision::Run(_));
    while runs && attempts.len() <= schedule.retries as usize {
        let statuses: Vec<Status> = attempts.iter().map(|o| o.status).collect();
        if suite.expectations.judge(&entry.name, &statuses).verdict != Verdict::Fail {
            break;
        }
        attempts.push(attempt(suite, entry, schedule, worker));
    }
    suite.judge(entry, attempts)
}

/// One run of a case: in a worker when the schedule has workers and the case runs.
fn attempt(
    suite: &Suite,
    entry: &Entry,
    schedule: &Schedule,
    worker: &mut Option<Worker>,
) -> Outcome {
    let (Decision::Run(plan), Some(spawn)) = (&entry.decision, &schedule.spawn) else {
        return suite.run_once(entry);
    };
    let w = match worker {
        Some(w) => w,
        None => match Worker::start(spawn) {
            Ok(w) => worker.insert(w),
            Err(e) => return Outcome::failed(e),
        },
    };
    match w.run(&entry.path, plan.timeout.unwrap_or(schedule.timeout)) {
        Ok(out) => {
            // A lost device may leave the driver unusable in that process.
            if out.status == Status::DeviceLost || spawn.fresh {
                *worker = None;
            }
            out
        }
        Err(out) => {
            *worker = None;
            out
        }
    }
}
