//! vkcopy: a Vulkan memory allocator and copy runtime modelled on Halide's
//! Vulkan runtime (`src/runtime/vulkan*.{h,cpp}` in Halide).
//!
//! A [`Buffer`] is a `halide_buffer_t`: an element type, dimensions of (min,
//! extent, stride), host memory, and `host_dirty` / `device_dirty` bits. A
//! [`Context`] opens a device; it allocates device memory of a type chosen by a
//! [`Policy`], copies between host and device with Halide's dirty-bit rules, and
//! accounts for every object it makes, so that a leak check can say what is left.
//!
//! # Walk-through
//!
//! This is adapted from `kernels/examples/image_round_trip.rs` (run it with `cargo run -p
//! vkcopy-kernels --example image_round_trip`); the other examples are
//! `allocator/examples/`: `readback_bench` (readback into caller memory),
//! `wrap_vk_buffer` (a `VkBuffer` the caller made) and `threads` (one context,
//! several threads).
//!
//! ```no_run
//! use vkcopy::{Arg, Buffer, Context, ContextOptions, Shader};
//! // The caller's SPIR-V with the crop's base baked in, compiled ahead of time
//! // into `scale_<base>.spv` (from WGSL by `vkcopy_kernels::compile_wgsl`, as
//! // `kernels/examples/image_round_trip.rs` does).
//! fn scale_spirv(base: u64) -> vkcopy::Result<Vec<u32>> {
//!     let path = format!("scale_{base}.spv");
//!     let failed = |e: std::io::Error| vkcopy::Error::KernelCompileFailed(format!("{path}: {e}"));
//!     let bytes = std::fs::read(&path).map_err(failed)?;
//!     vkcopy::ash::util::read_spv(&mut std::io::Cursor::new(bytes)).map_err(failed)
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 1. A context: `default()` reads nothing from the environment; `from_env()`
//! //    reads the `VKCOPY_*` variables of `ENVIRONMENT`.
//! let ctx = Context::new(ContextOptions::default())?;
//!
//! // 2. A 2-D f32 image over the caller's own `Vec`, without a copy. Its host side
//! //    holds the data, so it is host-dirty; `copy_to_device` uploads it.
//! let (w, h) = (256, 128);
//! let pixels: Vec<f32> = (0..w * h).map(|i| i as f32).collect();
//! let mut img = Buffer::from_vec("img", &[w, h], pixels)?;
//! ctx.copy_to_device(&mut img)?;
//!
//! // 3. A crop: the box (64..192, 32..96), sharing the image's host and device
//! //    memory. Its element at its mins is element `base` of its binding.
//! let mut crop = img.cropped("crop", &[64, 32], &[128, 64])?;
//! let base = ctx.bind(&crop)?.base;
//!
//! // 4. The caller's kernel on the crop: the runtime uploads what is host-dirty,
//! //    writes the descriptors, synchronises, and marks the crop device-dirty. A
//! //    WGSL kernel goes through `vkcopy_kernels::Kernels::kernel_wgsl` instead.
//! let key = format!("scale at {base}");
//! let spirv = || scale_spirv(base);
//! let shader = Shader { key: &key, spirv: &spirv };
//! ctx.launch(shader, &mut [Arg::read_write(&mut crop)], 128)?;
//!
//! // 5. A device-to-device copy of the crop into a new buffer of its shape (its
//! //    mins too: `buffer_copy` copies where coordinates agree, and
//! //    `buffer_copy_counted` refuses boxes that do not intersect).
//! let copy = ctx.copy_to_new(&crop, "copy", true)?;
//!
//! // 6. Readback. The kernel wrote through the crop; the image knows its device
//! //    side is newer (`is_device_dirty`), so `copy_to_host` reads it. Typed access
//! //    refuses a device-dirty host (`Error::DeviceDirty`) instead of reading stale
//! //    data; `host_mut` marks the buffer host-dirty when its guard drops.
//! ctx.copy_to_host(&mut img)?;
//! let px = img.host::<f32>()?;
//! println!("{}", px[(64 + 32 * w) as usize]);
//! drop(px);
//!
//! // 7. The leak check: `leak_check` says what is still alive; `close` tears the
//! //    context down and says what leaked.
//! drop((crop, copy, img));
//! let report = ctx.close();
//! assert!(report.is_empty(), "{report}");
//! # Ok(())
//! # }
//! ```
//!
//! The dirty-bit rules are Halide's per buffer (`host_dirty`, `device_dirty`),
//! plus one: writes through any buffer over some memory are counted on the
//! memory, so a crop's parent (and every other view) learns of them
//! ([`Buffer::is_host_dirty`], [`Buffer::is_device_dirty`]).
//!
//! Copies can also run asynchronously, each on a stream of its own (uploads and
//! readbacks on the device's transfer queues where it has them):
//! [`Context::start_copy_to_host`], [`Context::start_copy_to_device`] and
//! [`Context::start_buffer_copy`] return a [`Pending`] handle that borrows the
//! buffers until it is waited for; [`Pending::event`] and [`HostEvent`] order
//! later copies after it; the `_owned` variants return an [`InFlight`] that owns
//! the destination. [`Pending`] states what may be touched meanwhile. Every wait
//! for the device is bounded by [`ContextOptions::timeout`].
//!
//! Layers, from the bottom: [`types`] and [`Error`]; the memory core
//! ([`memory`]: tables, policies, configuration, no Vulkan calls); the Vulkan
//! layer (instance, device, allocator, submission, host import); buffers and
//! views; the runtime ([`Context`]: `device_malloc`, `buffer_copy`, crops,
//! `wrap_vk_buffer`, dispatch of SPIR-V).
//!
//! Cargo features: `yaml` reads and writes recorded memory tables;
//! `simulate` presents a recorded table on top of the real device; `emulate`
//! brings back known Halide bugs; `fault-injection` makes chosen Vulkan calls
//! fail, for tests of error paths (module `fault`, `VKCOPY_FAULTS`). A conformance suite turns them on; a runtime
//! user needs none.

#![warn(missing_docs, unreachable_pub, clippy::undocumented_unsafe_blocks)]

/// The `ash` version vkcopy is built on, for callers that make raw Vulkan calls.
pub use ash;

mod buffer;

mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod floor;
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
pub use error::{Error, Result};
pub use memory::config::AllocConfig;
pub use memory::policy::{MemoryRequest, Policy, Role};
pub use memory::table::{DeviceType, MemoryTable};
pub use profile::{CopyStats, SubmitSteps};
pub use runtime::context::{counter_names, Context, ExternalDevice};
pub use runtime::copy_choice::CopyCalibration;
pub use runtime::copy_new::Copied;
pub use runtime::copy_queue::{QueueCalibration, QueueTime};
pub use runtime::dispatch::{Binding, Dispatch, PipelineStats, Shader, MAX_PUSH_WORDS};
#[cfg(feature = "emulate")]
pub use runtime::emulate::Emulate;
pub use runtime::host_copy::copy_host;
pub use runtime::launch::{Access, Arg};
pub use runtime::mapped_choice::MappedCalibration;
pub use runtime::options::{
    ContextOptions, CopyModel, DeviceCopy, MappedCopy, SmallCopyQueue, ENVIRONMENT,
};
pub use runtime::pending::{Event, HostEvent, InFlight, Pending};
pub use runtime::raw_copy::RawCopy;
pub use stats::{Counter, LeakReport, Placement, Stats};
pub use types::{box_text, CopyPath, Dim, ElemType, Value, MAX_DIMS};
pub use vk::adapter::{DeviceInfo, DeviceSelector, DeviceSummary, DeviceTypeFilter};
pub use vk::gate::Guarded;
/// The process's layer gate, for Vulkan that vkcopy did not make.
pub mod layer_gate {
    pub use crate::vk::gate::{calling, creating, Exclusive, Shared};
}
pub use vk::instance::{is_validation_finding, messenger_info, use_loader, Findings};
pub use vk::interpose;
pub use vk::region::Region;
