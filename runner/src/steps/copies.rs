//! Copy steps: Halide's `copy_to_device`, `copy_to_host` and `halide_buffer_copy`.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::steps::planner::Planner;
use crate::steps::state::{State, StepError};
use crate::vocab::BufferName;

/// The copy steps as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "CopiesStep")]
pub enum Step {
    /// Allocates if needed; uploads if `host_dirty`; clears it.
    CopyToDevice(#[schemars(with = "BufferName")] String),
    /// Reads back if `device_dirty`; clears it.
    CopyToHost(#[schemars(with = "BufferName")] String),
    /// The boxes' intersection, from whichever side of `from` is valid, to `to`'s
    /// device (`to_device: true`) or host memory.
    BufferCopy {
        /// The source buffer or view.
        from: String,
        /// The destination buffer or view; it becomes dirty on the side written.
        to: String,
        /// Write `to`'s device memory (`true`) or its host memory (`false`).
        to_device: bool,
    },
}

/// A checked copy step; buffers are slots.
#[derive(Clone, Debug)]
pub enum Op {
    CopyToDevice(usize),
    CopyToHost(usize),
    BufferCopy {
        from: usize,
        to: usize,
        to_device: bool,
    },
}

pub fn plan(step: &Step, p: &mut Planner) -> Result<Op, CaseError> {
    Ok(match step {
        Step::CopyToDevice(b) => Op::CopyToDevice(p.buf(b)?),
        Step::CopyToHost(b) => Op::CopyToHost(p.buf(b)?),
        Step::BufferCopy {
            from,
            to,
            to_device,
        } => {
            let (f, t) = (p.buf(from)?, p.buf(to)?);
            if f == t {
                return Err(p.err("`from` and `to` are the same buffer"));
            }
            Op::BufferCopy {
                from: f,
                to: t,
                to_device: *to_device,
            }
        }
    })
}

pub fn run(op: &Op, s: &mut State) -> Result<(), StepError> {
    let ctx = s.ctx;
    match op {
        Op::CopyToDevice(b) => ctx.copy_to_device(s.get_mut(*b)?)?,
        Op::CopyToHost(b) => ctx.copy_to_host(s.get_mut(*b)?)?,
        Op::BufferCopy {
            from,
            to,
            to_device,
        } => {
            let (src, dst) = s.pair(*from, *to)?;
            ctx.buffer_copy(src, dst, *to_device)?;
        }
    }
    Ok(())
}
