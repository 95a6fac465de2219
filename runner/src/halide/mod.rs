//! Halide's own Vulkan runtime as a second system under test.
//!
//! The suite's steps are Halide's entry points (`halide_device_malloc`,
//! `halide_copy_to_host`, `halide_device_crop`, ...), so a case runs on the
//! runtime that a Halide release ships: the standalone runtime object of its
//! PyPI wheel, linked into a shared library by `scripts/halide-runtime.sh`
//! (or one a maintainer builds from a Halide checkout). Setting
//! `VKCOPY_RUNTIME=halide:PATH` runs every case on it: in `cargo test`, in the
//! `run` command (`--runtime`) and in its workers, which inherit the variable.
//!
//! A case that needs what only vkcopy has (async copies, host import, measured
//! copies, vkcopy's policies, its own counters...) is skipped with that named;
//! no step falls back to vkcopy. Memory placements, leak counts and recorded
//! tables reach Halide through its Vulkan entry points (`shim.rs`).

pub(crate) mod bench;
pub(crate) mod exec;
pub(crate) mod ffi;
pub(crate) mod shim;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::outcome::{Outcome, Status};
use crate::plan::{CasePlan, RuntimePlan};

/// The variable that picks the runtime under test.
pub const VAR: &str = "VKCOPY_RUNTIME";

/// The runtime under test, from [`VAR`]: `None` for vkcopy (unset, empty or
/// `vkcopy`), else the Halide runtime library to load.
pub fn selected() -> Result<Option<PathBuf>, String> {
    let v = std::env::var(VAR).unwrap_or_default();
    match v.trim() {
        "" | "vkcopy" => Ok(None),
        s => match s.strip_prefix("halide:") {
            Some(path) if !path.is_empty() => Ok(Some(PathBuf::from(path))),
            _ => Err(format!(
                "{VAR}={s}: expected vkcopy or halide:PATH (a Halide runtime library; scripts/halide-runtime.sh VERSION builds one)"
            )),
        },
    }
}

/// A short name of the runtime library at `path`: its release for a library
/// that `scripts/halide-runtime.sh VERSION` built (`21.0.0`), else its file stem.
pub fn label(path: &Path) -> String {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    match stem.as_deref() {
        Some("libhalide_runtime_vulkan") => path
            .parent()
            .and_then(|p| p.file_name())
            .map_or("custom".into(), |v| v.to_string_lossy().into_owned()),
        Some(s) => s.to_owned(),
        None => "custom".into(),
    }
}

/// The library that `--runtime` names: `vkcopy`, `halide:VERSION` (built by
/// `scripts/halide-runtime.sh VERSION` under `target/halide/`), or `halide:PATH`.
pub fn resolve(arg: &str, repo: &Path) -> Result<Option<PathBuf>, String> {
    let arg = arg.trim();
    if arg == "vkcopy" {
        return Ok(None);
    }
    let Some(what) = arg.strip_prefix("halide:").filter(|w| !w.is_empty()) else {
        return Err(format!(
            "{arg}: expected vkcopy, halide:VERSION or halide:PATH"
        ));
    };
    let path = PathBuf::from(what);
    if path.is_file() {
        return Ok(Some(std::fs::canonicalize(&path).unwrap_or(path)));
    }
    // Built under the cases' repository, or under the one this binary was built in.
    let under = |root: &Path| {
        root.join("target/halide")
            .join(what)
            .join("libhalide_runtime_vulkan.so")
    };
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if let Some(built) = [under(repo), under(&own)].into_iter().find(|p| p.is_file()) {
        return Ok(Some(built));
    }
    let built = under(repo);
    Err(format!(
        "{arg}: no such file, and no {} (build it with scripts/halide-runtime.sh {what})",
        built.display()
    ))
}

/// Runs one case on the Halide runtime at `path`. Halide's runtime state is
/// global to the process, so cases run one at a time.
pub fn run(plan: &CasePlan, r: &RuntimePlan, path: &Path, validation: bool) -> Outcome {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    match ffi::library(path) {
        Ok(lib) => exec::run(plan, r, lib, validation),
        Err(m) => Outcome::new(Status::Fail, m, std::time::Duration::ZERO),
    }
}
