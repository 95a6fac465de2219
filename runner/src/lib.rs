//! vkcopy-suite: YAML conformance cases for the vkcopy runtime.
//!
//! Data flows one way: case file ([`case`], [`steps`]) -> [`plan`] (checked,
//! repeats expanded) -> [`exec`] (runs on a `vkcopy` context) -> [`outcome`]
//! -> [`report`]. [`suite`] selects and judges the cases of a folder for the
//! CLI and the test harness; [`schedule`] runs them over [`worker`] processes;
//! [`rt`] is everything the suite takes from the runtime.

pub mod bench;
pub mod case;
pub mod check;
pub mod compare;
pub mod discover;
pub mod error;
pub mod exec;
pub mod expectations;
pub mod explain;
pub mod files;
pub mod halide;
pub mod hook;
pub mod names;
pub mod outcome;
pub mod plan;
pub mod plot;
pub mod progress;
pub mod reference;
pub mod report;
pub mod requires;
pub mod rt;
pub mod scaffold;
pub mod schedule;
pub mod schema;
pub mod selection;
pub mod stamp;
pub mod steps;
pub mod suite;
pub mod timing;
pub mod vocab;
pub mod worker;

pub use rt::expr;
