//! The runtime under test resolved once, from its name on the command line
//! or in `VKCOPY_RUNTIME`, into the value the engine runs cases on.

use std::path::Path;

use vkcopy_engine::runtime::{Capability, Choice, Target};

use crate::error::SuiteError;

/// The runtime `choice` names: vkcopy's own API, or a library of Halide's
/// ABI through the Halide harness.
pub fn target(choice: Choice) -> Target {
    match choice {
        Choice::Vkcopy => Target::vkcopy(),
        Choice::Halide(path) => halide_harness::target(&path),
    }
}

/// The runtime `arg` names (`vkcopy`, `halide:VERSION` or `halide:PATH`; see
/// [`Choice::resolve`]), resolved against `repo`.
pub fn resolve(arg: &str, repo: &Path) -> Result<Target, SuiteError> {
    Choice::resolve(arg, repo)
        .map(target)
        .map_err(SuiteError::Runtime)
}

/// The runtime of `VKCOPY_RUNTIME` (vkcopy when unset).
pub fn from_env() -> Result<Target, SuiteError> {
    Choice::from_env().map(target).map_err(SuiteError::Runtime)
}

/// Every kind of runtime the suite runs, with what it has beyond the
/// primitives: the columns of `cases/RUNTIMES.md`.
pub const RUNTIMES: &[(&str, &[Capability])] = &[
    ("vkcopy", &Capability::ALL),
    ("Halide's runtime", halide_harness::CAPABILITIES),
];
