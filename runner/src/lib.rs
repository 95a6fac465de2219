//! vkcopy-suite: runs folders of YAML conformance cases for the vkcopy runtime.
//!
//! The case engine (`vkcopy-engine`) plans and runs one case; this crate
//! selects and judges the cases of a folder ([`suite`]) for the CLI and the
//! test harness, runs them over [`worker`] processes ([`schedule`]), resolves
//! the runtime under test once ([`target`]), and holds the commands beside a
//! run: [`check`], [`scaffold`] and [`bench`](mod@bench).
//! Halide's runtime comes in through `halide-harness`, archives and shards
//! through `vkcopy-fleet`.

#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod bench;
pub mod check;
pub mod error;
pub mod hook;
pub mod progress;
pub mod scaffold;
pub mod schedule;
pub mod suite;
pub mod target;
pub mod worker;

pub use vkcopy_results::{chart, compare, outcome, plot, report};
