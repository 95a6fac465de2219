//! One error type for the runtime. Variants carry Halide's error names where
//! Halide has one (`halide_error_code_t` in `src/runtime/HalideRuntime.h`),
//! so a case can say `expect_error: host_is_null`.

use ash::vk;

use crate::memory::policy::SelectError;
use crate::memory::table::TableError;

/// Errors of the vkcopy runtime. No operation panics on bad input; it returns one of these.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Vulkan loader (`libvulkan.so.1`) could not be loaded.
    #[error("cannot load the Vulkan loader: {0}; install it (Debian/Ubuntu: apt-get install libvulkan1 mesa-vulkan-drivers)")]
    LoaderMissing(String),

    /// The loader found no physical device.
    #[error("no Vulkan device found; for the CPU driver lavapipe install mesa-vulkan-drivers (Debian/Ubuntu)")]
    NoDevice,

    /// `VKCOPY_DEVICE` or `VKCOPY_DEVICE_TYPE` matched none of the devices.
    #[error("no Vulkan device matches {wanted}; devices: {available}")]
    NoMatchingDevice {
        /// What was asked for.
        wanted: String,
        /// The devices there are.
        available: String,
    },

    /// A selector value (environment variable or option) is not understood.
    #[error("{name}={value}: {reason}")]
    BadSetting {
        /// The setting.
        name: &'static str,
        /// The value given.
        value: String,
        /// Why it is refused.
        reason: String,
    },

    /// The Khronos validation layer was asked for but is not installed.
    #[error("the Khronos validation layer is not installed (Debian/Ubuntu: apt-get install vulkan-validationlayers)")]
    ValidationLayerMissing,

    /// A Vulkan call failed.
    #[error("{call} failed: {result}")]
    Vulkan {
        /// The Vulkan function.
        call: &'static str,
        /// What it returned.
        result: vk::Result,
    },

    /// No memory type could hold the request, or every candidate failed to allocate.
    /// Halide: `halide_error_code_device_malloc_failed`.
    #[error("device_malloc_failed: {0}")]
    DeviceMallocFailed(String),

    /// A copy to host was asked for a buffer without host memory.
    /// Halide: `halide_error_code_host_is_null`.
    #[error("host_is_null: {0}")]
    HostIsNull(String),

    /// Both `host_dirty` and `device_dirty` are set: neither side can be trusted.
    /// Halide: `halide_error_code_copy_to_host_failed` / `copy_to_device_failed` with the same message.
    #[error("both host_dirty and device_dirty are set on {0}")]
    BothDirty(String),

    /// The host side of a buffer was read or written while its device side holds
    /// newer data (its own `device_dirty`, or a kernel or copy into a view of the
    /// same device memory since the host was last copied back). Call
    /// [`Context::copy_to_host`](crate::Context::copy_to_host) first.
    #[error("device_dirty: {0}")]
    DeviceDirty(String),

    /// Typed host access was refused: the host memory is borrowed by another
    /// guard of the same memory (a view's), or is not aligned for the element type.
    #[error("host_in_use: {0}")]
    HostInUse(String),

    /// The buffer has no device allocation where one is needed.
    #[error("no_device_allocation: {0}")]
    NoDeviceAllocation(String),

    /// Buffers of different shapes, element sizes or devices were combined.
    /// Halide: `halide_error_code_incompatible_device_interface` and friends.
    #[error("incompatible_buffers: {0}")]
    IncompatibleBuffers(String),

    /// A shape that the runtime cannot describe: too many dimensions, negative
    /// extent or stride, a size that overflows. Halide: `halide_error_code_bad_dimensions`.
    #[error("bad_dimensions: {0}")]
    BadDimensions(String),

    /// A compute kernel does not support this element type on this device: the
    /// device lacks a feature (`shaderInt64` for i64/u64, `shaderFloat64` for f64).
    #[error("unsupported_type: {elem} kernels need the device feature {missing_feature}")]
    UnsupportedType {
        /// The element type.
        elem: crate::types::ElemType,
        /// The Vulkan feature the device lacks.
        missing_feature: &'static str,
    },

    /// Generated WGSL failed to parse, validate or translate to SPIR-V (a bug in
    /// the kernel generator, reported rather than panicking).
    #[error("kernel_compile_failed: {0}")]
    KernelCompileFailed(String),

    /// A crop or slice outside its parent, or of the wrong shape.
    /// Halide: `halide_error_code_device_crop_failed`.
    #[error("device_crop_failed: {0}")]
    CropFailed(String),

    /// The device was lost (`VK_ERROR_DEVICE_LOST`); the context refuses further work.
    #[error("device_lost: {0}")]
    DeviceLost(String),

    /// An async copy was started after one that failed.
    #[error("dependency_failed: {0}")]
    DependencyFailed(String),

    /// A wait for the device did not end within the context's timeout.
    #[error("timeout: {op} did not finish within {after:?}")]
    Timeout {
        /// What was waited for.
        op: String,
        /// The timeout.
        after: std::time::Duration,
    },

    /// A memory table is malformed.
    #[error(transparent)]
    Table(#[from] TableError),

    /// Memory-type selection found nothing.
    #[error(transparent)]
    Select(#[from] SelectError),
}

impl Error {
    /// The Halide-style name of the error, as cases write it in `expect_error`.
    pub fn name(&self) -> &'static str {
        match self {
            Error::LoaderMissing(_) => "loader_missing",
            Error::NoDevice => "no_device",
            Error::NoMatchingDevice { .. } => "no_matching_device",
            Error::BadSetting { .. } => "bad_setting",
            Error::ValidationLayerMissing => "validation_layer_missing",
            Error::Vulkan { .. } => "vulkan_error",
            Error::DeviceMallocFailed(_) => "device_malloc_failed",
            Error::HostIsNull(_) => "host_is_null",
            Error::BothDirty(_) => "both_dirty",
            Error::DeviceDirty(_) => "device_dirty",
            Error::HostInUse(_) => "host_in_use",
            Error::NoDeviceAllocation(_) => "no_device_allocation",
            Error::IncompatibleBuffers(_) => "incompatible_buffers",
            Error::BadDimensions(_) => "bad_dimensions",
            Error::UnsupportedType { .. } => "unsupported_type",
            Error::KernelCompileFailed(_) => "kernel_compile_failed",
            Error::CropFailed(_) => "device_crop_failed",
            Error::DeviceLost(_) => "device_lost",
            Error::DependencyFailed(_) => "dependency_failed",
            Error::Timeout { .. } => "timeout",
            Error::Table(_) => "bad_memory_table",
            Error::Select(_) => "device_malloc_failed",
        }
    }
}

/// Result of the vkcopy runtime.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps a failed Vulkan call with the call's name.
pub(crate) trait VkContext<T> {
    fn vk(self, call: &'static str) -> Result<T>;
}

impl<T> VkContext<T> for std::result::Result<T, vk::Result> {
    fn vk(self, call: &'static str) -> Result<T> {
        self.map_err(|result| Error::Vulkan { call, result })
    }
}
