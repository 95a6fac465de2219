//! `halide_vulkan_device_interface()`: Halide's generic entry points over the
//! sixteen entries of `halide_device_interface_impl_t`, each carried out by
//! vkcopy. Halide's generic layer keeps the dirty bits and decides what to
//! copy; an entry here copies what it is asked to, the way Halide's Vulkan
//! entries do (`src/runtime/vulkan.cpp`), along vkcopy's routes.

use std::ffi::c_int;

use vkcopy::ash::vk::{self, Handle};
use vkcopy::Buffer;

use crate::buffer::{self, DeviceBuffer, Origin};
use crate::context;
use crate::entry::entry;
use crate::error::Failure;
use crate::ffi::{self, code, Buf, ConstBuf, DeviceInterface, DeviceInterfaceImpl, Iface, Uc};

static IMPL: DeviceInterfaceImpl = DeviceInterfaceImpl {
    use_module,
    release_module,
    device_malloc,
    device_free,
    device_sync,
    device_release,
    copy_to_host,
    copy_to_device,
    device_and_host_malloc,
    device_and_host_free,
    buffer_copy,
    device_crop,
    device_slice,
    device_release_crop,
    wrap_native,
    detach_native,
};

static INTERFACE: DeviceInterface = DeviceInterface {
    device_malloc: ffi::halide_device_malloc,
    device_free: ffi::halide_device_free,
    device_sync: ffi::halide_device_sync,
    device_release: ffi::halide_device_release,
    copy_to_host: ffi::halide_copy_to_host,
    copy_to_device: ffi::halide_copy_to_device,
    device_and_host_malloc: ffi::halide_device_and_host_malloc,
    device_and_host_free: ffi::halide_device_and_host_free,
    buffer_copy: crate::buffer_copy::halide_buffer_copy,
    device_crop: ffi::halide_device_crop,
    device_slice: ffi::halide_device_slice,
    device_release_crop: ffi::halide_device_release_crop,
    wrap_native: ffi::halide_device_wrap_native,
    detach_native: ffi::halide_device_detach_native,
    compute_capability,
    imp: &IMPL,
};

/// The interface every buffer of this library points to.
pub(crate) fn interface() -> Iface {
    &INTERFACE
}

/// `halide_vulkan_device_interface`.
#[no_mangle]
pub extern "C" fn halide_vulkan_device_interface() -> *const DeviceInterface {
    &INTERFACE
}

/// The buffer behind a pointer Halide passed, or the error it gets for null.
///
/// # Safety
/// `buf` is null or a valid `halide_buffer_t` for the call.
unsafe fn buf_mut<'a>(buf: Buf) -> Result<&'a mut ffi::HalideBuffer, Failure> {
    // SAFETY: the caller's promise.
    unsafe { buf.as_mut() }
        .ok_or_else(|| Failure::new(code::BUFFER_ARGUMENT_IS_NULL, "a null buffer".into()))
}

/// # Safety
/// As [`buf_mut`].
unsafe fn buf_ref<'a>(buf: ConstBuf) -> Result<&'a ffi::HalideBuffer, Failure> {
    // SAFETY: the caller's promise.
    unsafe { buf.as_ref() }
        .ok_or_else(|| Failure::new(code::BUFFER_ARGUMENT_IS_NULL, "a null buffer".into()))
}

/// `buf`'s handle, or the error a buffer without one gets.
///
/// # Safety
/// As [`buffer::handle`].
unsafe fn handle_of(buf: &ffi::HalideBuffer, failed: c_int) -> Result<&DeviceBuffer, Failure> {
    // SAFETY: the caller's promise.
    unsafe { buffer::handle(buf) }.ok_or_else(|| {
        Failure::new(
            failed,
            if buf.device == 0 {
                "the buffer has no device allocation".into()
            } else {
                "the buffer's device allocation belongs to another device interface".into()
            },
        )
    })
}

unsafe extern "C" fn use_module() {}
unsafe extern "C" fn release_module() {}

unsafe extern "C" fn device_malloc(uc: Uc, buf: Buf) -> c_int {
    entry(uc, "halide_vulkan_device_malloc", || {
        // SAFETY: Halide passes a valid buffer.
        let buf = unsafe { buf_mut(buf) }?;
        if buf.device != 0 {
            return Ok(());
        }
        let device = context::acquire()?;
        // SAFETY: as above.
        let mut b = unsafe { buffer::shape(buf, "device_malloc") }?;
        device
            .ctx
            .device_malloc(&mut b)
            .map_err(|e| Failure::vk(code::DEVICE_MALLOC_FAILED, e))?;
        buffer::set_handle(buf, DeviceBuffer::new(b, Origin::Malloc, device));
        crate::trace::say("Vulkan: Created buffer (vkcopy)");
        Ok(())
    })
}

unsafe extern "C" fn device_free(uc: Uc, buf: Buf) -> c_int {
    entry(uc, "halide_vulkan_device_free", || {
        // SAFETY: Halide passes a valid buffer whose handle is ours or none.
        let buf = unsafe { buf_mut(buf) }?;
        if buf.device == 0 {
            return Ok(());
        }
        // SAFETY: as above.
        let h = unsafe { buffer::take_handle(buf) }.ok_or_else(|| {
            Failure::new(
                code::DEVICE_FREE_FAILED,
                "the buffer's device allocation is not this interface's".into(),
            )
        })?;
        if h.origin == Origin::Malloc {
            crate::trace::say("Vulkan: Destroyed buffer (vkcopy)");
        }
        // Kept for reuse or given back, as Halide's flag says now.
        context::follow_reuse(uc, &h.device);
        if h.origin == Origin::Wrapped {
            // The caller's VkBuffer: let go of it, do not destroy it.
            h.forget_host_side();
            let mut b = h.buffer;
            h.device
                .ctx
                .detach_vk_buffer(&mut b)
                .map_err(|e| Failure::vk(code::DEVICE_FREE_FAILED, e))?;
        }
        Ok(())
    })
}

unsafe extern "C" fn device_sync(uc: Uc, _buf: Buf) -> c_int {
    // Every copy and kernel has finished when its entry point returns.
    entry(uc, "halide_vulkan_device_sync", || Ok(()))
}

unsafe extern "C" fn device_release(uc: Uc) -> c_int {
    entry(uc, "halide_vulkan_device_release", || {
        crate::kernels::release();
        match context::release() {
            Some(report) if !report.is_empty() => Err(Failure::new(
                code::DEVICE_FREE_FAILED,
                format!("the context closed with objects left: {report}"),
            )),
            _ => Ok(()),
        }
    })
}

unsafe extern "C" fn copy_to_host(uc: Uc, buf: Buf) -> c_int {
    entry(uc, "halide_vulkan_copy_to_host", || {
        // SAFETY: Halide passes a valid buffer whose handle is ours.
        let buf = unsafe { buf_mut(buf) }?;
        // SAFETY: as above.
        let h = unsafe { handle_of(buf, code::COPY_TO_HOST_FAILED) }?;
        // SAFETY: Halide's host pointer covers the buffer's span.
        unsafe {
            h.with_host_side(buf, "copy_to_host", |v| {
                v.set_host_dirty(false);
                v.set_device_dirty(true);
                h.device
                    .ctx
                    .copy_to_host(v)
                    .map_err(|e| Failure::vk(code::COPY_TO_HOST_FAILED, e))
            })
        }
    })
}

unsafe extern "C" fn copy_to_device(uc: Uc, buf: Buf) -> c_int {
    entry(uc, "halide_vulkan_copy_to_device", || {
        // SAFETY: Halide passes a valid buffer whose handle is ours.
        let buf = unsafe { buf_mut(buf) }?;
        // SAFETY: as above.
        let h = unsafe { handle_of(buf, code::COPY_TO_DEVICE_FAILED) }?;
        // SAFETY: Halide's host pointer covers the buffer's span.
        unsafe {
            h.with_host_side(buf, "copy_to_device", |v| {
                v.set_device_dirty(false);
                v.set_host_dirty(true);
                h.device
                    .ctx
                    .copy_to_device(v)
                    .map_err(|e| Failure::vk(code::COPY_TO_DEVICE_FAILED, e))
            })
        }
    })
}

unsafe extern "C" fn device_and_host_malloc(uc: Uc, buf: Buf) -> c_int {
    // SAFETY: Halide's default: device_malloc through this interface, then host memory.
    unsafe { ffi::halide_default_device_and_host_malloc(uc, buf, &INTERFACE) }
}

unsafe extern "C" fn device_and_host_free(uc: Uc, buf: Buf) -> c_int {
    // SAFETY: Halide's default: device_free through this interface, then the host memory.
    unsafe { ffi::halide_default_device_and_host_free(uc, buf, &INTERFACE) }
}

/// One side of a `buffer_copy` as vkcopy sees it: `buf`'s host memory or its
/// device memory, with `buf`'s shape.
///
/// # Safety
/// As [`buffer::with_host`].
unsafe fn side(buf: &ffi::HalideBuffer, host: bool, name: &str) -> Result<Buffer, Failure> {
    if host {
        // SAFETY: the caller's promise.
        let mut b = unsafe { buffer::over_host(buf, name) }?;
        b.set_host_dirty(true);
        Ok(b)
    } else {
        // SAFETY: the caller's promise.
        let h = unsafe { handle_of(buf, code::DEVICE_BUFFER_COPY_FAILED) }?;
        // SAFETY: as above.
        let mut b = unsafe { buffer::shaped_like(h, buf, name) }?;
        b.set_device_dirty(true);
        Ok(b)
    }
}

pub(crate) unsafe extern "C" fn buffer_copy(uc: Uc, src: Buf, dst_iface: Iface, dst: Buf) -> c_int {
    let ours = interface();
    // SAFETY: Halide passes valid buffers (checked for null first).
    let (Some(s), Some(d)) = (unsafe { src.as_ref() }, unsafe { dst.as_ref() }) else {
        return code::BUFFER_ARGUMENT_IS_NULL;
    };
    // Another interface's valid data: Halide's generic layer goes through host memory.
    let s_dirty = s.flags & ffi::DEVICE_DIRTY != 0;
    if (s_dirty || s.host.is_null()) && s.device_interface != ours {
        return code::INCOMPATIBLE_DEVICE_INTERFACE;
    }
    entry(uc, "halide_vulkan_buffer_copy", || {
        let from_host = s.device_interface != ours
            || s.device == 0
            || (s.flags & ffi::HOST_DIRTY != 0 && !s.host.is_null());
        let to_host = dst_iface.is_null();
        // SAFETY: Halide's buffers; each side's memory covers its span.
        let src_v = unsafe { side(s, from_host, "the source") }?;
        // SAFETY: as above.
        let mut dst_v = unsafe { side(d, to_host, "the destination") }?;
        dst_v.set_host_dirty(false);
        dst_v.set_device_dirty(false);
        let device = if from_host && to_host {
            return Err(Failure::new(
                code::DEVICE_BUFFER_COPY_FAILED,
                "a host-to-host copy reached the device interface".into(),
            ));
        } else if to_host {
            // SAFETY: as above.
            unsafe { handle_of(s, code::DEVICE_BUFFER_COPY_FAILED) }?
                .device
                .clone()
        } else {
            // SAFETY: as above.
            unsafe { handle_of(d, code::DEVICE_BUFFER_COPY_FAILED) }?
                .device
                .clone()
        };
        device
            .ctx
            .buffer_copy(&src_v, &mut dst_v, !to_host)
            .map_err(|e| Failure::vk(code::DEVICE_BUFFER_COPY_FAILED, e))?;
        Ok(())
    })
}

/// A view of `src`'s device memory with `dst`'s shape, its element at the
/// mins being `at` in `src`'s coordinates; `dst` holds it from now on.
///
/// # Safety
/// Both are valid buffers; `src`'s handle is ours.
unsafe fn make_view(
    src: &ffi::HalideBuffer,
    at: &[i64],
    dst: &mut ffi::HalideBuffer,
) -> Result<(), Failure> {
    // SAFETY: the caller's promise.
    let h = unsafe { handle_of(src, code::DEVICE_CROP_FAILED) }?;
    // SAFETY: as above.
    let whole = unsafe { buffer::shaped_like(h, src, "the source") }?;
    // SAFETY: as above.
    let dims = unsafe { buffer::dims(dst) };
    let view = whole
        .strided_view("the crop", at, dims)
        .map_err(|e| Failure::vk(code::DEVICE_CROP_FAILED, e))?;
    let device = h.device.clone();
    buffer::set_handle(dst, DeviceBuffer::new(view, Origin::View, device));
    Ok(())
}

unsafe extern "C" fn device_crop(uc: Uc, src: ConstBuf, dst: Buf) -> c_int {
    entry(uc, "halide_vulkan_device_crop", || {
        // SAFETY: Halide passes valid buffers.
        let (s, d) = unsafe { (buf_ref(src)?, buf_mut(dst)?) };
        if s.dimensions != d.dimensions {
            return Err(Failure::new(
                code::DEVICE_CROP_FAILED,
                format!(
                    "a crop of {} dimensions from {}",
                    d.dimensions, s.dimensions
                ),
            ));
        }
        // SAFETY: as above.
        let at: Vec<i64> = unsafe { buffer::dims(d) }.iter().map(|x| x.min).collect();
        // SAFETY: as above.
        unsafe { make_view(s, &at, d) }
    })
}

unsafe extern "C" fn device_slice(
    uc: Uc,
    src: ConstBuf,
    dim: c_int,
    pos: c_int,
    dst: Buf,
) -> c_int {
    entry(uc, "halide_vulkan_device_slice", || {
        // SAFETY: Halide passes valid buffers.
        let (s, d) = unsafe { (buf_ref(src)?, buf_mut(dst)?) };
        // SAFETY: as above.
        let mut at: Vec<i64> = unsafe { buffer::dims(s) }.iter().map(|x| x.min).collect();
        let slot = usize::try_from(dim)
            .ok()
            .filter(|&i| i < at.len())
            .ok_or_else(|| {
                Failure::new(
                    code::DEVICE_CROP_FAILED,
                    format!(
                        "slice of dimension {dim} of a {}-dimensional buffer",
                        at.len()
                    ),
                )
            })?;
        at[slot] = pos.into();
        // SAFETY: as above.
        unsafe { make_view(s, &at, d) }
    })
}

unsafe extern "C" fn device_release_crop(uc: Uc, buf: Buf) -> c_int {
    entry(uc, "halide_vulkan_device_release_crop", || {
        // SAFETY: Halide passes a valid buffer whose handle is ours or none.
        let buf = unsafe { buf_mut(buf) }?;
        // SAFETY: as above.
        drop(unsafe { buffer::take_handle(buf) });
        Ok(())
    })
}

unsafe extern "C" fn wrap_native(uc: Uc, buf: Buf, native: u64) -> c_int {
    entry(uc, "halide_vulkan_wrap_native", || {
        // SAFETY: Halide passes a valid buffer.
        let buf = unsafe { buf_mut(buf) }?;
        if buf.device != 0 {
            return Err(Failure::new(
                code::DEVICE_WRAP_NATIVE_FAILED,
                "the buffer already has a device allocation".into(),
            ));
        }
        let device = context::acquire()?;
        // SAFETY: as above.
        let mut b = unsafe { buffer::shape(buf, "wrap_native") }?;
        let size = b.size_in_bytes();
        device
            .ctx
            .wrap_vk_buffer(&mut b, vk::Buffer::from_raw(native), size)
            .map_err(|e| Failure::vk(code::DEVICE_WRAP_NATIVE_FAILED, e))?;
        buffer::set_handle(buf, DeviceBuffer::new(b, Origin::Wrapped, device));
        Ok(())
    })
}

unsafe extern "C" fn detach_native(uc: Uc, buf: Buf) -> c_int {
    entry(uc, "halide_vulkan_detach_native", || {
        // SAFETY: Halide passes a valid buffer whose handle is ours or none.
        let buf = unsafe { buf_mut(buf) }?;
        if buf.device == 0 {
            return Ok(());
        }
        // SAFETY: as above.
        let h = unsafe { buffer::take_handle(buf) }.ok_or_else(|| {
            Failure::new(
                code::DEVICE_DETACH_NATIVE_FAILED,
                "the buffer's device allocation is not this interface's".into(),
            )
        })?;
        if h.origin != Origin::Wrapped {
            let why = "the buffer's device memory is vkcopy's, not a wrapped VkBuffer";
            buffer::set_handle(buf, *h);
            return Err(Failure::new(code::DEVICE_DETACH_NATIVE_FAILED, why.into()));
        }
        h.forget_host_side();
        let mut b = h.buffer;
        h.device
            .ctx
            .detach_vk_buffer(&mut b)
            .map_err(|e| Failure::vk(code::DEVICE_DETACH_NATIVE_FAILED, e))?;
        Ok(())
    })
}

unsafe extern "C" fn compute_capability(uc: Uc, major: *mut c_int, minor: *mut c_int) -> c_int {
    entry(uc, "halide_vulkan_compute_capability", || {
        let device = context::acquire()?;
        // "1.3.280": the device's Vulkan version.
        let mut v = device
            .ctx
            .info()
            .api_version
            .split('.')
            .map(|p| p.parse::<c_int>().unwrap_or(0));
        let (a, b) = (v.next().unwrap_or(1), v.next().unwrap_or(0));
        // SAFETY: Halide passes two writable ints (null is skipped).
        unsafe {
            if let (Some(major), Some(minor)) = (major.as_mut(), minor.as_mut()) {
                (*major, *minor) = (a, b);
            }
        }
        Ok(())
    })
}
