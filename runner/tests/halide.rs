//! Cases on Halide's own Vulkan runtime, through the real binary: the same
//! case passes on vkcopy and shows Halide's placement, error codes, leak
//! accounting and copies. Needs a Halide runtime library
//! (`scripts/halide-runtime.sh 21.0.0`, which `scripts/test.sh` runs first);
//! without one the tests say so and pass.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The Halide 21 runtime built under target/halide, if it is there.
fn halide(test: &str) -> Option<PathBuf> {
    let lib = repo().join("target/halide/21.0.0/libhalide_runtime_vulkan.so");
    if lib.is_file() {
        return Some(lib);
    }
    eprintln!("{test}: skipped: no Halide runtime (scripts/halide-runtime.sh 21.0.0 builds it)");
    None
}

/// Runs the case `yaml` (named `name`) alone on `runtime`: status line and rest.
fn run(name: &str, yaml: &str, runtime: &str) -> (Option<i32>, String) {
    run_with(name, yaml, runtime, false, &[])
}

fn run_with(
    name: &str,
    yaml: &str,
    runtime: &str,
    validation: bool,
    extra: &[&str],
) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    std::fs::write(cases.join(format!("{name}.yaml")), yaml).unwrap();
    let devices = cases.join("devices");
    std::fs::create_dir(&devices).unwrap();
    for t in ["nvidia-h200", "mali-like"] {
        let from = repo().join(format!("cases/devices/{t}.yaml"));
        std::fs::copy(from, devices.join(format!("{t}.yaml"))).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_vkcopy-suite"))
        .args(["run", "--in-process", "--runtime", runtime, "--cases"])
        .arg(&cases)
        .arg("--report-dir")
        .arg(dir.path().join("out"))
        .args(extra)
        .env_remove("VKCOPY_RUNTIME")
        .env("VKCOPY_VALIDATION", if validation { "1" } else { "0" })
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

fn no_device(text: &str) -> bool {
    text.contains("no Vulkan device") && std::env::var_os("CI").is_none()
}

const SEED_H200: &str = "about: readback on the simulated H200
simulate_memory: nvidia-h200
buffers:
  g: { type: i32, extent: [256, 64] }
steps:
  - fill_host: { buffer: g, value: \"x + 256*y\" }
  - copy_to_device: g
  - fill_host: { buffer: g, value: \"0\" }
  - set_dirty: { buffer: g, host_dirty: false, device_dirty: true }
  - copy_to_host: g
  - expect: { buffer: g, value: \"x + 256*y\" }
  - expect_counters: { copies_to_device: 1, bytes_to_device: 65536, copies_to_host: 1, bytes_to_host: 65536 }
  - expect_memory: { role: readback, type: 3 }
";

/// The seed's bug, caught in real Halide on a recorded table: the data is
/// right, the copies are counted, and readback staging is in BAR-mapped VRAM.
#[test]
fn the_seeds_readback_lands_in_vram_under_halide_and_not_under_vkcopy() {
    let Some(lib) = halide("seed") else { return };
    let (code, text) = run("seed", SEED_H200, "vkcopy");
    if no_device(&text) {
        return;
    }
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run("seed", SEED_H200, &format!("halide:{}", lib.display()));
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("runtime: Halide 21.0.0"), "{text}");
    assert!(
        text.contains("seed.yaml:13:5: expect_memory: readback landed in type 4: DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT (heap 0), expected type 3"),
        "{text}"
    );
}

/// `--simulate-memory` reaches Halide as it reaches vkcopy: the case names no
/// table, and Halide's readback staging lands in the H200 table's BAR-mapped
/// VRAM (type 4), which lavapipe alone has not. The device memory that
/// `halide_copy_to_device` allocates is the buffer's `device` memory, not
/// upload staging.
#[test]
fn the_runs_simulated_table_and_roles_reach_halide() {
    let Some(lib) = halide("simulate") else {
        return;
    };
    let yaml = "about: readback on the run's table
buffers:
  g: { type: i32, extent: [256, 64] }
steps:
  - fill_host: { buffer: g, value: \"x + 256*y\" }
  - copy_to_device: g
  - expect_memory: { role: device, fallbacks: 0 }
  - expect_memory: { role: upload, fallbacks: 0 }
  - set_dirty: { buffer: g, host_dirty: false, device_dirty: true }
  - copy_to_host: g
  - expect: { buffer: g, value: \"x + 256*y\" }
  - expect_memory: { role: readback, type: 4 }
";
    let table = repo().join("cases/devices/nvidia-h200.yaml");
    let table = table.to_str().unwrap();
    let halide = format!("halide:{}", lib.display());
    let (code, text) = run_with("sim", yaml, &halide, false, &["--simulate-memory", table]);
    if no_device(&text) {
        return;
    }
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("1 passed, 0 failed"), "{text}");
    // Without the table, lavapipe's one memory type holds everything.
    let (code, text) = run_with("sim", yaml, &halide, false, &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("sim.yaml:12:5: expect_memory: readback landed in type 0"),
        "{text}"
    );
    // A policy of vkcopy's cannot reach Halide: refused, not dropped.
    let (code, text) = run_with("sim", yaml, &halide, false, &["--policy", "halide"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("policy halide (--policy, VKCOPY_POLICY): vkcopy's settings, which do not reach Halide's runtime"),
        "{text}"
    );
    // So is a vkcopy setting from the environment.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vkcopy-suite"))
        .args([
            "run",
            "--in-process",
            "--runtime",
            &halide,
            "--filter",
            "none",
        ])
        .env("VKCOPY_MAPPED_UPLOAD", "always")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("VKCOPY_MAPPED_UPLOAD=always"),
        "{out:?}"
    );
}

/// Halide's error codes reach the case by name, with halide_error's words.
#[test]
fn halide_errors_are_named_and_located() {
    let Some(lib) = halide("errors") else { return };
    let yaml = "about: a copy to the host of a buffer that has none
buffers:
  g: { type: i32, extent: [64] }
steps:
  - copy_to_device: g
  - view_no_host: { from: g, to: n }
  - set_dirty: { buffer: n, device_dirty: true }
  - copy_to_host: n
";
    let (code, text) = run("errors", yaml, &format!("halide:{}", lib.display()));
    if no_device(&text) {
        return;
    }
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("errors.yaml:8:5: copy_to_host: halide_copy_to_host returned -14 (copy_to_host_failed): "),
        "{text}"
    );
}

/// A case needing what only vkcopy has is skipped with that named, never run
/// through vkcopy; the same case runs on vkcopy.
#[test]
fn vkcopy_only_steps_skip_with_the_capability_named() {
    let Some(lib) = halide("skip") else { return };
    let yaml = "about: an async readback
buffers:
  g: { type: i32, extent: [64] }
steps:
  - copy_to_device: g
  - start_copy_to_host: g
  - wait: g
";
    let (code, text) = run("skip", yaml, &format!("halide:{}", lib.display()));
    if no_device(&text) {
        return;
    }
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("skip  skip: needs async copies (step start_copy_to_host, line 6): Halide's ABI has no entry point for it"),
        "{text}"
    );
    let (code, text) = run("skip", yaml, "vkcopy");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("1 passed, 0 failed"), "{text}");
}

/// Halide's device memory is all given back after halide_device_release, and
/// what it holds between steps is counted from its Vulkan objects.
#[test]
fn halide_memory_is_counted_and_released() {
    let Some(lib) = halide("counts") else { return };
    // 1024 bytes: a multiple of the alignment, which Halide's region
    // allocator needs (see the next test).
    let yaml = "about: counts
buffers:
  a: { type: u8, extent: [1024] }
steps:
  - fill_host: { buffer: a, value: \"x\" }
  - copy_to_device: a
  - expect_counters: { copies_to_device: 1, bytes_to_device: 1024, copies_to_host: 0, live_mappings: 0 }
  - device_free: a
  - device_release
  - expect_counters: { live_device_memories: 0, live_device_memory_bytes: 0, blocks: 0 }
";
    let (code, text) = run("counts", yaml, &format!("halide:{}", lib.display()));
    if no_device(&text) {
        return;
    }
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("1 passed, 0 failed"), "{text}");
}

/// A copy that Halide records past the end of one of its buffers is dropped
/// and fails the case, naming the sizes, without the validation layer: on
/// lavapipe Halide's region allocator makes the VkBuffer of a 1000-byte
/// buffer 960 bytes (scripts/patches/halide-19.0.0-region-sizes.patch).
#[test]
fn halide_copies_past_a_buffers_end_fail_the_case() {
    let Some(lib) = halide("past") else { return };
    let yaml = "about: past the end
buffers:
  a: { type: u8, extent: [1000] }
steps:
  - fill_host: { buffer: a, value: \"x\" }
  - copy_to_device: a
";
    let (code, text) = run("past", yaml, &format!("halide:{}", lib.display()));
    if no_device(&text) {
        return;
    }
    if !text.contains("(Cpu,") {
        eprintln!("past: skipped: not on lavapipe");
        return;
    }
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("Vulkan use: vkCmdCopyBuffer: 1000 bytes at offset 0 of a 960-byte source buffer (past its end; the Vulkan spec forbids it)"),
        "{text}"
    );
}

#[test]
fn runtime_names_resolve() {
    use vkcopy_engine::runtime::Choice;
    assert_eq!(Choice::resolve("vkcopy", repo()), Ok(Choice::Vkcopy));
    let e = Choice::resolve("halide:0.0.0", repo()).unwrap_err();
    assert!(
        e.starts_with("halide:0.0.0: no such file, and no ")
            && e.ends_with("(build it with scripts/halide-runtime.sh 0.0.0)"),
        "{e}"
    );
    assert_eq!(
        Choice::resolve("cuda", repo()).unwrap_err(),
        "cuda: expected vkcopy, halide:VERSION or halide:PATH"
    );
    let built = Choice::Halide("/x/target/halide/19.0.0/libhalide_runtime_vulkan.so".into());
    assert_eq!(built.halide_name().as_deref(), Some("19.0.0"));
    assert_eq!(built.label(), "halide-19.0.0");
    assert_eq!(
        Choice::Halide("/x/my_fix.so".into()).label(),
        "halide-my_fix"
    );
}

/// Under the validation layer, what it says about Halide fails the case, as
/// on vkcopy: here, on lavapipe, Halide's copies larger than the buffers they
/// copy between.
#[test]
fn the_validation_layer_reports_on_halide() {
    let Some(lib) = halide("validation") else {
        return;
    };
    let yaml = std::fs::read_to_string(repo().join("cases/basic/element_types.yaml")).unwrap();
    let (code, text) = run_with(
        "types",
        &yaml,
        &format!("halide:{}", lib.display()),
        true,
        &[],
    );
    if no_device(&text) {
        return;
    }
    // The overlap comes from lavapipe's rounding of buffer sizes.
    if !text.contains("(Cpu,") {
        eprintln!("validation: skipped: not on lavapipe");
        return;
    }
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("validation message(s):"), "{text}");
    assert!(text.contains("VUID-vkCmdCopyBuffer-size-00115"), "{text}");
}

/// The seed's readback cases tell a fixed Halide from a broken one: on
/// Halide 19.0.0's runtime each fails with readback staging out of place,
/// and on the same release rebuilt from its sources with the seed's fix
/// (`scripts/halide-runtime.sh 19.0.0-fixed`) each passes. Needs both
/// libraries, which `scripts/test.sh` builds first; in CI their absence fails.
#[test]
fn the_seeds_readback_cases_pass_on_19_fixed_and_fail_on_19() {
    let lib = |v: &str| repo().join(format!("target/halide/{v}/libhalide_runtime_vulkan.so"));
    let (broken, fixed) = (lib("19.0.0"), lib("19.0.0-fixed"));
    if !broken.is_file() || !fixed.is_file() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no {} or {} (scripts/halide-runtime.sh 19.0.0 and 19.0.0-fixed build them)",
            broken.display(),
            fixed.display()
        );
        eprintln!(
            "seed readback: skipped: build 19.0.0 and 19.0.0-fixed with scripts/halide-runtime.sh"
        );
        return;
    }
    let seeds = [
        "h200",
        "h200_vram_nearly_full",
        "rtx4070",
        "rtx4070_bar_full",
    ];
    // Against the repository's expectation files: each is a listed failure of
    // 19.0.0 (xfail) and no failure of 19.0.0-fixed.
    for (runtime, status) in [(&broken, "xfail"), (&fixed, "pass ")] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_vkcopy-suite"))
            .args([
                "run",
                "--in-process",
                "--filter",
                "regressions::seed_readback::*",
            ])
            .arg("--runtime")
            .arg(format!("halide:{}", runtime.display()))
            .arg("--cases")
            .arg(repo().join("cases"))
            .arg("--report-dir")
            .arg(dir.path())
            .env_remove("VKCOPY_RUNTIME")
            .env("VKCOPY_VALIDATION", "0")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if no_device(&text) {
            return;
        }
        assert_eq!(out.status.code(), Some(0), "{}: {text}", runtime.display());
        // The name ends the same way in both lines: `xfail NAME: expected
        // failure (...)` and `pass  NAME (1.07 s)`.
        let end = if status == "xfail" { ":" } else { " (" };
        for seed in seeds {
            let line = format!("{status} regressions::seed_readback::{seed}{end}");
            assert!(
                text.contains(&line),
                "{}: no {line:?} in {text}",
                runtime.display()
            );
        }
        if status == "xfail" {
            assert!(text.contains("readback staging lands in"), "{text}");
        }
    }
}
