//! Every Vulkan call of the runtime: loader and instance, device selection, the
//! shared device object, submission, the device allocator, the heaps its blocks
//! come from and its mappings, regions, host import, the pipeline cache and the
//! copy kernel, and simulation of recorded tables.

pub(crate) mod adapter;
pub(crate) mod allocator;
pub(crate) mod copy_kernel;
pub(crate) mod descriptors;
pub(crate) mod device;
pub(crate) mod gate;
pub(crate) mod heaps;
#[cfg(feature = "fault-injection")]
pub(crate) mod hooks;
pub(crate) mod import;
pub(crate) mod instance;
pub mod interpose;
mod mapping;
pub(crate) mod pipelines;
pub(crate) mod queue;
pub(crate) mod region;
pub(crate) mod simulate;
pub(crate) mod submit;
pub(crate) mod submitters;
