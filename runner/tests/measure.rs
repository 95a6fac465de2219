//! Speed thresholds of `measure` steps: held on a GPU without the validation
//! layer; reported and not held under it (its cost per call is part of every
//! time), on a CPU device such as lavapipe (its speed is the machine's load as
//! much as the code's) unless a run says `hold`, or where a run says `report`.

mod common;

use vkcopy_engine::rt::ContextOptions;
use vkcopy_suite::outcome::{Outcome, Status};

/// A case no device can pass on speed: 1 MiB readback at 1e6 GB/s, and at
/// 1000x a host memcpy.
const CASE: &str = "\
about: a threshold no device meets
buffers:
  g: { type: u8, extent: [1048576] }
steps:
  - fill_host: { buffer: g, value: \"x\" }
  - copy_to_device: g
  - measure: { copy_to_host: g, repeat: 2, min_gbps: { any: 1000000 } }
  - measure: { copy_to_host: g, repeat: 2, min_ratio: { of: host_memcpy, value: 1000 } }
  - expect: { buffer: g, value: \"x\" }
";

fn run(validation: bool) -> Option<Outcome> {
    let options = ContextOptions {
        validation,
        ..ContextOptions::from_env().unwrap()
    };
    common::run_case("too_fast.yaml", CASE, &options)
}

/// Without the layer and with speed left to the device (`auto`, the default),
/// a miss fails the case on a GPU and is reported on a CPU device.
#[test]
fn thresholds_fail_on_a_gpu_and_are_reported_on_a_cpu_device() {
    let options = ContextOptions {
        validation: false,
        ..ContextOptions::from_env().unwrap()
    };
    let Ok(Ok(device)) = vkcopy_suite::suite::probe(&options) else {
        return;
    };
    if std::env::var_os(vkcopy_engine::SPEED_VAR).is_some() {
        eprintln!("skipped: {} is set", vkcopy_engine::SPEED_VAR);
        return;
    }
    let Some(out) = run(false) else { return };
    if device.device_type == vkcopy_engine::rt::DeviceType::Cpu {
        assert_eq!(out.status, Status::Pass, "{}", out.message);
        let speed = out.measurements[0].not_held.as_deref().unwrap_or_default();
        assert!(
            speed.starts_with("on a CPU device (VKCOPY_SPEED=auto) (measure copy_to_host g: "),
            "{speed}"
        );
        assert!(speed.contains("below the 1000000 GB/s expected"), "{speed}");
        return;
    }
    assert_eq!(out.status, Status::Fail, "{}", out.message);
    assert!(
        out.message.contains("below the 1000000 GB/s expected"),
        "{}",
        out.message
    );
    assert!(
        out.message.contains("too_fast.yaml:7:5: measure"),
        "{}",
        out.message
    );
}

#[test]
fn thresholds_are_reported_not_held_under_the_validation_layer() {
    if !std::path::Path::new("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")
        .exists()
    {
        return;
    }
    let Some(out) = run(true) else { return };
    assert_eq!(out.status, Status::Pass, "{}", out.message);
    assert_eq!(out.measurements.len(), 2);
    let speed = out.measurements[0].not_held.as_deref().unwrap_or_default();
    assert!(speed.contains("under the validation layer"), "{speed}");
    assert!(speed.contains("below the 1000000 GB/s expected"), "{speed}");
    let ratio = out.measurements[1].not_held.as_deref().unwrap_or_default();
    assert!(ratio.contains("below the 1000x expected"), "{ratio}");
    assert!(out.measurements[1].ratio.is_some());
}

/// `--speed hold` fails the case on any device, lavapipe included; `report`
/// passes it with its miss kept with the figures, in the workers too.
#[test]
fn speed_is_held_or_reported_as_the_run_says() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    std::fs::write(cases.join("too_fast.yaml"), CASE).unwrap();
    let run = |speed: &str| {
        let reports = dir.path().join(format!("reports-{speed}"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vkcopy-suite"))
            .args(["run", "--speed", speed, "--cases"])
            .arg(&cases)
            .arg("--report-dir")
            .arg(&reports)
            .env("VKCOPY_VALIDATION", "0")
            .env_remove("VKCOPY_SPEED")
            .output()
            .unwrap();
        (out, reports)
    };
    let (held, _) = run("hold");
    let stdout = String::from_utf8_lossy(&held.stdout);
    if stdout.contains("no Vulkan device") && std::env::var_os("CI").is_none() {
        return;
    }
    assert_eq!(held.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("below the 1000000 GB/s expected"),
        "{stdout}"
    );
    let (reported, reports) = run("report");
    let stdout = String::from_utf8_lossy(&reported.stdout);
    assert!(reported.status.success(), "{stdout}");
    let results = walk(&reports, "results.json");
    let text = std::fs::read_to_string(&results).unwrap();
    assert!(
        text.contains("\"not_held\": \"VKCOPY_SPEED=report (measure copy_to_host g: "),
        "{text}"
    );
    assert!(text.contains("below the 1000000 GB/s expected"), "{text}");
}

/// The first file named `name` under `dir`.
fn walk(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            let found = walk(&p, name);
            if found.exists() {
                return found;
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return p;
        }
    }
    dir.join("missing").join(name)
}

/// `of: floor` times the driver's floor in the step, on every path: its
/// figures are in the ratio, and under the layer (reported, not held) a miss
/// of an impossible ratio says so. Impossible under any load: a billion
/// times the floor's GB/s, where a slow floor (a loaded machine's, a few
/// runs) once let vkcopy's CPU-read 64 KiB meet 1000x in a release soak.
#[test]
fn a_floor_is_timed_as_a_reference_on_every_path() {
    const FLOOR: &str = "\
about: every path against the driver's floor
buffers:
  a: { type: u8, extent: [65536] }
  b: { type: u8, extent: [65536] }
steps:
  - fill_host: { buffer: a, value: \"x % 251\" }
  - copy_to_device: a
  - device_malloc: b
  - measure: { copy_to_host: a, repeat: 3, min_ratio: { of: floor, value: 1000000000 } }
  - measure: { copy_to_device: a, repeat: 3, min_ratio: { of: floor, value: 1000000000 } }
  - measure: { from: a, to: b, repeat: 3, min_ratio: { of: floor, value: 1000000000 } }
  - copy_to_host: b
  - expect: { buffer: b, value: \"x % 251\" }
";
    let options = ContextOptions {
        validation: true,
        ..ContextOptions::from_env().unwrap()
    };
    if !std::path::Path::new("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")
        .exists()
    {
        return;
    }
    let Some(out) = common::run_case("floor.yaml", FLOOR, &options) else {
        return;
    };
    assert_eq!(out.status, Status::Pass, "{}", out.message);
    assert_eq!(out.measurements.len(), 3);
    for m in &out.measurements {
        let r = m.ratio.as_ref().expect("a ratio");
        assert_eq!(r.of, "floor");
        assert!(
            r.reference_gbps > 0.0 && r.reference_gbps.is_finite(),
            "{r:?}"
        );
        assert!(r.reference_median_gbps <= r.reference_gbps, "{r:?}");
        let not_held = m.not_held.as_deref().unwrap_or_default();
        assert!(
            not_held.contains("below the 1000000000x expected"),
            "{not_held}"
        );
    }
}
