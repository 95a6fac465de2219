//! vkcopy: a Vulkan memory allocator and copy runtime modelled on Halide's
//! Vulkan runtime (`src/runtime/vulkan*.{h,cpp}` in Halide).
//!
//! A [`Buffer`] is a `halide_buffer_t`: an element type, dimensions of (min,
//! extent, stride), host memory, and `host_dirty` / `device_dirty` bits. A
//! [`Context`] opens a device; it allocates device memory of a type chosen by a
//! [`Policy`], copies between host and device with Halide's dirty-bit rules, and
//! accounts for every object it makes, so that a leak check can say what is left.
//!
//! ```no_run
//! use vkcopy::{Buffer, Context, ContextOptions, ElemType};
//!
//! # fn main() -> vkcopy::Result<()> {
//! let ctx = Context::new(ContextOptions::default())?;
//! let mut img = Buffer::new("img", ElemType::I32, &[640, 480])?;
//! img.fill(|c| c[0] + 1000 * c[1])?; // host_dirty
//! ctx.copy_to_device(&mut img)?; // uploads, clears host_dirty
//!
//! // A crop aliases the same device memory; a copy moves the intersection of
//! // the boxes, here the crop's 64x64 elements.
//! let crop = img.cropped("crop", &[100, 100], &[64, 64])?;
//! let mut out = Buffer::new("out", ElemType::I32, &[640, 480])?;
//! ctx.buffer_copy(&crop, &mut out, false)?;
//! assert_eq!(out.get(&[100, 100])?, vkcopy::Value::Int(100 + 1000 * 100));
//! # drop((crop, out, img));
//! assert!(ctx.leak_check().is_empty());
//! # Ok(())
//! # }
//! ```
//!
//! Layers, from the bottom: [`types`] and [`Error`]; the memory core
//! ([`memory`]: tables, policies, configuration, no Vulkan calls); the Vulkan
//! layer (instance, device, allocator, submission, host import); buffers and
//! views; the runtime ([`Context`]: `device_malloc`, `buffer_copy`, crops,
//! `wrap_vk_buffer`, dispatch of SPIR-V).
//!
//! Cargo features: `yaml` reads and writes recorded memory tables;
//! `simulate` presents a recorded table on top of the real device; `emulate`
//! brings back known Halide bugs. A conformance suite turns them on; a runtime
//! user needs none.

#![warn(missing_docs, unreachable_pub, clippy::undocumented_unsafe_blocks)]

/// The `ash` version vkcopy is built on, for callers that make raw Vulkan calls.
pub use ash;

mod buffer;
mod emulate;
mod error;
pub mod memory;
mod profile;
mod runtime;
mod stats;
pub mod types;
mod vk;

pub use buffer::host::{HostBytes, HOST_ALIGNMENT};
pub use buffer::{
    Buffer, Comparison, DeviceView, Element, HostMemory, HostSlice, HostSliceMut, HostView,
    Mismatch,
};
#[cfg(feature = "emulate")]
pub use emulate::Emulate;
pub use error::{Error, Result};
pub use memory::config::AllocConfig;
pub use memory::policy::{MemoryRequest, Policy, Role};
pub use memory::table::{DeviceType, MemoryTable};
pub use profile::CopyStats;
pub use runtime::context::{Context, COUNTER_NAMES};
pub use runtime::copy_choice::CopyCalibration;
pub use runtime::copy_new::Copied;
pub use runtime::dispatch::{Binding, Dispatch, PipelineStats, Shader};
pub use runtime::launch::{Access, Arg};
pub use runtime::options::{ContextOptions, DeviceCopy, ENVIRONMENT};
pub use stats::{Counter, LeakReport, Placement, Stats};
pub use types::{CopyPath, Dim, ElemType, Value, MAX_DIMS};
pub use vk::adapter::{DeviceInfo, DeviceSelector, DeviceSummary, DeviceTypeFilter};
pub use vk::region::Region;
