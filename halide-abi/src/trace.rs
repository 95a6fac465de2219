//! Lifetimes of the library's GPU objects, said in the words of Halide's
//! debug runtime (`vk_create_context`, `Vulkan: Created buffer`, ...) to a
//! printer the host program installs. Halide's `gpu_object_lifetime_*` tests
//! count objects from those words; with no printer nothing is said.

use std::ffi::{c_char, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The installed printer, as a function address; 0 when there is none.
static PRINTER: AtomicUsize = AtomicUsize::new(0);

/// Installs `print` (or none) as the printer of object lifetimes. The JIT
/// bridge (`halide-abi/jit/vulkan_bridge.cpp`) installs one that writes
/// through Halide's `halide_print` in debug builds of a pipeline.
#[no_mangle]
pub extern "C" fn vkcopy_halide_set_trace(print: Option<unsafe extern "C" fn(*const c_char)>) {
    PRINTER.store(print.map_or(0, |f| f as usize), Ordering::Release);
}

/// Says `what` (one line) to the printer, if there is one.
pub(crate) fn say(what: &str) {
    let f = PRINTER.load(Ordering::Acquire);
    if f == 0 {
        return;
    }
    // SAFETY: a nonzero value is a function stored by vkcopy_halide_set_trace.
    let print: unsafe extern "C" fn(*const c_char) = unsafe { std::mem::transmute(f) };
    if let Ok(line) = CString::new(format!("{what}\n")) {
        // SAFETY: the printer takes a NUL-terminated line, as halide_print does.
        unsafe { print(line.as_ptr()) };
    }
}
