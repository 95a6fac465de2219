//! The frame of every entry point: a failure's message goes to `halide_error`
//! (which applications replace), a panic becomes an error, and under the
//! validation layer a message of the layer fails the call that caused it.

use std::ffi::c_int;

use crate::context;
use crate::error::Failure;
use crate::ffi;

/// Runs an entry point's body: its code, after `halide_error` has the
/// message of a failure (prefixed with the entry point's name).
pub(crate) fn entry(uc: ffi::Uc, name: &str, body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        Err(Failure::new(
            ffi::code::GENERIC_ERROR,
            format!("internal error: {what}"),
        ))
    });
    let out = out.and_then(|()| context::validation_findings());
    match out {
        Ok(()) => ffi::code::SUCCESS,
        Err(f) => {
            crate::error::say(uc, &format!("{name}: {}", f.message));
            f.code
        }
    }
}
