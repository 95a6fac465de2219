//! `halide_buffer_t` and what it holds, and `halide_device_interface_t`,
//! the table of entry points a buffer's device memory is reached through.
//! The two refer to each other, as in `HalideRuntime.h`, so they are
//! declared together.

use std::ffi::{c_int, c_void};

/// `halide_type_code_t`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeCode {
    Int = 0,
    UInt = 1,
    Float = 2,
    Handle = 3,
    BFloat = 4,
}

/// `halide_type_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HalideType {
    /// A [`TypeCode`] as its `u8`.
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// `halide_dimension_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HalideDimension {
    pub min: i32,
    pub extent: i32,
    pub stride: i32,
    pub flags: u32,
}

/// `halide_buffer_t`.
#[repr(C)]
#[derive(Debug)]
pub struct HalideBuffer {
    /// The device API's handle of the allocation; 0 for none.
    pub device: u64,
    pub device_interface: *const DeviceInterface,
    pub host: *mut u8,
    /// [`HOST_DIRTY`], [`DEVICE_DIRTY`].
    pub flags: u64,
    pub ty: HalideType,
    pub dimensions: i32,
    pub dim: *mut HalideDimension,
    pub padding: *mut c_void,
}

/// `halide_buffer_flag_host_dirty`.
pub const HOST_DIRTY: u64 = 1;
/// `halide_buffer_flag_device_dirty`.
pub const DEVICE_DIRTY: u64 = 2;

/// The user context every entry point takes first.
pub type Uc = *mut c_void;
pub type Buf = *mut HalideBuffer;
pub type ConstBuf = *const HalideBuffer;
pub type Iface = *const DeviceInterface;

/// `halide_device_malloc`, `halide_copy_to_device`,
/// `halide_device_and_host_malloc`: a buffer on a device interface.
pub type MallocFn = unsafe extern "C" fn(Uc, Buf, Iface) -> c_int;
/// `halide_device_free`, `halide_copy_to_host`, `halide_device_sync`,
/// `halide_device_release_crop`, `halide_device_and_host_free`,
/// `halide_device_detach_native`: one buffer.
pub type OneBufferFn = unsafe extern "C" fn(Uc, Buf) -> c_int;
/// `halide_buffer_copy`: source, destination interface, destination.
pub type BufferCopyFn = unsafe extern "C" fn(Uc, Buf, Iface, Buf) -> c_int;
/// `halide_device_crop`: source, crop.
pub type CropFn = unsafe extern "C" fn(Uc, ConstBuf, Buf) -> c_int;
/// `halide_device_slice`: source, dimension, position, slice.
pub type SliceFn = unsafe extern "C" fn(Uc, ConstBuf, c_int, c_int, Buf) -> c_int;
/// `halide_device_release`.
pub type ReleaseFn = unsafe extern "C" fn(Uc, Iface);

/// `halide_device_interface_t`: Halide's generic entry points, then `impl`.
#[repr(C)]
pub struct DeviceInterface {
    pub device_malloc: MallocFn,
    pub device_free: OneBufferFn,
    pub device_sync: OneBufferFn,
    pub device_release: ReleaseFn,
    pub copy_to_host: OneBufferFn,
    pub copy_to_device: MallocFn,
    pub device_and_host_malloc: MallocFn,
    pub device_and_host_free: OneBufferFn,
    pub buffer_copy: BufferCopyFn,
    pub device_crop: CropFn,
    pub device_slice: SliceFn,
    pub device_release_crop: OneBufferFn,
    pub wrap_native: unsafe extern "C" fn(Uc, Buf, u64, Iface) -> c_int,
    pub detach_native: OneBufferFn,
    pub compute_capability: unsafe extern "C" fn(Uc, *mut c_int, *mut c_int) -> c_int,
    pub imp: *const DeviceInterfaceImpl,
}

// SAFETY: a static table of function pointers and a pointer to another static table.
unsafe impl Sync for DeviceInterface {}

/// `halide_device_interface_impl_t`: what a device API implements.
#[repr(C)]
pub struct DeviceInterfaceImpl {
    pub use_module: unsafe extern "C" fn(),
    pub release_module: unsafe extern "C" fn(),
    pub device_malloc: OneBufferFn,
    pub device_free: OneBufferFn,
    pub device_sync: OneBufferFn,
    pub device_release: unsafe extern "C" fn(Uc) -> c_int,
    pub copy_to_host: OneBufferFn,
    pub copy_to_device: OneBufferFn,
    pub device_and_host_malloc: OneBufferFn,
    pub device_and_host_free: OneBufferFn,
    pub buffer_copy: BufferCopyFn,
    pub device_crop: CropFn,
    pub device_slice: SliceFn,
    pub device_release_crop: OneBufferFn,
    pub wrap_native: unsafe extern "C" fn(Uc, Buf, u64) -> c_int,
    pub detach_native: OneBufferFn,
}

/// `halide_device_allocation_pool`: what `halide_reuse_device_allocations(false)`
/// calls on each device API to give back what it keeps.
#[repr(C)]
pub struct AllocationPool {
    pub release_unused: unsafe extern "C" fn(Uc) -> c_int,
    pub next: *mut AllocationPool,
}
