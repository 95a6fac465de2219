//! Comparing runs: [`diff`] two of them, [`merge`] many into one table, [`flakes`]
//! across many. All read reports through [`crate::report::read`], which takes every version of
//! `results.json`.

pub mod diff;
pub mod flakes;
pub mod merge;
