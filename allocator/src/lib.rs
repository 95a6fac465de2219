//! vkcopy: a Vulkan memory allocator and copy runtime modelled on Halide's
//! Vulkan runtime (`src/runtime/vulkan*.{h,cpp}` in Halide).
//!
//! Data flows from a [`Buffer`] (host memory, shape, dirty bits) through a
//! [`Context`] (device, allocator, queue) that allocates device memory of a
//! type chosen by a [`Policy`](memory::policy::Policy) and copies through
//! staging buffers.

/// The `ash` version vkcopy is built on, for callers that make raw Vulkan calls.
pub use ash;

pub mod buffer;
pub mod context;
pub mod copy;
pub mod device;
pub mod error;
pub mod expr;
pub mod host;
mod import;
pub mod kernels;
pub mod memory;
pub mod profile;
mod submit;
pub mod view;

pub use buffer::{Buffer, Dim, ElemType, Value};
pub use context::{Context, ContextOptions, DeviceInfo, DeviceSelector, DeviceTypeFilter, Emulate};
pub use error::{Error, Result};
pub use memory::policy::{Policy, Role};
pub use memory::table::MemoryTable;
