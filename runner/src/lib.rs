//! vkcopy-suite: YAML conformance cases for the vkcopy runtime.
//!
//! Data flows one way: case file (`case`, `steps`) -> [`plan`] (checked,
//! repeats expanded) -> [`exec`] (runs on a `vkcopy` context) -> [`outcome`]
//! -> [`report`]. [`suite`] selects and judges the cases of a folder for the
//! CLI and the test harness; [`schedule`] runs them over [`worker`] processes;
//! [`rt`] is everything the suite takes from the runtime.

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod archive;
pub mod bench;
pub(crate) mod case;
pub mod check;
pub mod discover;
pub(crate) mod error;
pub mod exec;
pub mod expectations;
pub mod explain;
pub mod files;
pub mod halide;
pub mod hook;
pub mod layers;
pub(crate) mod names;
pub mod plan;
pub mod progress;
pub mod reference;
pub(crate) mod requires;
pub mod rt;
pub mod runtime;
pub mod scaffold;
pub mod schedule;
pub mod schema;
pub(crate) mod selection;
pub mod shard;
pub(crate) mod stamp;
pub mod step_table;
pub(crate) mod steps;
pub mod suite;
pub(crate) mod timing;
pub(crate) mod vocab;
pub mod worker;

pub use rt::expr;
pub use steps::measure::SPEED_VAR;
pub use vkcopy_results::{chart, compare, outcome, plot, report};
