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
