//! vkcopy-suite: YAML conformance cases for the vkcopy runtime.
//!
//! Data flows one way: case file -> [`plan`] (checked case) -> [`exec`]
//! (runs on a `vkcopy` context) -> [`report`].

pub mod case;
pub mod discover;
pub mod exec;
pub mod expectations;
/// The expression language of cases lives in the runtime, which also compiles it to WGSL.
pub use vkcopy_kernels::expr;
pub mod plan;
pub mod plot;
pub mod report;
