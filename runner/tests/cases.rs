//! Every YAML case below `cases/` as one test, on the default Vulkan device.
//!
//! A case the device cannot run is ignored, with the reason as its kind. With
//! no Vulkan device at all, device cases are ignored with the reason, or fail
//! when `CI` is set (CI must really run them).

use libtest_mimic::{Arguments, Failed, Trial};
use vkcopy::{Context, ContextOptions};
use vkcopy_kernels::Kernels;
use vkcopy_suite::discover::{case_files, cases_root};
use vkcopy_suite::exec::{self, Status};
use vkcopy_suite::expectations::Expectations;
use vkcopy_suite::plan;
use vkcopy_suite::report::device_slug;

fn main() {
    let args = Arguments::from_args();
    let root = cases_root();
    let files = case_files(&root).unwrap_or_else(|e| {
        eprintln!("cannot list cases in {}: {e}", root.display());
        std::process::exit(2)
    });
    let options = ContextOptions::from_env().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    // Probe the device once, to skip what it cannot run before running anything.
    let probe = Context::new(options.clone());
    // A missing loader or device ignores (or, in CI, fails) the device cases; any
    // other error is a setting to fix, and must not pass quietly.
    if let Err(e) = &probe {
        if !matches!(e, vkcopy::Error::LoaderMissing(_) | vkcopy::Error::NoDevice) {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
    let device = match &probe {
        Ok(ctx) => Ok(ctx.info().device_type),
        Err(e) => Err(e.to_string()),
    };
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    // Known failures of this device, from reports/expectations/<device>.yaml.
    let expectations = probe
        .as_ref()
        .ok()
        .map(|ctx| {
            root.join("../reports/expectations")
                .join(format!("{}.yaml", device_slug(&ctx.info().name)))
        })
        .filter(|p| p.is_file())
        .map(|p| {
            Expectations::load(&p).unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(2)
            })
        })
        .unwrap_or_default();
    let expectations = match &device {
        Ok(t) => expectations.for_device(*t),
        Err(_) => expectations,
    };

    let mut trials = Vec::new();
    for path in files {
        let name = plan::case_name(&root, &path);
        let plan = match plan::load(&root, &path) {
            Ok(p) => p,
            Err(e) => {
                let message = e.to_string();
                trials.push(Trial::test(name, move || Err(Failed::from(message))));
                continue;
            }
        };
        if plan.needs_device() {
            match &device {
                Err(e) if !in_ci => {
                    trials.push(
                        Trial::test(name, || Ok(()))
                            .with_kind("no Vulkan device")
                            .with_ignored_flag(true),
                    );
                    let _ = e;
                    continue;
                }
                Err(e) => {
                    let message = format!("needs a Vulkan device and none could be opened: {e}");
                    trials.push(Trial::test(name, move || Err(Failed::from(message))));
                    continue;
                }
                Ok(t) => {
                    let unsupported = probe.as_ref().ok().and_then(|ctx| {
                        plan.kernel_elem_types()
                            .into_iter()
                            .find_map(|e| ctx.kernel_supports(e).err())
                            .map(|e| e.to_string())
                    });
                    if let Some(why) = plan.unmet(*t).or(unsupported) {
                        trials.push(
                            Trial::test(name, || Ok(()))
                                .with_kind(format!("skip: {why}"))
                                .with_ignored_flag(true),
                        );
                        continue;
                    }
                }
            }
        }
        let options = options.clone();
        let expectations = expectations.clone();
        trials.push(Trial::test(name, move || {
            let out = expectations.apply(&plan.name, exec::run(&plan, &options));
            match out.status {
                Status::Pass | Status::Skip | Status::ExpectedFail => Ok(()),
                Status::Fail | Status::UnexpectedPass => Err(Failed::from(out.message)),
            }
        }));
    }
    if let Err(e) = &device {
        if !in_ci {
            eprintln!("note: no Vulkan device ({e}); device cases are ignored");
        }
    }
    drop(probe);
    libtest_mimic::run(&args, trials).exit();
}
