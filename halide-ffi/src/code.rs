//! `halide_error_code_t`: each code as a constant, and its name (Halide's,
//! without the `halide_error_code_` prefix).

use std::ffi::c_int;

macro_rules! codes {
    ($($konst:ident = $value:literal => $name:literal,)+) => {
        $(
            #[doc = concat!("`halide_error_code_", $name, "`.")]
            pub const $konst: c_int = $value;
        )+

        /// Every code with its name, in the header's order.
        pub const ALL: &[(c_int, &str)] = &[$(($value, $name)),+];
    };
}

codes! {
    SUCCESS = 0 => "success",
    GENERIC_ERROR = -1 => "generic_error",
    EXPLICIT_BOUNDS_TOO_SMALL = -2 => "explicit_bounds_too_small",
    BAD_TYPE = -3 => "bad_type",
    ACCESS_OUT_OF_BOUNDS = -4 => "access_out_of_bounds",
    BUFFER_ALLOCATION_TOO_LARGE = -5 => "buffer_allocation_too_large",
    BUFFER_EXTENTS_TOO_LARGE = -6 => "buffer_extents_too_large",
    CONSTRAINTS_MAKE_REQUIRED_REGION_SMALLER = -7 => "constraints_make_required_region_smaller",
    CONSTRAINT_VIOLATED = -8 => "constraint_violated",
    PARAM_TOO_SMALL = -9 => "param_too_small",
    PARAM_TOO_LARGE = -10 => "param_too_large",
    OUT_OF_MEMORY = -11 => "out_of_memory",
    BUFFER_ARGUMENT_IS_NULL = -12 => "buffer_argument_is_null",
    DEBUG_TO_FILE_FAILED = -13 => "debug_to_file_failed",
    COPY_TO_HOST_FAILED = -14 => "copy_to_host_failed",
    COPY_TO_DEVICE_FAILED = -15 => "copy_to_device_failed",
    DEVICE_MALLOC_FAILED = -16 => "device_malloc_failed",
    DEVICE_SYNC_FAILED = -17 => "device_sync_failed",
    DEVICE_FREE_FAILED = -18 => "device_free_failed",
    NO_DEVICE_INTERFACE = -19 => "no_device_interface",
    UNIMPLEMENTED = -20 => "unimplemented",
    SYMBOL_NOT_FOUND = -21 => "symbol_not_found",
    INTERNAL_ERROR = -22 => "internal_error",
    DEVICE_RUN_FAILED = -23 => "device_run_failed",
    UNALIGNED_HOST_PTR = -24 => "unaligned_host_ptr",
    BAD_FOLD = -25 => "bad_fold",
    FOLD_FACTOR_TOO_SMALL = -26 => "fold_factor_too_small",
    REQUIREMENT_FAILED = -27 => "requirement_failed",
    BUFFER_EXTENTS_NEGATIVE = -28 => "buffer_extents_negative",
    GPU_DEVICE_ERROR = -29 => "gpu_device_error",
    TRACE_FAILED = -30 => "trace_failed",
    SPECIALIZE_FAIL = -31 => "specialize_fail",
    DEVICE_WRAP_NATIVE_FAILED = -32 => "device_wrap_native_failed",
    DEVICE_DETACH_NATIVE_FAILED = -33 => "device_detach_native_failed",
    HOST_IS_NULL = -34 => "host_is_null",
    BAD_EXTERN_FOLD = -35 => "bad_extern_fold",
    DEVICE_INTERFACE_NO_DEVICE = -36 => "device_interface_no_device",
    HOST_AND_DEVICE_DIRTY = -37 => "host_and_device_dirty",
    BUFFER_IS_NULL = -38 => "buffer_is_null",
    DEVICE_BUFFER_COPY_FAILED = -39 => "device_buffer_copy_failed",
    DEVICE_CROP_UNSUPPORTED = -40 => "device_crop_unsupported",
    DEVICE_CROP_FAILED = -41 => "device_crop_failed",
    INCOMPATIBLE_DEVICE_INTERFACE = -42 => "incompatible_device_interface",
    BAD_DIMENSIONS = -43 => "bad_dimensions",
    DEVICE_DIRTY_WITH_NO_DEVICE_SUPPORT = -44 => "device_dirty_with_no_device_support",
    STORAGE_BOUND_TOO_SMALL = -45 => "storage_bound_too_small",
    SPLIT_FACTOR_NOT_POSITIVE = -46 => "split_factor_not_positive",
    VSCALE_INVALID = -47 => "vscale_invalid",
    CANNOT_PROFILE_PIPELINE = -48 => "cannot_profile_pipeline",
}

/// The name of `code` (`out_of_memory`), or `None` for a code Halide 21 does
/// not define.
pub fn name(code: c_int) -> Option<&'static str> {
    ALL.iter().find(|(c, _)| *c == code).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_go_both_ways() {
        assert_eq!(name(OUT_OF_MEMORY), Some("out_of_memory"));
        assert_eq!(OUT_OF_MEMORY, -11);
        assert_eq!(name(-1000), None);
        let mut seen = std::collections::BTreeSet::new();
        for (c, n) in ALL {
            assert!(seen.insert(*c), "{n}: code {c} twice");
            assert_eq!(name(*c), Some(*n));
        }
    }
}
