//! Device memory: memory tables, type-selection policies, the allocator and its counters.

pub(crate) mod allocator;
pub mod policy;
pub mod stats;
pub mod table;
