//! `halide_buffer_copy`, in place of the weak one of Halide's generic layer
//! (`src/runtime/device_interface.cpp`), which copies host to host itself
//! with `make_buffer_copy`: it takes `min(extent)` elements from each
//! buffer's min, so boxes that overlap in part are copied wrong and overrun
//! (Halide's latent bug 4, case `regressions::partial_overlap`). This one
//! decides as the generic one does, case by case, and copies host to host
//! with vkcopy, over the true intersection.
//!
//! Unlike the generic one it takes no lock of its own: the entry points it
//! calls take theirs. Programs that Halide compiles JIT keep the generic one,
//! which lives in the JIT's own runtime.

use std::ffi::c_int;

use crate::buffer;
use crate::error::{say, Failure};
use crate::ffi::{self, code, Buf, Iface, Uc, DEVICE_DIRTY, HOST_DIRTY};

/// `halide_buffer_copy`: copies `src` into `dst`'s box, on `dst_iface`'s
/// device, or into `dst`'s host memory when it is null.
///
/// # Safety
/// `src` and `dst` are null or valid `halide_buffer_t`s (maybe the same);
/// `dst_iface` is null or a device interface.
#[no_mangle]
pub unsafe extern "C" fn halide_buffer_copy(uc: Uc, src: Buf, dst_iface: Iface, dst: Buf) -> c_int {
    if src.is_null() || dst.is_null() {
        return code::BUFFER_ARGUMENT_IS_NULL;
    }
    // SAFETY: the caller's promise.
    unsafe { copy(uc, src, dst_iface, dst) }
}

/// How a copy that was tried ends, as the generic layer ends it: the dirty
/// bits of a copy made, or the failure said. (The cases it refuses before
/// trying, such as no host memory to copy to, return without a word: Halide's
/// own test of that case asks for the code alone.)
///
/// # Safety
/// As [`halide_buffer_copy`], neither null.
unsafe fn finish(uc: Uc, src: Buf, dst_iface: Iface, dst: Buf, result: c_int) -> c_int {
    if result == code::SUCCESS && src != dst {
        // SAFETY: the caller's promise.
        let d = unsafe { &mut *dst };
        d.flags &= !(HOST_DIRTY | DEVICE_DIRTY);
        d.flags |= if dst_iface.is_null() {
            HOST_DIRTY
        } else {
            DEVICE_DIRTY
        };
    }
    if result != code::SUCCESS {
        say(
            uc,
            &format!("halide_buffer_copy failed with error {result}"),
        );
    }
    result
}

/// The device interface's own `buffer_copy`.
///
/// # Safety
/// `iface` is a valid device interface; the buffers as above.
unsafe fn device_copy(uc: Uc, iface: Iface, src: Buf, to: Iface, dst: Buf) -> c_int {
    // SAFETY: the caller's promise: an interface and its impl table.
    unsafe { ((*(*iface).imp).buffer_copy)(uc, src, to, dst) }
}

/// The generic layer's decisions (halide_buffer_copy_already_locked), with the
/// host-to-host case done right.
///
/// # Safety
/// As [`halide_buffer_copy`], neither null.
unsafe fn copy(uc: Uc, src: Buf, dst_iface: Iface, dst: Buf) -> c_int {
    // SAFETY: the caller's promise; read afresh where a call may change it.
    let d = unsafe { &*dst };
    if !dst_iface.is_null() && !d.device_interface.is_null() && dst_iface != d.device_interface {
        say(
            uc,
            "halide_buffer_copy does not support switching device interfaces",
        );
        return code::INCOMPATIBLE_DEVICE_INTERFACE;
    }
    if !dst_iface.is_null() && d.device == 0 {
        // SAFETY: as above.
        let r = unsafe { ffi::halide_device_malloc(uc, dst, dst_iface) };
        if r != code::SUCCESS {
            return r;
        }
    }
    // SAFETY: as above.
    let (s, d) = unsafe { (&*src, &*dst) };
    let from_device_valid = s.device != 0 && (s.host.is_null() || s.flags & HOST_DIRTY == 0);
    let to_device = !dst_iface.is_null();
    let from_host_exists = !s.host.is_null();
    let from_host_valid =
        from_host_exists && (s.flags & DEVICE_DIRTY == 0 || s.device_interface.is_null());
    let to_host_exists = !d.host.is_null();
    if !to_device && !to_host_exists {
        return code::HOST_IS_NULL;
    }
    let mut result = code::INCOMPATIBLE_DEVICE_INTERFACE;
    if from_device_valid && to_device {
        // SAFETY: as above.
        result = unsafe { device_copy(uc, dst_iface, src, dst_iface, dst) };
    }
    if result != code::INCOMPATIBLE_DEVICE_INTERFACE {
        // SAFETY: as above.
        return unsafe { finish(uc, src, dst_iface, dst, result) };
    }
    if !from_host_exists && !to_host_exists {
        return code::INCOMPATIBLE_DEVICE_INTERFACE;
    }
    let src_iface = s.device_interface;
    if !to_device && from_host_valid {
        // SAFETY: as above.
        result = unsafe { host_to_host(uc, src, dst) };
    } else if !to_device && from_device_valid {
        // SAFETY: as above.
        result = unsafe { device_copy(uc, src_iface, src, std::ptr::null(), dst) };
        if result == code::INCOMPATIBLE_DEVICE_INTERFACE {
            // SAFETY: as above.
            result = unsafe { ffi::halide_copy_to_host(uc, src) };
            if result == code::SUCCESS {
                // SAFETY: as above.
                result = unsafe { copy(uc, src, std::ptr::null(), dst) };
            }
        }
    } else if from_device_valid && to_host_exists {
        // Device to another device, through the destination's host memory.
        // SAFETY: as above.
        result = unsafe { device_copy(uc, src_iface, src, std::ptr::null(), dst) };
        if result == code::SUCCESS {
            // SAFETY: as above.
            unsafe { (*dst).flags |= HOST_DIRTY };
            // SAFETY: as above.
            result = unsafe { ffi::halide_copy_to_device(uc, dst, dst_iface) };
        }
    } else if to_device {
        // Through the source's host memory.
        // SAFETY: as above.
        result = unsafe { ffi::halide_copy_to_host(uc, src) };
        if result == code::SUCCESS {
            // SAFETY: as above.
            result = unsafe { device_copy(uc, dst_iface, src, dst_iface, dst) };
        }
    }
    // SAFETY: as above.
    unsafe { finish(uc, src, dst_iface, dst, result) }
}

/// The intersection of the two boxes, host memory to host memory.
///
/// # Safety
/// As [`copy`]; both have host memory.
unsafe fn host_to_host(uc: Uc, src: Buf, dst: Buf) -> c_int {
    if src == dst {
        return code::SUCCESS;
    }
    let run = || -> Result<(), Failure> {
        // SAFETY: the caller's promise: each host pointer covers its span.
        let d = unsafe { buffer::over_host(&*dst, "the destination") }?;
        // SAFETY: as above.
        let mut s = unsafe { buffer::over_host(&*src, "the source") }?;
        // SAFETY: as above.
        let (from, to) = unsafe { ((*src).host as usize, (*dst).host as usize) };
        let (from_len, to_len) = (s.size_in_bytes() as usize, d.size_in_bytes() as usize);
        if from < to + to_len && to < from + from_len {
            // Two views of one host allocation: the source is read out
            // first, so that the copy behaves as memmove.
            // SAFETY: as above: `from_len` bytes at the source's host pointer.
            let bytes = unsafe { std::slice::from_raw_parts(from as *const u8, from_len) }.to_vec();
            s = vkcopy::Buffer::from_host(
                "the source",
                s.elem(),
                s.dims().to_vec(),
                vkcopy::HostBytes::from_vec(bytes),
            )
            .map_err(|e| Failure::vk(code::DEVICE_BUFFER_COPY_FAILED, e))?;
        }
        vkcopy::copy_host(&s, &d).map_err(|e| Failure::vk(code::DEVICE_BUFFER_COPY_FAILED, e))?;
        Ok(())
    };
    match run() {
        Ok(()) => code::SUCCESS,
        Err(f) => {
            say(uc, &format!("halide_buffer_copy: {}", f.message));
            f.code
        }
    }
}
