//! What the suite uses of the runtime crates, in one place, so that a change of
//! their module paths is an edit of this file only.

pub use vkcopy::floor;
pub use vkcopy::memory::policy::{MemoryCaching, MemoryUsage, MemoryVisibility};
pub use vkcopy::memory::table::{
    backing_types, heap_flags_name, parse_property_flag, property_flags_name, MemoryType,
};
pub use vkcopy::types::{box_text, dense_dims, intersection, span_bytes};
pub use vkcopy::{
    counter_names, is_validation_finding, Buffer, Context, ContextOptions, CopyPath, DeviceCopy,
    DeviceInfo, DeviceType, Dim, ElemType, Emulate, Error, Event, HostBytes, InFlight,
    MappedCalibration, MappedCopy, MemoryRequest, MemoryTable, Placement, Policy, QueueCalibration,
    Role, SmallCopyQueue, SubmitSteps, Value, ENVIRONMENT, MAX_DIMS,
};

/// Vulkan memory property flags, as placements report them.
pub type MemoryPropertyFlags = vkcopy::ash::vk::MemoryPropertyFlags;
pub use vkcopy::ash::vk;
/// What a Vulkan call returned, as [`Error::Vulkan`] carries it.
pub type VkResult = vkcopy::ash::vk::Result;

/// The expression language of cases; the device kernels compile it to WGSL.
pub use vkcopy_kernels::expr;
pub use vkcopy_kernels::expr::Expr;
/// The built-in device kernels (fill, add, sum) on a [`Context`].
pub use vkcopy_kernels::Kernels;
