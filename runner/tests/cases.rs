//! Every YAML case below `cases/` as one test, on the default Vulkan device,
//! through the same [`Suite`] as `vkcopy-suite run`.
//!
//! Each case runs in a worker process of `vkcopy-suite` as under `vkcopy-suite
//! run` (a crash or hang fails only its test, with the status `crash` or
//! `timeout`); one worker per test thread, replaced after a crash. A worker
//! is never handed to another thread: it dies with the thread that started it
//! (`PR_SET_PDEATHSIG`), and libtest ends a thread as soon as no test is left
//! for it, while others may still be running theirs.
//!
//! A case the device cannot run is ignored, with the reason as its kind. With
//! no Vulkan device at all, device cases are ignored with the reason, or fail
//! when `CI` is set (CI must really run them).

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use vkcopy_engine::discover::cases_root;
use vkcopy_engine::rt::ContextOptions;

use vkcopy_suite::schedule::{self, Schedule, DEFAULT_TIMEOUT};
use vkcopy_suite::suite::{Config, Decision, Suite};
use vkcopy_suite::worker::{Overrides, Spawn, Worker};

thread_local! {
    /// This test thread's worker, started by its first case.
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

fn main() {
    let args = Arguments::from_args();
    fn exit(e: impl std::fmt::Display) -> ! {
        eprintln!("error: {e}");
        std::process::exit(2)
    }
    // Speed is reported here, not held, unless asked for: other load on the
    // machine would decide the verdict (scripts/test.sh holds it in a run of
    // its own).
    if std::env::var_os(vkcopy_engine::SPEED_VAR).is_none() {
        std::env::set_var(vkcopy_engine::SPEED_VAR, "report");
    }
    let options = ContextOptions::from_env().unwrap_or_else(|e| exit(e));
    let config = Config {
        cases: cases_root(),
        options,
        expectations: Vec::new(),
        runtime: vkcopy_suite::target::from_env().unwrap_or_else(|e| exit(e)),
    };
    let spawn = Spawn::new(
        Path::new(env!("CARGO_BIN_EXE_vkcopy-suite")),
        &config.cases,
        &Overrides {
            runtime: config.runtime.clone(),
            ..Overrides::default()
        },
    );
    let schedule = Arc::new(Schedule {
        jobs: 1,
        retries: 0,
        timeout: DEFAULT_TIMEOUT,
        spawn: Some(spawn),
        stop: Default::default(),
    });
    let suite = Arc::new(Suite::open(config).unwrap_or_else(|e| exit(e)));
    let entries = suite.entries(None).unwrap_or_else(|e| exit(e));
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    let mut trials = Vec::new();
    for entry in entries {
        let ignored = match &entry.decision {
            Decision::Skip(why) => Some(format!("skip: {why}")),
            Decision::NoDevice(_) if !in_ci => Some("no Vulkan device".to_owned()),
            _ => None,
        };
        if let Some(kind) = ignored {
            let trial = Trial::test(entry.name, || Ok(()));
            trials.push(trial.with_kind(kind).with_ignored_flag(true));
            continue;
        }
        let (suite, schedule) = (Arc::clone(&suite), Arc::clone(&schedule));
        trials.push(Trial::test(entry.name.clone(), move || {
            let record = WORKER
                .with_borrow_mut(|worker| schedule::run_case(&suite, &entry, &schedule, worker));
            match record.verdict.fails_run(false) {
                false => Ok(()),
                true => Err(Failed::from(format!(
                    "{}: {}",
                    record.outcome.status, record.outcome.message
                ))),
            }
        }));
    }
    if let (Err(e), false) = (&suite.device, in_ci) {
        eprintln!("note: no Vulkan device ({e}); device cases are ignored");
    }
    libtest_mimic::run(&args, trials).exit();
}
