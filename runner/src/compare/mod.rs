//! Comparing runs: [`diff`] two of them, [`merge`] many into one table. Both
//! read reports through [`crate::report::read`], which takes every version of
//! `results.json`.

pub mod diff;
pub mod merge;
