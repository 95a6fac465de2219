//! Memory steps: device allocation and release, dirty bits, and the
//! allocator's housekeeping.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::steps::planner::Planner;
use crate::steps::state::{State, StepError};
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
    /// `halide_reuse_device_allocations(false)` path).
    ReleaseUnused,
    /// Halide's `device_release`: frees unused blocks and the kernel pipelines.
    DeviceRelease,
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
    DeviceRelease,
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
        Step::DeviceRelease => Op::DeviceRelease,
    })
}

pub fn run(op: &Op, s: &mut State) -> Result<(), StepError> {
    let ctx = s.ctx;
    match op {
        Op::DeviceMalloc(b) => ctx.device_malloc(s.get_mut(*b)?)?,
        Op::DeviceFree(b) => ctx.device_free(s.get_mut(*b)?)?,
        Op::DeviceAndHostMalloc(b) => ctx.device_and_host_malloc(s.get_mut(*b)?)?,
        Op::DeviceAndHostFree(b) => ctx.device_and_host_free(s.get_mut(*b)?)?,
        Op::Release(b) => {
            ctx.device_free(s.get_mut(*b)?)?;
            s.drop_slot(*b);
        }
        Op::SetDirty {
            buffer,
            host_dirty,
            device_dirty,
        } => {
            // Through the setters: `false` says the other side holds the same data,
            // also for writes counted through views of the same memory.
            let b = s.get_mut(*buffer)?;
            if let Some(h) = host_dirty {
                b.set_host_dirty(*h);
            }
            if let Some(d) = device_dirty {
                b.set_device_dirty(*d);
            }
        }
        Op::FillHeap { heap, leave } => {
            ctx.fill_heap(*heap, *leave)?;
        }
        Op::ReleaseUnused => {
            ctx.release_unused();
        }
        Op::DeviceRelease => {
            ctx.device_release();
        }
    }
    Ok(())
}
