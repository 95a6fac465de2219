//! Halide's C ABI (`HalideRuntime.h`, `device_interface.h` of Halide 21),
//! written by hand for the types and functions this library uses.

use std::ffi::{c_char, c_int, c_void};

/// `halide_type_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HalideType {
    /// `halide_type_code_t`: 0 int, 1 uint, 2 float, 3 handle, 4 bfloat.
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// `halide_dimension_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
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
    pub device: u64,
    pub device_interface: *const DeviceInterface,
    pub host: *mut u8,
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

pub type Uc = *mut c_void;
pub type Buf = *mut HalideBuffer;
pub type ConstBuf = *const HalideBuffer;
pub type Iface = *const DeviceInterface;

/// `halide_device_interface_t`: Halide's generic entry points, then `impl`.
#[repr(C)]
pub struct DeviceInterface {
    pub device_malloc: unsafe extern "C" fn(Uc, Buf, Iface) -> c_int,
    pub device_free: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub device_sync: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub device_release: unsafe extern "C" fn(Uc, Iface),
    pub copy_to_host: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub copy_to_device: unsafe extern "C" fn(Uc, Buf, Iface) -> c_int,
    pub device_and_host_malloc: unsafe extern "C" fn(Uc, Buf, Iface) -> c_int,
    pub device_and_host_free: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub buffer_copy: unsafe extern "C" fn(Uc, Buf, Iface, Buf) -> c_int,
    pub device_crop: unsafe extern "C" fn(Uc, ConstBuf, Buf) -> c_int,
    pub device_slice: unsafe extern "C" fn(Uc, ConstBuf, c_int, c_int, Buf) -> c_int,
    pub device_release_crop: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub wrap_native: unsafe extern "C" fn(Uc, Buf, u64, Iface) -> c_int,
    pub detach_native: unsafe extern "C" fn(Uc, Buf) -> c_int,
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
    pub device_malloc: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub device_free: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub device_sync: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub device_release: unsafe extern "C" fn(Uc) -> c_int,
    pub copy_to_host: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub copy_to_device: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub device_and_host_malloc: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub device_and_host_free: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub buffer_copy: unsafe extern "C" fn(Uc, Buf, Iface, Buf) -> c_int,
    pub device_crop: unsafe extern "C" fn(Uc, ConstBuf, Buf) -> c_int,
    pub device_slice: unsafe extern "C" fn(Uc, ConstBuf, c_int, c_int, Buf) -> c_int,
    pub device_release_crop: unsafe extern "C" fn(Uc, Buf) -> c_int,
    pub wrap_native: unsafe extern "C" fn(Uc, Buf, u64) -> c_int,
    pub detach_native: unsafe extern "C" fn(Uc, Buf) -> c_int,
}

/// `halide_error_code_t` values this library returns.
pub mod code {
    use std::ffi::c_int;
    pub const SUCCESS: c_int = 0;
    pub const GENERIC: c_int = -1;
    pub const OUT_OF_MEMORY: c_int = -11;
    pub const BUFFER_ARGUMENT_IS_NULL: c_int = -12;
    pub const COPY_TO_HOST_FAILED: c_int = -14;
    pub const COPY_TO_DEVICE_FAILED: c_int = -15;
    pub const DEVICE_MALLOC_FAILED: c_int = -16;
    pub const DEVICE_FREE_FAILED: c_int = -18;
    pub const DEVICE_RUN_FAILED: c_int = -23;
    pub const GPU_DEVICE_ERROR: c_int = -29;
    pub const WRAP_NATIVE_FAILED: c_int = -32;
    pub const DETACH_NATIVE_FAILED: c_int = -33;
    pub const HOST_IS_NULL: c_int = -34;
    pub const BUFFER_COPY_FAILED: c_int = -39;
    pub const CROP_FAILED: c_int = -41;
    pub const INCOMPATIBLE_DEVICE_INTERFACE: c_int = -42;
    pub const BAD_DIMENSIONS: c_int = -43;
}

// Halide's generic device layer, in every standalone runtime (for example
// `compile_standalone_runtime` for `x86-64-linux`): the top of the device
// interface, and the library loading that applications may replace.
extern "C" {
    pub fn halide_device_malloc(uc: Uc, buf: Buf, iface: Iface) -> c_int;
    pub fn halide_device_free(uc: Uc, buf: Buf) -> c_int;
    pub fn halide_device_sync(uc: Uc, buf: Buf) -> c_int;
    pub fn halide_device_release(uc: Uc, iface: Iface);
    pub fn halide_copy_to_host(uc: Uc, buf: Buf) -> c_int;
    pub fn halide_copy_to_device(uc: Uc, buf: Buf, iface: Iface) -> c_int;
    pub fn halide_device_and_host_malloc(uc: Uc, buf: Buf, iface: Iface) -> c_int;
    pub fn halide_device_and_host_free(uc: Uc, buf: Buf) -> c_int;
    pub fn halide_device_crop(uc: Uc, src: ConstBuf, dst: Buf) -> c_int;
    pub fn halide_device_slice(uc: Uc, src: ConstBuf, dim: c_int, pos: c_int, dst: Buf) -> c_int;
    pub fn halide_device_release_crop(uc: Uc, buf: Buf) -> c_int;
    pub fn halide_device_wrap_native(uc: Uc, buf: Buf, handle: u64, iface: Iface) -> c_int;
    pub fn halide_device_detach_native(uc: Uc, buf: Buf) -> c_int;
    pub fn halide_default_device_and_host_malloc(uc: Uc, buf: Buf, iface: Iface) -> c_int;
    pub fn halide_default_device_and_host_free(uc: Uc, buf: Buf, iface: Iface) -> c_int;
    pub fn halide_error(uc: Uc, msg: *const c_char);
    pub fn halide_load_library(name: *const c_char) -> *mut c_void;
    /// This library's own interface (`interface.rs` defines it), reached
    /// through the C ABI as generated code reaches it.
    pub fn halide_vulkan_device_interface() -> Iface;
    pub fn halide_get_library_symbol(lib: *mut c_void, name: *const c_char) -> *mut c_void;
    pub fn halide_can_reuse_device_allocations(uc: Uc) -> bool;
    pub fn halide_register_device_allocation_pool(pool: *mut AllocationPool);
}

/// `halide_device_allocation_pool`: what `halide_reuse_device_allocations(false)`
/// calls on each device API to give back what it keeps.
#[repr(C)]
pub struct AllocationPool {
    pub release_unused: unsafe extern "C" fn(Uc) -> c_int,
    pub next: *mut AllocationPool,
}
