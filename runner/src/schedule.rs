//! Runs a list of cases over `jobs` workers at once, each case within its time
//! limit, re-running failures up to `retries` times; calls back as each case
//! ends and gives the records in the order of the list.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::Mutex;
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
    /// When to stop handing out cases.
    pub stop: Stop,
}

/// When a run stops early, as deqp-runner's `--max-fails` and the CTS's
/// terminate-on-device-lost do: the cases not yet started are recorded as
/// skipped, with why.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stop {
    /// After this many failing verdicts.
    pub max_fails: Option<usize>,
    /// After the first case whose device was lost.
    pub on_device_lost: bool,
}

/// The tag of cases that run alone: speed cases, which other cases running
/// beside them would slow (as nextest's test groups and Halide's performance
/// lock keep them apart).
pub const EXCLUSIVE_TAG: &str = vkcopy_engine::plan::PERF_TAG;

/// Runs `entries`: first those without the [`EXCLUSIVE_TAG`] over `jobs`
/// workers, then those with it one at a time, with nothing beside them.
/// `each(record, done, total)` is called on this thread as each case ends.
/// Records come back in the order of `entries`.
pub fn run(
    suite: &Suite,
    entries: &[Entry],
    schedule: &Schedule,
    mut each: impl FnMut(&CaseRecord, usize, usize),
) -> Vec<CaseRecord> {
    let total = entries.len();
    let (alone, shared): (Vec<usize>, Vec<usize>) =
        (0..total).partition(|&i| entries[i].tags.iter().any(|t| t == EXCLUSIVE_TAG));
    // Failing verdicts so far, and why the run stopped, once it has: kept by
    // the workers, so that none starts a case after the one that stopped it.
    let stopped: Mutex<(usize, Option<String>)> = Mutex::new((0, None));
    let mut records: Vec<Option<CaseRecord>> = vec![None; total];
    let mut done = 0;
    for (phase, jobs) in [(shared, schedule.jobs), (alone, 1)] {
        run_phase(
            suite,
            entries,
            &phase,
            jobs,
            schedule,
            &stopped,
            |i, record| {
                done += 1;
                each(&record, done, total);
                records[i] = Some(record);
            },
        );
    }
    records.into_iter().flatten().collect()
}

/// Runs the entries of indices `phase` over `jobs` workers; `each(index,
/// record)` is called on this thread as each case ends.
fn run_phase(
    suite: &Suite,
    entries: &[Entry],
    phase: &[usize],
    jobs: usize,
    schedule: &Schedule,
    stopped: &Mutex<(usize, Option<String>)>,
    mut each: impl FnMut(usize, CaseRecord),
) {
    let next = AtomicUsize::new(0);
    let (tx, rx) = channel();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, phase.len().max(1)) {
            let (tx, next) = (tx.clone(), &next);
            scope.spawn(move || {
                let mut worker = None;
                while let Some(&i) = phase.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let entry = &entries[i];
                    let why = lock(stopped).1.clone();
                    let record = match why {
                        Some(why) => not_run(suite, entry, why),
                        None => {
                            let record = run_case(suite, entry, schedule, &mut worker);
                            schedule.stop.count(&record, &mut lock(stopped));
                            record
                        }
                    };
                    if tx.send((i, record)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, record) in rx {
            each(i, record);
        }
    });
}

impl Stop {
    /// Counts `record` into `state` (failing verdicts, why the run stopped).
    fn count(&self, record: &CaseRecord, state: &mut (usize, Option<String>)) {
        state.0 += usize::from(record.verdict.fails_run(false));
        let why = if self.on_device_lost && record.outcome.status == Status::DeviceLost {
            Some(format!("not run: the device was lost in {}", record.name))
        } else {
            self.max_fails
                .filter(|&m| state.0 >= m)
                .map(|m| format!("not run: {} failing cases, --max-fails {m}", state.0))
        };
        if state.1.is_none() {
            state.1 = why;
        }
    }
}

/// The record of a case that a stopped run did not start.
fn not_run(suite: &Suite, entry: &Entry, why: String) -> CaseRecord {
    suite.judge(entry, vec![Outcome::new(Status::Skip, why, Duration::ZERO)])
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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
            Err(e) => return Outcome::failed(e.to_string()),
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
