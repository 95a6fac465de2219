//! The case engine of vkcopy's conformance suite.
//!
//! Data flows one way: case file (`case`, `steps`) -> [`plan`] (checked,
//! repeats expanded) -> [`exec`] (runs on the runtime under test, through the
//! seam of [`runtime`]) -> outcome, judged against [`expectations`]. [`rt`]
//! is everything the engine takes from the runtime crate. What runs a folder
//! of cases, and the command line, are the `vkcopy-suite` crate's.

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub(crate) mod case;
pub mod discover;
pub mod error;
pub mod exec;
pub mod expectations;
pub mod explain;
pub mod files;
pub mod layers;
pub mod manifest;
pub(crate) mod names;
pub mod plan;
pub mod reference;
pub mod requires;
pub mod rt;
pub mod runtime;
pub mod schema;
pub(crate) mod selection;
pub mod stamp;
pub mod step_table;
pub(crate) mod steps;
pub mod timing;
pub(crate) mod vocab;

pub use rt::expr;
/// What the device kernels of `add`, `map` and `sum` compute, on the host: a
/// runtime that emulates them (Halide's harness) writes these results.
pub use steps::compute::{add_sums, combine, sums_over};
pub use steps::measure::SPEED_VAR;
