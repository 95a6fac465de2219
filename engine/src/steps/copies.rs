//! Copy steps: Halide's `copy_to_device`, `copy_to_host` and `halide_buffer_copy`.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::runtime::StepError;
use crate::runtime::{Capability, Runtime};
use crate::steps::planner::Planner;
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

/// Copies run on every runtime.
pub fn needs(op: &Op) -> Option<Capability> {
    match op {
        Op::CopyToDevice(_) | Op::CopyToHost(_) | Op::BufferCopy { .. } => None,
    }
}

pub fn run<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), StepError> {
    match op {
        Op::CopyToDevice(b) => rt.copy_to_device(*b),
        Op::CopyToHost(b) => rt.copy_to_host(*b),
        Op::BufferCopy {
            from,
            to,
            to_device,
        } => rt.buffer_copy(*from, *to, *to_device),
    }
}
