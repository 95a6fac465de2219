//! Runs each example binary of this crate (built by `cargo test` next to the
//! test binaries), small sizes, under the environment's `VKCOPY_*` settings.

mod common;

use common::context;
use vkcopy::ContextOptions;

fn run_example(name: &str, args: &[&str]) {
    if context(ContextOptions::default()).is_none() {
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let bin = dir.join("examples").join(name);
    let out = std::process::Command::new(&bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): `cargo test` builds the examples; a test run of one target does not",
                bin.display()
            )
        });
    assert!(
        out.status.success(),
        "{name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok"));
}

#[test]
fn readback_bench() {
    run_example("readback_bench", &["1", "2"]);
}

#[test]
fn submit_latency() {
    run_example("submit_latency", &["2"]);
}

#[test]
fn wrap_vk_buffer() {
    run_example("wrap_vk_buffer", &[]);
}

#[test]
fn threads() {
    run_example("threads", &["3"]);
}
