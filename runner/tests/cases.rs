//! Every YAML case below `cases/` as one test, on the default Vulkan device,
//! through the same [`Suite`] as `vkcopy-suite run`.
//!
//! A case the device cannot run is ignored, with the reason as its kind. With
//! no Vulkan device at all, device cases are ignored with the reason, or fail
//! when `CI` is set (CI must really run them).

use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use vkcopy_suite::discover::cases_root;
use vkcopy_suite::outcome::Verdict;
use vkcopy_suite::rt::ContextOptions;
use vkcopy_suite::suite::{Config, Decision, Suite};

fn main() {
    let args = Arguments::from_args();
    let exit = |e: String| -> ! {
        eprintln!("error: {e}");
        std::process::exit(2)
    };
    let options = ContextOptions::from_env().unwrap_or_else(|e| exit(e.to_string()));
    let config = Config {
        cases: cases_root(),
        options,
        expectations: Vec::new(),
    };
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
        let suite = Arc::clone(&suite);
        trials.push(Trial::test(entry.name.clone(), move || {
            let record = suite.run(&entry);
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
