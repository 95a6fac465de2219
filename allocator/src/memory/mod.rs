//! The memory core, without Vulkan calls: memory tables, type-selection
//! policies, allocator configuration, and the block and region bookkeeping
//! that the device allocator (`vk::allocator`) drives.

#![forbid(unsafe_code)]

pub(crate) mod block;
pub mod config;
pub mod policy;
pub(crate) mod region;
pub(crate) mod room;
pub mod table;
#[cfg(feature = "yaml")]
mod table_yaml;
