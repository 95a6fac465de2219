//! Failures of an entry point: a Halide error code and a message.

use std::ffi::c_int;

use crate::ffi;

/// What an entry point returns when it fails.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: c_int,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: c_int, message: String) -> Self {
        Failure { code, message }
    }

    /// vkcopy's error under `code`, or under the code that says more (out of
    /// memory).
    pub(crate) fn vk(code: c_int, e: vkcopy::Error) -> Self {
        let code = match &e {
            vkcopy::Error::Vulkan { result, .. }
                if *result == vkcopy::ash::vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
                    || *result == vkcopy::ash::vk::Result::ERROR_OUT_OF_HOST_MEMORY =>
            {
                ffi::code::OUT_OF_MEMORY
            }
            _ => code,
        };
        Failure::new(code, e.to_string())
    }
}

/// Says `message` to Halide's error handler.
pub(crate) fn say(uc: ffi::Uc, message: &str) {
    let c = std::ffi::CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: Halide's error function, given a NUL-terminated message.
    unsafe { ffi::halide_error(uc, c.as_ptr()) };
}
