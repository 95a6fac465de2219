//! The suite for a fleet of machines: the suite and its Halide runtimes in
//! one file for machines without Rust ([`archive`]), and the cases of a run
//! split into shards that machines take one each ([`shard`]).

#![warn(missing_docs)]

pub mod archive;
pub mod shard;
