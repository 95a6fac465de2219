//! `halide_buffer_t` and what it holds.

use std::ffi::c_void;

use crate::interface::DeviceInterface;

/// `halide_type_code_t`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeCode {
    Int = 0,
    UInt = 1,
    Float = 2,
    Handle = 3,
    BFloat = 4,
}

/// `halide_type_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HalideType {
    /// A [`TypeCode`] as its `u8`.
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// `halide_dimension_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HalideDimension {
    pub min: i32,
    pub extent: i32,
    pub stride: i32,
    pub flags: u32,
}

/// `halide_buffer_t`.
#[repr(C)]
#[derive(Debug)]
pub struct HalideBuffer {
    /// The device API's handle of the allocation; 0 for none.
    pub device: u64,
    pub device_interface: *const DeviceInterface,
    pub host: *mut u8,
    /// [`HOST_DIRTY`], [`DEVICE_DIRTY`].
    pub flags: u64,
    pub ty: HalideType,
    pub dimensions: i32,
    pub dim: *mut HalideDimension,
    pub padding: *mut c_void,
}

/// `halide_buffer_flag_host_dirty`.
pub const HOST_DIRTY: u64 = 1;
/// `halide_buffer_flag_device_dirty`.
pub const DEVICE_DIRTY: u64 = 2;
