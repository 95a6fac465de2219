//! Memory steps: device allocation and release, native `VkBuffer`s wrapped and
//! detached, dirty bits, and the allocator's housekeeping.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::rt::span_bytes;
use crate::runtime::native::MAX_NATIVE_BYTES;
use crate::runtime::{lacks, Capability, NativeBuffers, Runtime, StepError};
use crate::steps::planner::Planner;
use crate::vocab::BufferName;

/// The memory steps as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "MemoryStep")]
pub enum Step {
    /// Device memory of `size_in_bytes`, zero-filled; dirty bits unchanged.
    DeviceMalloc(#[schemars(with = "BufferName")] String),
    /// Frees device memory; clears `device_dirty`.
    DeviceFree(#[schemars(with = "BufferName")] String),
    /// Halide's `device_and_host_malloc`: host memory (zeros) if the buffer has
    /// none, and device memory.
    DeviceAndHostMalloc(#[schemars(with = "BufferName")] String),
    /// Halide's `device_and_host_free`: frees device and host memory; clears both
    /// dirty bits.
    DeviceAndHostFree(#[schemars(with = "BufferName")] String),
    /// Drops a buffer, crop, slice or view (through `device_free`, as Halide's
    /// `Buffer` destructor does); memory other views use stays.
    Release(#[schemars(with = "BufferName")] String),
    /// Sets the dirty bits that are given.
    SetDirty {
        /// The buffer or view.
        buffer: String,
        /// The new `host_dirty` bit; unchanged when left out.
        #[serde(default)]
        host_dirty: Option<bool>,
        /// The new `device_dirty` bit; unchanged when left out.
        #[serde(default)]
        device_dirty: Option<bool>,
    },
    /// Simulation only: takes all of simulated heap `heap` but `leave` bytes.
    FillHeap {
        /// The heap index of the simulated table.
        heap: u32,
        /// Bytes to leave free; default 0.
        #[serde(default)]
        leave: u64,
    },
    /// Coalesces free regions and frees empty blocks (Halide's
    /// `halide_release_unused_device_allocations`).
    ReleaseUnused,
    /// Halide's `halide_reuse_device_allocations`: `true` keeps freed device
    /// allocations for later requests (the default), `false` frees what is unused
    /// now and every allocation when its buffer frees it from then on.
    ReuseDeviceAllocations(bool),
    /// Halide's `device_release`: frees unused blocks and the kernel pipelines.
    DeviceRelease,
    /// A `VkBuffer` of the case's own (as an application makes one): `bytes` of
    /// device-local memory the runtime does not allocate or account for; the
    /// runner destroys it when the case ends.
    NativeBuffer {
        /// Its name, for `wrap_native`.
        name: String,
        /// Its size, 1 byte to 1 GiB.
        bytes: u64,
    },
    /// Halide's `halide_vulkan_wrap_vk_buffer`: `buffer` (without device memory)
    /// gets the native buffer's memory, its element at its mins `offset` bytes in.
    WrapNative {
        /// The buffer to wrap it in.
        buffer: String,
        /// The `native_buffer`.
        native: String,
        /// Bytes into the native buffer, a multiple of the element size; default 0.
        #[serde(default)]
        offset: u64,
    },
    /// Halide's `halide_vulkan_detach_vk_buffer`: takes the native buffer back
    /// (the handle returned must be the one wrapped); the buffer has no device
    /// memory after it, and the native buffer keeps its contents.
    DetachNative(#[schemars(with = "BufferName")] String),
}

/// A checked memory step; buffers are slots.
#[derive(Clone, Debug)]
pub enum Op {
    DeviceMalloc(usize),
    DeviceFree(usize),
    DeviceAndHostMalloc(usize),
    DeviceAndHostFree(usize),
    Release(usize),
    SetDirty {
        buffer: usize,
        host_dirty: Option<bool>,
        device_dirty: Option<bool>,
    },
    FillHeap {
        heap: u32,
        leave: u64,
    },
    ReleaseUnused,
    ReuseDeviceAllocations(bool),
    DeviceRelease,
    NativeBuffer {
        native: usize,
        bytes: u64,
    },
    WrapNative {
        buffer: usize,
        native: usize,
        offset: u64,
    },
    DetachNative(usize),
}

pub fn plan(step: &Step, p: &mut Planner) -> Result<Op, CaseError> {
    Ok(match step {
        Step::DeviceMalloc(b) => Op::DeviceMalloc(p.buf(b)?),
        Step::DeviceFree(b) => Op::DeviceFree(p.buf(b)?),
        Step::DeviceAndHostMalloc(b) => {
            let slot = p.buf(b)?;
            // Later steps may use its host memory.
            p.slots[slot].host = true;
            Op::DeviceAndHostMalloc(slot)
        }
        Step::DeviceAndHostFree(b) => {
            let slot = p.buf(b)?;
            p.slots[slot].host = false;
            Op::DeviceAndHostFree(slot)
        }
        Step::Release(b) => {
            let i = p.buf(b)?;
            p.slots[i].released = true;
            Op::Release(i)
        }
        Step::SetDirty {
            buffer,
            host_dirty,
            device_dirty,
        } => {
            if host_dirty.is_none() && device_dirty.is_none() {
                return Err(p.err(format!(
                    "give `host_dirty`, `device_dirty` or both for {buffer}"
                )));
            }
            Op::SetDirty {
                buffer: p.buf(buffer)?,
                host_dirty: *host_dirty,
                device_dirty: *device_dirty,
            }
        }
        Step::FillHeap { heap, leave } => {
            if let Some(n) = p.heaps.filter(|&n| *heap as usize >= n) {
                return Err(p.err(format!(
                    "field heap: {heap}, but the simulated table has {n} heaps (0 to {})",
                    n.saturating_sub(1)
                )));
            }
            Op::FillHeap {
                heap: *heap,
                leave: *leave,
            }
        }
        Step::ReleaseUnused => Op::ReleaseUnused,
        Step::ReuseDeviceAllocations(on) => Op::ReuseDeviceAllocations(*on),
        Step::DeviceRelease => Op::DeviceRelease,
        Step::NativeBuffer { name, bytes } => {
            let name = p.loops.name(name).map_err(|e| p.err(e))?;
            if p.natives.iter().any(|(n, _)| *n == name) {
                return Err(p.err(format!(
                    "field name: '{name}' already names a native buffer"
                )));
            }
            if *bytes == 0 || *bytes > MAX_NATIVE_BYTES {
                return Err(p.err(format!(
                    "field bytes: {bytes}; a native buffer has 1 to {MAX_NATIVE_BYTES} bytes"
                )));
            }
            p.natives.push((name, *bytes));
            Op::NativeBuffer {
                native: p.natives.len() - 1,
                bytes: *bytes,
            }
        }
        Step::WrapNative {
            buffer,
            native,
            offset,
        } => {
            let slot = p.buf(buffer)?;
            let name = p.loops.name(native).map_err(|e| p.err(e))?;
            let Some(n) = p.natives.iter().position(|(n, _)| *n == name) else {
                let known: Vec<&str> = p.natives.iter().map(|(n, _)| n.as_str()).collect();
                return Err(p.err(format!(
                    "field native: no native_buffer named '{name}' before this step; there are {known:?}"
                )));
            };
            let s = &p.slots[slot];
            let elem = s.elem.bytes() as u64;
            if !offset.is_multiple_of(elem) {
                return Err(p.err(format!(
                    "field offset: {offset} is not a multiple of {}'s {elem}-byte elements",
                    s.name
                )));
            }
            let need = span_bytes(s.elem, &s.dims).unwrap_or(u64::MAX);
            let size = p.natives[n].1;
            if offset.checked_add(need).is_none_or(|end| end > size) {
                return Err(p.err(format!(
                    "field offset: {} spans {need} bytes, which from byte {offset} do not fit \
                     in the {size} bytes of native buffer '{name}'",
                    s.name
                )));
            }
            Op::WrapNative {
                buffer: slot,
                native: n,
                offset: *offset,
            }
        }
        Step::DetachNative(b) => Op::DetachNative(p.buf(b)?),
    })
}

/// What the step needs beyond the primitives of every runtime.
pub fn needs(op: &Op) -> Option<Capability> {
    match op {
        Op::DeviceMalloc(_)
        | Op::DeviceFree(_)
        | Op::Release(_)
        | Op::SetDirty { .. }
        | Op::FillHeap { .. }
        | Op::ReuseDeviceAllocations(_)
        | Op::DeviceRelease
        | Op::DeviceAndHostMalloc(_)
        | Op::DeviceAndHostFree(_)
        | Op::ReleaseUnused => None,
        Op::NativeBuffer { .. } | Op::WrapNative { .. } | Op::DetachNative(_) => {
            Some(Capability::NativeBuffers)
        }
    }
}

/// Primitives on any runtime; native buffers where the runtime has them.
pub fn run<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), StepError> {
    match op {
        Op::DeviceMalloc(b) => rt.device_malloc(*b),
        Op::DeviceFree(b) => rt.device_free(*b),
        Op::Release(b) => rt.release(*b),
        Op::SetDirty {
            buffer,
            host_dirty,
            device_dirty,
        } => rt.set_dirty(*buffer, *host_dirty, *device_dirty),
        Op::FillHeap { heap, leave } => rt.fill_heap(*heap, *leave),
        Op::ReuseDeviceAllocations(on) => rt.reuse_device_allocations(*on),
        Op::DeviceRelease => rt.device_release(),
        Op::DeviceAndHostMalloc(b) => rt.device_and_host_malloc(*b),
        Op::DeviceAndHostFree(b) => rt.device_and_host_free(*b),
        Op::ReleaseUnused => rt.release_unused(),
        Op::NativeBuffer { native, bytes } => natives(rt)?.make(*native, *bytes),
        Op::WrapNative {
            buffer,
            native,
            offset,
        } => natives(rt)?.wrap(*buffer, *native, *offset),
        Op::DetachNative(b) => natives(rt)?.detach(*b),
    }
}

fn natives<'r, 'a>(rt: &'r mut dyn Runtime<'a>) -> Result<&'r mut dyn NativeBuffers, StepError> {
    rt.native_buffers()
        .ok_or_else(|| lacks(Capability::NativeBuffers))
}
