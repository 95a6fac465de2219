//! Device memory: memory tables, type-selection policies, the allocator and its counters.

pub(crate) mod allocator;
pub mod block;
pub mod config;
pub mod policy;
pub mod region;
pub mod stats;
pub mod table;
