//! What the suite uses of the runtime, in one place, so that a change of the
//! runtime's module paths is an edit of this file only.

pub use vkcopy::buffer::{dense_dims, span_bytes, Dim, MAX_DIMS};
pub use vkcopy::context::COUNTER_NAMES;
pub use vkcopy::memory::policy::MemoryRequest;
pub use vkcopy::memory::stats::Placement;
pub use vkcopy::memory::table::{parse_property_flag, DeviceType};
pub use vkcopy::{
    Buffer, Context, ContextOptions, ElemType, Emulate, Error, MemoryTable, Policy, Role, Value,
};

/// Vulkan memory property flags, as placements report them.
pub type MemoryPropertyFlags = vkcopy::ash::vk::MemoryPropertyFlags;

/// The expression language of cases; the device kernels compile it to WGSL.
pub use vkcopy::expr;
pub use vkcopy::expr::Expr;
