//! Comparing runs: [`diff`] two of them, [`merge`] many into one table. Both
//! read reports through [`load`], which takes every version of `results.json`.

pub mod diff;
pub mod load;
pub mod merge;
