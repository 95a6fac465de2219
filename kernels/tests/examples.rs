//! Runs the example binaries of this crate (built by `cargo test` next to the
//! test binaries), under the environment's `VKCOPY_*` settings.

use vkcopy::{Context, ContextOptions, Error};

#[test]
fn image_round_trip() {
    match Context::new(ContextOptions::default()) {
        Err(Error::LoaderMissing(_) | Error::NoDevice) if std::env::var_os("CI").is_none() => {
            return
        }
        r => drop(r.expect("a context")),
    }
    let exe = std::env::current_exe().expect("the test binary");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let bin = dir.join("examples").join("image_round_trip");
    let out = std::process::Command::new(&bin)
        .args(["96", "40"])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): `cargo test` builds the examples; a test run of one target does not",
                bin.display()
            )
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ok"),
        "image_round_trip failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
