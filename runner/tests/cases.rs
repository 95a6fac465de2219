//! Every YAML case below `cases/` as one test, on the default Vulkan device,
//! through the same [`Suite`] as `vkcopy-suite run`.
//!
//! Each case runs in a worker process of `vkcopy-suite` as under `vkcopy-suite
//! run` (a crash or hang fails only its test, with the status `crash` or
//! `timeout`); one worker per test thread, replaced after a crash.
//!
//! A case the device cannot run is ignored, with the reason as its kind. With
//! no Vulkan device at all, device cases are ignored with the reason, or fail
//! when `CI` is set (CI must really run them).

use std::path::Path;
use std::sync::{Arc, Mutex};

use libtest_mimic::{Arguments, Failed, Trial};
use vkcopy_suite::discover::cases_root;
use vkcopy_suite::rt::ContextOptions;
use vkcopy_suite::runtime::Choice;
use vkcopy_suite::schedule::{self, Schedule, DEFAULT_TIMEOUT};
use vkcopy_suite::suite::{Config, Decision, Suite};
use vkcopy_suite::worker::{Overrides, Spawn, Worker};

fn main() {
    let args = Arguments::from_args();
    let exit = |e: String| -> ! {
        eprintln!("error: {e}");
        std::process::exit(2)
    };
    // Speed is reported here, not held, unless asked for: other load on the
    // machine would decide the verdict (scripts/test.sh holds it in a run of
    // its own).
    if std::env::var_os(vkcopy_suite::SPEED_VAR).is_none() {
        std::env::set_var(vkcopy_suite::SPEED_VAR, "report");
    }
    let options = ContextOptions::from_env().unwrap_or_else(|e| exit(e.to_string()));
    let config = Config {
        cases: cases_root(),
        options,
        expectations: Vec::new(),
        runtime: Choice::from_env().unwrap_or_else(|e| exit(e)),
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
    // Idle workers, taken by a test thread for a case and given back after it.
    let idle: Arc<Mutex<Vec<Worker>>> = Arc::default();
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
        let (suite, schedule, idle) =
            (Arc::clone(&suite), Arc::clone(&schedule), Arc::clone(&idle));
        trials.push(Trial::test(entry.name.clone(), move || {
            let mut worker = idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let record = schedule::run_case(&suite, &entry, &schedule, &mut worker);
            if let Some(w) = worker {
                idle.lock().unwrap_or_else(|p| p.into_inner()).push(w);
            }
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
