//! What `halide_buffer_t::device` holds: a boxed [`DeviceBuffer`], a vkcopy
//! buffer without host memory whose device side is the allocation (or a crop,
//! a slice, a wrapped `VkBuffer`). Host memory stays the caller's; each copy
//! borrows `host` as it is at the call.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use vkcopy::{Buffer, Dim, ElemType, HostBytes};

use crate::context::Device;
use crate::error::Failure;
use crate::ffi::{self, code, HalideBuffer};

/// How a device handle came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `device_malloc`: the handle owns its allocation.
    Malloc,
    /// `device_crop` or `device_slice` of another handle.
    View,
    /// `wrap_native`: the caller's `VkBuffer`, detached rather than freed.
    Wrapped,
}

/// A device handle.
pub(crate) struct DeviceBuffer {
    /// The device side, with the dimensions the handle was made for.
    pub(crate) buffer: Buffer,
    pub(crate) origin: Origin,
    /// The context it lives in; kept alive by the handle.
    pub(crate) device: Arc<Device>,
    /// The last copy's view over the caller's host memory, kept while the
    /// host pointer and shape stay the same: vkcopy's import of that memory
    /// then serves the next copy too, as it does for a buffer kept in Rust.
    host_side: Mutex<Option<Buffer>>,
}

impl DeviceBuffer {
    pub(crate) fn new(buffer: Buffer, origin: Origin, device: Arc<Device>) -> Self {
        DeviceBuffer {
            buffer,
            origin,
            device,
            host_side: Mutex::new(None),
        }
    }

    /// Drops the kept host view (and vkcopy's import of that memory).
    pub(crate) fn forget_host_side(&self) {
        *self.host_side.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Runs `f` on this handle's device side over `buf`'s host memory: the
    /// kept view when `buf.host` and its shape are those it was made for.
    ///
    /// # Safety
    /// As [`dims`]; `buf.host`, when not null, is valid for the buffer's span
    /// and not used by anything else during the copy.
    pub(crate) unsafe fn with_host_side<R>(
        &self,
        buf: &HalideBuffer,
        name: &str,
        f: impl FnOnce(&mut Buffer) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let mut kept = self.host_side.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the caller's promise.
        let now = unsafe { raw_dims(buf) };
        let same = kept.as_ref().is_some_and(|v| {
            v.dims().len() == now.len()
                && v.dims().iter().zip(now).all(|(a, b)| {
                    (a.min, a.extent, a.stride) == (b.min.into(), b.extent.into(), b.stride.into())
                })
                && v.host_view().is_some_and(|h| {
                    let mem = h.memory.read().unwrap_or_else(|p| p.into_inner());
                    std::ptr::eq(mem.as_ptr(), buf.host)
                })
        });
        if !same {
            // The old view (and vkcopy's import of its memory) goes first.
            *kept = None;
            // SAFETY: the caller's promise.
            *kept = Some(unsafe { with_host(self, buf, name) }?);
        }
        let Some(v) = kept.as_mut() else {
            unreachable!("set above");
        };
        let r = f(v);
        if r.is_err() {
            *kept = None;
        }
        r
    }
}

/// The element type vkcopy copies for `t`: copies move bytes, so an unsigned
/// integer of the element's size serves every Halide type.
pub(crate) fn elem(t: ffi::HalideType) -> Result<ElemType, Failure> {
    let bytes = (usize::from(t.bits).div_ceil(8)) * usize::from(t.lanes.max(1));
    Ok(match bytes {
        1 => ElemType::U8,
        2 => ElemType::U16,
        4 => ElemType::U32,
        8 => ElemType::U64,
        n => {
            return Err(Failure::new(
                code::BAD_DIMENSIONS,
                format!(
                    "elements of {n} bytes (type code {}, {} bits, {} lanes) are not supported",
                    t.code, t.bits, t.lanes
                ),
            ))
        }
    })
}

/// `buf`'s `halide_dimension_t`s.
///
/// # Safety
/// `buf` is a valid `halide_buffer_t` whose `dim` has `dimensions` entries.
unsafe fn raw_dims(buf: &HalideBuffer) -> &[ffi::HalideDimension] {
    let n = usize::try_from(buf.dimensions).unwrap_or(0);
    if n == 0 || buf.dim.is_null() {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(buf.dim, n) }
}

/// The dimensions of `buf`.
///
/// # Safety
/// As [`raw_dims`].
pub(crate) unsafe fn dims(buf: &HalideBuffer) -> Vec<Dim> {
    // SAFETY: the caller's promise.
    unsafe { raw_dims(buf) }
        .iter()
        .map(|d| Dim {
            min: d.min.into(),
            extent: d.extent.into(),
            stride: d.stride.into(),
        })
        .collect()
}

/// A vkcopy buffer of `buf`'s shape with no memory, named for messages.
///
/// # Safety
/// As [`dims`].
pub(crate) unsafe fn shape(buf: &HalideBuffer, name: &str) -> Result<Buffer, Failure> {
    // SAFETY: the caller's promise.
    let dims = unsafe { dims(buf) };
    Buffer::with_dims(name, elem(buf.ty)?, dims, false)
        .map_err(|e| Failure::vk(code::BAD_DIMENSIONS, e))
}

/// The handle in `buf.device`, if this library made it.
///
/// # Safety
/// `buf.device`, when `buf.device_interface` is this library's, is a handle
/// this library made and has not freed.
pub(crate) unsafe fn handle(buf: &HalideBuffer) -> Option<&DeviceBuffer> {
    // SAFETY: returns a pointer to a static table.
    if buf.device == 0 || buf.device_interface != unsafe { ffi::halide_vulkan_device_interface() } {
        return None;
    }
    // SAFETY: the caller's promise: a live `Box<DeviceBuffer>` made here.
    Some(unsafe { &*(buf.device as *const DeviceBuffer) })
}

/// Stores `h` as `buf`'s device handle.
pub(crate) fn set_handle(buf: &mut HalideBuffer, h: DeviceBuffer) {
    buf.device = Box::into_raw(Box::new(h)) as u64;
    // SAFETY: as above.
    buf.device_interface = unsafe { ffi::halide_vulkan_device_interface() };
}

/// Takes `buf`'s handle back, clearing `device` and `device_interface`.
///
/// # Safety
/// As [`handle`].
pub(crate) unsafe fn take_handle(buf: &mut HalideBuffer) -> Option<Box<DeviceBuffer>> {
    // SAFETY: the caller's promise.
    unsafe { handle(buf) }?;
    // SAFETY: as above; the box is taken once, as `device` is cleared.
    let h = unsafe { Box::from_raw(buf.device as *mut DeviceBuffer) };
    buf.device = 0;
    buf.device_interface = std::ptr::null();
    Some(h)
}

/// `h`'s device side with `buf`'s current shape over `buf`'s host memory, for
/// one copy.
///
/// # Safety
/// As [`dims`]; `buf.host`, when not null, is valid for the buffer's span and
/// not used by anything else during the copy.
pub(crate) unsafe fn with_host(
    h: &DeviceBuffer,
    buf: &HalideBuffer,
    name: &str,
) -> Result<Buffer, Failure> {
    // SAFETY: the caller's promise.
    let view = unsafe { shaped_like(h, buf, name) }?;
    let Some(host) = NonNull::new(buf.host) else {
        return Err(Failure::new(
            code::HOST_IS_NULL,
            format!("{name} has no host memory"),
        ));
    };
    let len = view.size_in_bytes() as usize;
    // SAFETY: the caller's promise: `len` bytes at `host`, used only by this copy.
    let bytes = unsafe { HostBytes::from_raw_parts(host, len, None) };
    view.with_host(name, bytes)
        .map_err(|e| Failure::vk(code::BAD_DIMENSIONS, e))
}

/// A vkcopy buffer of `buf`'s shape over `buf`'s host memory, for one copy.
///
/// # Safety
/// As [`with_host`].
pub(crate) unsafe fn over_host(buf: &HalideBuffer, name: &str) -> Result<Buffer, Failure> {
    let Some(host) = NonNull::new(buf.host) else {
        return Err(Failure::new(
            code::DEVICE_BUFFER_COPY_FAILED,
            format!("{name} has no host memory"),
        ));
    };
    // SAFETY: the caller's promise.
    let shape = unsafe { shape(buf, name) }?;
    let len = shape.size_in_bytes() as usize;
    // SAFETY: the caller's promise: `len` bytes at `host`, used only by this copy.
    let bytes = unsafe { HostBytes::from_raw_parts(host, len, None) };
    Buffer::from_host(name, shape.elem(), shape.dims().to_vec(), bytes)
        .map_err(|e| Failure::vk(code::DEVICE_BUFFER_COPY_FAILED, e))
}

/// `h`'s device side with `buf`'s current shape (the handle's when equal).
///
/// # Safety
/// As [`dims`].
pub(crate) unsafe fn shaped_like(
    h: &DeviceBuffer,
    buf: &HalideBuffer,
    name: &str,
) -> Result<Buffer, Failure> {
    // SAFETY: the caller's promise.
    let dims = unsafe { dims(buf) };
    h.buffer
        .view_at(name, dims, 0)
        .map_err(|e| Failure::vk(code::BAD_DIMENSIONS, e))
}
