//! The rest of `HalideRuntimeVulkan.h`: the context hooks, wrapping a
//! caller's `VkBuffer`, and the settings.

use std::ffi::{c_char, c_int, c_void, CStr};

use vkcopy::ash::vk::Handle;

use crate::buffer;
use crate::config;
use crate::context;
use crate::entry::entry;
use crate::error::Failure;
use crate::ffi::{self, code, Buf, Uc};

/// `halide_vulkan_memory_allocator`: opaque to callers; this library hands
/// out the address of this value.
#[repr(C)]
pub struct MemoryAllocator {
    _private: u8,
}

static ALLOCATOR: MemoryAllocator = MemoryAllocator { _private: 0 };

/// `halide_vulkan_acquire_context`: the handles of the context this library
/// runs on, made when `create` is set and there is none. The queue is the one
/// kernels run on; vkcopy submits to it under its own lock, so a caller that
/// submits to it too must not do so while a Halide call is running.
///
/// # Safety
/// Every pointer is writable.
#[no_mangle]
pub unsafe extern "C" fn halide_vulkan_acquire_context(
    uc: Uc,
    allocator: *mut *mut MemoryAllocator,
    instance: *mut u64,
    device: *mut u64,
    physical_device: *mut u64,
    queue: *mut u64,
    queue_family_index: *mut u32,
    messenger: *mut u64,
    create: bool,
) -> c_int {
    entry(uc, "halide_vulkan_acquire_context", || {
        let d = match context::current() {
            Some(d) => d,
            None if create => context::acquire()?,
            None => {
                return Err(Failure::new(
                    code::GENERIC_ERROR,
                    "no Vulkan context, and create is false".into(),
                ))
            }
        };
        let (q, family) = d.ctx.kernel_queue();
        let ctx = &d.ctx;
        // SAFETY: the caller's promise: every pointer is writable (null ones skipped).
        unsafe {
            let put = |p: *mut u64, v: u64| {
                if let Some(p) = p.as_mut() {
                    *p = v;
                }
            };
            put(instance, ctx.raw_instance().handle().as_raw());
            put(device, ctx.raw_device().handle().as_raw());
            put(physical_device, ctx.raw_physical_device().as_raw());
            put(queue, q.as_raw());
            put(messenger, 0);
            if let Some(p) = queue_family_index.as_mut() {
                *p = family;
            }
            if let Some(p) = allocator.as_mut() {
                *p = std::ptr::addr_of!(ALLOCATOR).cast_mut();
            }
        }
        Ok(())
    })
}

/// `halide_vulkan_release_unused_device_allocations`: gives back what the
/// context keeps for reuse and takes up Halide's reuse flag (the pool that
/// `halide_reuse_device_allocations(false)` calls).
#[no_mangle]
pub unsafe extern "C" fn halide_vulkan_release_unused_device_allocations(uc: Uc) -> c_int {
    entry(
        uc,
        "halide_vulkan_release_unused_device_allocations",
        || {
            context::release_unused(uc);
            Ok(())
        },
    )
}

/// `halide_vulkan_release_context`: the context stays open until
/// `halide_device_release`.
#[no_mangle]
pub extern "C" fn halide_vulkan_release_context(
    _uc: Uc,
    _instance: u64,
    _device: u64,
    _queue: u64,
    _messenger: u64,
) -> c_int {
    code::SUCCESS
}

/// `halide_vulkan_wrap_vk_buffer`: `vk_buffer` is a `VkBuffer` on this
/// library's device, of at least the buffer's size, with usage
/// `TRANSFER_SRC | TRANSFER_DST | STORAGE_BUFFER`.
///
/// # Safety
/// `buf` is a valid buffer.
#[no_mangle]
pub unsafe extern "C" fn halide_vulkan_wrap_vk_buffer(uc: Uc, buf: Buf, vk_buffer: u64) -> c_int {
    // SAFETY: Halide's generic entry, with this library's interface.
    unsafe { ffi::halide_device_wrap_native(uc, buf, vk_buffer, crate::interface::interface()) }
}

/// `halide_vulkan_detach_vk_buffer`.
///
/// # Safety
/// `buf` is a valid buffer.
#[no_mangle]
pub unsafe extern "C" fn halide_vulkan_detach_vk_buffer(uc: Uc, buf: Buf) -> c_int {
    // SAFETY: Halide's generic entry.
    unsafe { ffi::halide_device_detach_native(uc, buf) }
}

/// `halide_vulkan_get_vk_buffer`: the `VkBuffer` behind the buffer's device
/// memory (0 when it has none of this library's). A crop's is its parent's.
///
/// # Safety
/// `buf` is null or a valid buffer.
#[no_mangle]
pub unsafe extern "C" fn halide_vulkan_get_vk_buffer(uc: Uc, buf: Buf) -> u64 {
    let mut out = 0;
    entry(uc, "halide_vulkan_get_vk_buffer", || {
        // SAFETY: the caller's promise.
        let Some(b) = (unsafe { buf.as_ref() }) else {
            return Err(Failure::new(
                code::BUFFER_ARGUMENT_IS_NULL,
                "a null buffer".into(),
            ));
        };
        // SAFETY: a handle on a buffer of this interface is one of ours.
        if let Some(h) = unsafe { buffer::handle(b) } {
            out = h
                .buffer
                .device_view()
                .map_or(0, |v| v.region.vk_buffer().as_raw());
        }
        Ok(())
    });
    out
}

macro_rules! setting {
    ($set:ident, $get:ident, $what:path) => {
        #[doc = concat!("`", stringify!($set), "`: null goes back to the environment variable.")]
        ///
        /// # Safety
        /// `n` is null or NUL-terminated.
        #[no_mangle]
        pub unsafe extern "C" fn $set(n: *const c_char) {
            // SAFETY: the caller's promise.
            unsafe { $what.set(n) }
        }

        #[doc = concat!("`", stringify!($get), "`.")]
        #[no_mangle]
        pub extern "C" fn $get(_uc: Uc) -> *const c_char {
            $what.get_ptr()
        }
    };
}

setting!(
    halide_vulkan_set_layer_names,
    halide_vulkan_get_layer_names,
    config::LAYERS
);
setting!(
    halide_vulkan_set_extension_names,
    halide_vulkan_get_extension_names,
    config::EXTENSIONS
);
setting!(
    halide_vulkan_set_device_type,
    halide_vulkan_get_device_type,
    config::DEVICE_TYPE
);
setting!(
    halide_vulkan_set_build_options,
    halide_vulkan_get_build_options,
    config::BUILD_OPTIONS
);
setting!(
    halide_vulkan_set_alloc_config,
    halide_vulkan_get_alloc_config,
    config::ALLOC_CONFIG
);

static CALLBACKS: std::sync::atomic::AtomicPtr<c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// `halide_vulkan_set_allocation_callbacks`: kept and returned by the getter;
/// vkcopy allocates with the driver's own host allocator.
#[no_mangle]
pub extern "C" fn halide_vulkan_set_allocation_callbacks(callbacks: *const c_void) {
    CALLBACKS.store(callbacks.cast_mut(), std::sync::atomic::Ordering::Release);
}

/// `halide_vulkan_get_allocation_callbacks`.
#[no_mangle]
pub extern "C" fn halide_vulkan_get_allocation_callbacks(_uc: Uc) -> *const c_void {
    CALLBACKS.load(std::sync::atomic::Ordering::Acquire)
}

/// Beyond Halide's ABI, for test harnesses: the copies this library made
/// since the process began, whichever route each took (a copy the CPU makes
/// into mapped device memory records no Vulkan command a harness could see).
/// Writes six counts to `out`: copies and bytes to the device, to the host,
/// and device to device.
///
/// # Safety
/// `out` is writable for six `uint64_t`s.
#[no_mangle]
pub unsafe extern "C" fn vkcopy_halide_copy_counts(out: *mut u64) {
    if out.is_null() {
        return;
    }
    let counts = context::copy_counts();
    // SAFETY: the caller's promise.
    unsafe { std::ptr::copy_nonoverlapping(counts.as_ptr(), out, counts.len()) };
}

/// Beyond Halide's ABI: sets one of vkcopy's variables (`VKCOPY_POLICY`,
/// `VKCOPY_MAPPED_UPLOAD` ...; see vkcopy's `ENVIRONMENT`) for contexts made
/// from now on, in place of the environment's; a null `value` goes back to
/// it. Returns 0, or `halide_error_code_generic_error`, said to
/// `halide_error`, for a name vkcopy does not read here or text that is not
/// UTF-8. A value is checked when the context is made.
///
/// # Safety
/// `name` is a NUL-terminated string; `value` is null or one.
#[no_mangle]
pub unsafe extern "C" fn vkcopy_halide_set_setting(
    name: *const c_char,
    value: *const c_char,
) -> c_int {
    // Not through `entry`: nothing here touches Vulkan, so a live context's
    // validation findings are left for the call that caused them.
    let text = |p: *const c_char, what: &str| -> Result<Option<&str>, String> {
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: the caller's promise: a NUL-terminated string.
        let c = unsafe { CStr::from_ptr(p) };
        c.to_str()
            .map(Some)
            .map_err(|_| format!("the {what} is not UTF-8"))
    };
    let set = || -> Result<(), String> {
        let name = text(name, "name")?.ok_or("no name")?;
        config::set_vkcopy(name, text(value, "value")?)
    };
    match set() {
        Ok(()) => code::SUCCESS,
        Err(m) => {
            crate::error::say(
                std::ptr::null_mut(),
                &format!("vkcopy_halide_set_setting: {m}"),
            );
            code::GENERIC_ERROR
        }
    }
}

// The exports have the types `halide-ffi` declares for their callers.
const _: halide_ffi::vkcopy::CopyCountsFn = vkcopy_halide_copy_counts;
const _: halide_ffi::vkcopy::SetSettingFn = vkcopy_halide_set_setting;
