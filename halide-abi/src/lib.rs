//! Halide's Vulkan runtime ABI over vkcopy.
//!
//! Pipelines that Halide 21 compiles ahead of time for a `vulkan` target with
//! `no_runtime` call four Vulkan symbols (`halide_vulkan_device_interface`,
//! `halide_vulkan_initialize_kernels`, `halide_vulkan_run`,
//! `halide_vulkan_finalize_kernels`); everything else goes through Halide's
//! generic device layer, which a standalone runtime without `vulkan` has.
//! Linking that runtime with this library runs the pipelines on vkcopy: its
//! memory placement, host imports, mapped uploads and staging ring.
//!
//! Modules, from the bottom: `ffi` (Halide's C types and its generic entry
//! points), `config` (the `halide_vulkan_set_*` settings), `error`,
//! `context` (the one vkcopy context), `entry` (what every entry point does), `buffer` (what `halide_buffer_t::device`
//! holds), `interface` (the device interface), `buffer_copy`
//! (`halide_buffer_copy`, in place of the generic layer's), `kernels` (Halide's kernel
//! blobs and launches), `trace` (object lifetimes for Halide's tests), `placements` (where
//! memory went, for test harnesses),
//! `vulkan` (the rest of `HalideRuntimeVulkan.h`).

#![deny(clippy::undocumented_unsafe_blocks)]

mod buffer;
mod buffer_copy;
mod config;
mod context;
mod entry;
mod error;
mod ffi;
mod interface;
mod kernels;
mod placements;
mod trace;
mod vulkan;

pub use interface::halide_vulkan_device_interface;
