//! Why a step failed, on any runtime.

use crate::rt::Error;

/// Why a step failed: a runtime error (with its name, for `expect_error`), a failed
/// check, or something the device lacks (the case is then skipped).
#[derive(Debug)]
pub enum StepError {
    /// vkcopy's error.
    Runtime(Error),
    /// A call of a runtime's C ABI returned an error: its name (Halide's
    /// `halide_error_code_t`, as `expect_error` names it) and what it said.
    Call {
        /// The error code's name.
        name: &'static str,
        /// The call, its code, and the runtime's words.
        message: String,
    },
    /// A check of the case failed.
    Check(String),
    /// What the case does is beyond the runtime or the device: it is skipped.
    Unsupported(String),
}

impl StepError {
    /// The error's name for `expect_error`, for an error of the runtime.
    pub fn error_name(&self) -> Option<&str> {
        match self {
            StepError::Runtime(e) => Some(e.name()),
            StepError::Call { name, .. } => Some(name),
            StepError::Check(_) | StepError::Unsupported(_) => None,
        }
    }
}

impl From<Error> for StepError {
    fn from(e: Error) -> Self {
        StepError::Runtime(e)
    }
}

impl From<String> for StepError {
    fn from(m: String) -> Self {
        StepError::Check(m)
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Runtime(e) => write!(f, "{e}"),
            StepError::Call { message, .. } => f.write_str(message),
            StepError::Check(m) | StepError::Unsupported(m) => f.write_str(m),
        }
    }
}
