//! vkcopy-results: what a run of vkcopy-suite leaves, and what is made of it.
//! [`outcome`] is one case's result; [`report`] a run's, written as JSON, CSV,
//! Markdown and JUnit and read back from any version; [`compare`] diffs,
//! merges and finds flakes across runs; [`chart`] draws SVG and PNG charts,
//! and [`plot`] the throughput charts of reports. It knows nothing of how
//! cases run.

#![warn(missing_docs)]

pub mod chart;
pub mod compare;
pub mod outcome;
pub mod plot;
pub mod report;
