//! Async copy steps: a copy started on its stream and waited for later, so that
//! a case can put work between the two (a kernel, another copy), and check the
//! order in which copies ran. While its copy is in flight, the destination is
//! out of reach of other steps.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::runtime::{lacks, Capability, Runtime, StepError};
use crate::steps::planner::Planner;
use crate::vocab::BufferName;

/// The async copy steps as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "AsyncCopiesStep")]
pub enum Step {
    /// Starts `copy_to_device` on the upload stream; the buffer is in flight until `wait`.
    StartCopyToDevice(#[schemars(with = "BufferName")] String),
    /// Starts `copy_to_host` on the readback stream; the buffer is in flight until `wait`.
    StartCopyToHost(#[schemars(with = "BufferName")] String),
    /// Starts `buffer_copy` into `to`, which is in flight until `wait`; `from` must not
    /// be written meanwhile.
    StartBufferCopy {
        /// The source buffer or view.
        from: String,
        /// The destination buffer or view.
        to: String,
        /// Write `to`'s device memory (`true`) or its host memory (`false`).
        to_device: bool,
        /// Buffers whose latest async copy must finish before this one begins.
        #[serde(default)]
        after: Vec<String>,
    },
    /// Waits for the async copy into the buffer; its dirty bits are set then.
    Wait(#[schemars(with = "BufferName")] String),
    /// Checks that the latest async copy into `then` began after the one into
    /// `first` ended (host clock); both must have been waited for.
    ExpectOrder {
        /// The buffer of the copy that ran first.
        first: String,
        /// The buffer of the copy that ran after it.
        then: String,
    },
}

/// A checked async copy step; buffers are slots.
#[derive(Clone, Debug)]
pub enum Op {
    StartCopyToDevice(usize),
    StartCopyToHost(usize),
    StartBufferCopy {
        from: usize,
        to: usize,
        to_device: bool,
        after: Vec<usize>,
    },
    Wait(usize),
    ExpectOrder {
        first: usize,
        then: usize,
    },
}

pub fn plan(step: &Step, p: &mut Planner) -> Result<Op, CaseError> {
    Ok(match step {
        Step::StartCopyToDevice(b) => Op::StartCopyToDevice(p.buf(b)?),
        Step::StartCopyToHost(b) => Op::StartCopyToHost(p.buf(b)?),
        Step::StartBufferCopy {
            from,
            to,
            to_device,
            after,
        } => {
            let (f, t) = (p.buf(from)?, p.buf(to)?);
            if f == t {
                return Err(p.err("`from` and `to` are the same buffer"));
            }
            let after = after
                .iter()
                .map(|a| p.buf(a))
                .collect::<Result<Vec<_>, _>>()?;
            Op::StartBufferCopy {
                from: f,
                to: t,
                to_device: *to_device,
                after,
            }
        }
        Step::Wait(b) => Op::Wait(p.buf(b)?),
        Step::ExpectOrder { first, then } => {
            let (f, t) = (p.buf(first)?, p.buf(then)?);
            if f == t {
                return Err(p.err("`first` and `then` are the same buffer"));
            }
            Op::ExpectOrder { first: f, then: t }
        }
    })
}

pub fn run<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), StepError> {
    let names = |rt: &dyn Runtime<'a>, a: usize, b: usize| (rt.slot_name(a), rt.slot_name(b));
    let (first_name, then_name) = match op {
        Op::ExpectOrder { first, then } => names(rt, *first, *then),
        _ => Default::default(),
    };
    let a = rt
        .async_copies()
        .ok_or_else(|| lacks(Capability::AsyncCopies))?;
    match op {
        Op::StartCopyToDevice(b) => a.start_copy_to_device(*b),
        Op::StartCopyToHost(b) => a.start_copy_to_host(*b),
        Op::StartBufferCopy {
            from,
            to,
            to_device,
            after,
        } => a.start_buffer_copy(*from, *to, *to_device, after),
        Op::Wait(b) => a.wait(*b),
        Op::ExpectOrder { first, then } => {
            let ran = |slot: usize, name: &str| -> Result<_, StepError> {
                a.ran(slot)?.ok_or_else(|| {
                    StepError::Check(format!("the copy into {name} has not finished"))
                })
            };
            let ((_, first_end), (then_start, _)) =
                (ran(*first, &first_name)?, ran(*then, &then_name)?);
            if then_start < first_end {
                return Err(StepError::Check(format!(
                    "the copy into {then_name} began {:?} before the copy into {first_name} ended",
                    first_end - then_start,
                )));
            }
            Ok(())
        }
    }
}
