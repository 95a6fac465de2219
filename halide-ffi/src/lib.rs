//! Halide's C runtime ABI, declared once for vkcopy's library of it and for
//! the suite's harness of Halide's runtimes. Written by hand from Halide 21's
//! `HalideRuntime.h`; `tests/headers.rs` holds it to the header.

mod buffer;
pub mod code;
mod interface;
pub mod vkcopy;

pub use buffer::{HalideBuffer, HalideDimension, HalideType, TypeCode, DEVICE_DIRTY, HOST_DIRTY};
pub use interface::{
    AllocationPool, Buf, BufferCopyFn, ConstBuf, CropFn, DeviceInterface, DeviceInterfaceImpl,
    Iface, MallocFn, OneBufferFn, ReleaseFn, SliceFn, Uc,
};
