//! The Halide-shaped runtime on top of the Vulkan layer: the context, its
//! options, device allocation of buffers, the copy entry points and their
//! paths (device-to-device by `vkCmdCopyBuffer` or the copy shader, measured),
//! copy planning, and dispatch of caller SPIR-V.

mod async_copy;
pub(crate) mod calibrations;
pub(crate) mod context;
mod copy;
pub(crate) mod copy_choice;
pub(crate) mod copy_new;
pub(crate) mod copy_queue;
mod device_copy;
pub(crate) mod dispatch;
pub(crate) mod emulate;
pub(crate) mod host_copy;
pub(crate) mod launch;
mod malloc;
mod mapped;
pub(crate) mod mapped_choice;
pub(crate) mod options;
pub(crate) mod pending;
pub(crate) mod plan;
pub(crate) mod raw_copy;
mod ring;
pub(crate) mod route;
mod staging;
mod stream_load;
mod streams;
mod transfer;
