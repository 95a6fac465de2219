//! Halide's C runtime ABI, declared once for vkcopy's library of it and for
//! the suite's harness of Halide's runtimes. Written by hand from Halide 21's
//! `HalideRuntime.h`; `tests/headers.rs` holds it to the header.

mod buffer;
pub mod code;
pub mod vkcopy;

pub use buffer::{
    AllocationPool, Buf, BufferCopyFn, ConstBuf, CropFn, DeviceInterface, DeviceInterfaceImpl,
    HalideBuffer, HalideDimension, HalideType, Iface, MallocFn, OneBufferFn, ReleaseFn, SliceFn,
    TypeCode, Uc, DEVICE_DIRTY, HOST_DIRTY,
};
