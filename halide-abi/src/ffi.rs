//! Halide's C ABI: its types from `halide-ffi`, and the functions of
//! Halide's generic runtime this library links with.

use std::ffi::{c_char, c_int, c_void};

pub use halide_ffi::code;
pub use halide_ffi::{
    AllocationPool, Buf, ConstBuf, DeviceInterface, DeviceInterfaceImpl, HalideBuffer,
    HalideDimension, HalideType, Iface, Uc, DEVICE_DIRTY, HOST_DIRTY,
};

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
