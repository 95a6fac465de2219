//! Vulkan entry points between Halide's runtime and the real driver.
//!
//! Halide resolves `vkGetInstanceProcAddr` through `halide_get_library_symbol`,
//! which the suite replaces, and every other entry point through that; so the
//! suite sees each memory allocation, buffer and mapping Halide makes. That gives
//! leak accounting and placements (which memory type each role landed in), and
//! with a recorded table it presents the table to Halide and backs each of its
//! types with a real one, as vkcopy's simulation does. Under a table it also
//! records what a real driver of that table would refuse: a buffer bound to a
//! type outside its `memoryTypeBits`, a heap over its size, and non-coherent
//! memory read or written without an invalidate or flush.
//!
//! The entry points are handed out and the driver's functions kept behind them
//! by vkcopy's interposition layer ([`vkcopy::interpose`]), the one its fault
//! injection uses. `state.rs` keeps what was seen; `table.rs` presents a
//! recorded table; `memory.rs` watches memory, buffers and copies;
//! `instance.rs` makes the instance and device. This file hands Halide the
//! suite's entry points.

mod instance;
mod memory;
mod state;
mod table;

use std::ffi::{c_char, c_void, CStr};

use instance::{create_device, create_instance, destroy_device, destroy_instance};
use memory::{
    allocate_memory, bind_buffer_memory, cmd_copy_buffer, create_buffer, destroy_buffer,
    flush_ranges, free_memory, get_buffer_memory_requirements, invalidate_ranges, map_memory,
    unmap_memory,
};
use state::loader;
pub use state::{
    begin_case, begin_step, claim_device, describe_type, device_type, end_step, fill_heap, live,
    placements, take_findings, take_validation_messages, Live, StepKind,
};
use table::{
    enumerate_device_extensions, get_memory_properties, get_memory_properties2,
    get_physical_device_properties, get_physical_device_properties2,
};
use vkcopy::interpose::Layer;
use vkcopy_engine::rt::vk::{self, Handle};

/// The layer between Halide's runtime and the loader.
static LAYER: Layer = Layer::new(wraps);

/// The driver's function `name` behind the suite's entry point called with
/// `handle`.
fn real<F: Copy>(handle: impl Handle, name: &str) -> Option<F> {
    // SAFETY: Halide calls with live handles; each caller names `F` as the
    // entry point's type.
    unsafe { LAYER.real(handle.as_raw(), name) }
}

/// Replaces `halide_get_library_symbol`: hands out the suite's
/// `vkGetInstanceProcAddr`, and the real symbol for everything else.
///
/// # Safety
/// `name` is a NUL-terminated string and `lib` null or a `dlopen` handle, as
/// Halide passes them.
pub unsafe extern "C" fn get_library_symbol(lib: *mut c_void, name: *const c_char) -> *mut c_void {
    // SAFETY: Halide passes a NUL-terminated name.
    let n = unsafe { CStr::from_ptr(name) };
    let found = if lib.is_null() {
        loader().and_then(|l| {
            // SAFETY: a lookup by name; the caller casts to the symbol's type.
            unsafe { l.lib.get::<*mut c_void>(n.to_bytes_with_nul()) }
                .ok()
                .map(|s| *s)
        })
    } else {
        // SAFETY: `lib` is a handle from Halide's `dlopen`.
        Some(unsafe { libc::dlsym(lib, name) })
    };
    let Some(found) = found.filter(|f| !f.is_null()) else {
        return std::ptr::null_mut();
    };
    // SAFETY: a non-null entry point of the loader.
    let f = Some(unsafe { std::mem::transmute::<*mut c_void, unsafe extern "system" fn()>(found) });
    // SAFETY: the global functions, resolved with no handle.
    let handed = unsafe { LAYER.resolved(0, n, f) };
    handed.map_or(found, |h| h as *mut c_void)
}

/// The suite's entry point for `name`, if it has one.
fn wraps(_: u64, name: &[u8]) -> Option<vk::PFN_vkVoidFunction> {
    let ours = ours(name)?;
    // SAFETY: a function pointer of the suite with the entry point's type.
    Some(Some(unsafe {
        std::mem::transmute::<*mut c_void, unsafe extern "system" fn()>(ours)
    }))
}

/// The suite's entry point for `name`, or None to hand out the real one.
fn ours(name: &[u8]) -> Option<*mut c_void> {
    Some(match name {
        b"vkGetInstanceProcAddr" => get_instance_proc_addr as *mut c_void,
        b"vkCreateInstance" => create_instance as *mut c_void,
        b"vkDestroyInstance" => destroy_instance as *mut c_void,
        b"vkCreateDevice" => create_device as *mut c_void,
        b"vkDestroyDevice" => destroy_device as *mut c_void,
        b"vkGetDeviceProcAddr" => get_device_proc_addr as *mut c_void,
        b"vkGetPhysicalDeviceProperties" => get_physical_device_properties as *mut c_void,
        b"vkEnumerateDeviceExtensionProperties" => enumerate_device_extensions as *mut c_void,
        b"vkGetPhysicalDeviceProperties2" | b"vkGetPhysicalDeviceProperties2KHR" => {
            get_physical_device_properties2 as *mut c_void
        }
        b"vkGetPhysicalDeviceMemoryProperties" => get_memory_properties as *mut c_void,
        b"vkGetPhysicalDeviceMemoryProperties2" | b"vkGetPhysicalDeviceMemoryProperties2KHR" => {
            get_memory_properties2 as *mut c_void
        }
        b"vkAllocateMemory" => allocate_memory as *mut c_void,
        b"vkFreeMemory" => free_memory as *mut c_void,
        b"vkCreateBuffer" => create_buffer as *mut c_void,
        b"vkDestroyBuffer" => destroy_buffer as *mut c_void,
        b"vkGetBufferMemoryRequirements" => get_buffer_memory_requirements as *mut c_void,
        b"vkBindBufferMemory" => bind_buffer_memory as *mut c_void,
        b"vkMapMemory" => map_memory as *mut c_void,
        b"vkCmdCopyBuffer" => cmd_copy_buffer as *mut c_void,
        b"vkUnmapMemory" => unmap_memory as *mut c_void,
        b"vkFlushMappedMemoryRanges" => flush_ranges as *mut c_void,
        b"vkInvalidateMappedMemoryRanges" => invalidate_ranges as *mut c_void,
        _ => return None,
    })
}

unsafe extern "system" fn get_instance_proc_addr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    LAYER.over(loader()?.gipa);
    // SAFETY: forwarded as Halide called it.
    unsafe { LAYER.instance_proc_addr(instance, name) }
}

unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    // SAFETY: forwarded as Halide called it.
    unsafe { LAYER.device_proc_addr(device, name) }
}
