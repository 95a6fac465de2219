//! Measurement steps: timed copies held to per-device-type thresholds, and GPU
//! timestamps on or off.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Deserialize;

use crate::error::CaseError;
use crate::outcome::Measurement;
use crate::requires::DeviceReq;
use crate::rt::Role;
use crate::steps::planner::Planner;
use crate::steps::state::{State, StepError};

/// Most repeats of a `measure` step.
pub const MAX_REPEAT: u32 = 100_000;

/// The measurement steps as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Times a copy (see [`Measure`]).
    Measure(Measure),
    /// Turns GPU timestamps around copies on or off.
    Profiling(bool),
}

/// A timed copy: `copy_to_host: g`, `copy_to_device: g`, or a device-to-device
/// `buffer_copy` from `from` to `to`, repeated; the best time counts. Thresholds
/// apply to the named device types only, so the case runs everywhere and is
/// held to a speed only where one is expected.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measure {
    #[serde(default)]
    copy_to_host: Option<String>,
    #[serde(default)]
    copy_to_device: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    to: Option<String>,
    /// Runs; the fastest counts. Default 3.
    #[serde(default)]
    repeat: Option<u32>,
    /// Lowest acceptable GB/s (1e9 bytes/s) by device type.
    #[serde(default)]
    min_gbps: BTreeMap<String, f64>,
    /// Highest acceptable microseconds per copy by device type.
    #[serde(default)]
    max_us: BTreeMap<String, f64>,
}

/// What a `measure` step times.
#[derive(Clone, Debug)]
pub enum Timed {
    CopyToHost(usize),
    CopyToDevice(usize),
    DeviceToDevice { from: usize, to: usize },
}

/// A checked measurement step; buffers are slots.
#[derive(Clone, Debug)]
pub enum Op {
    Measure {
        timed: Timed,
        repeat: u32,
        min_gbps: Vec<(DeviceReq, f64)>,
        max_us: Vec<(DeviceReq, f64)>,
    },
    Profiling(bool),
}

pub fn plan(step: &Step, p: &mut Planner) -> Result<Op, CaseError> {
    let m = match step {
        Step::Profiling(on) => return Ok(Op::Profiling(*on)),
        Step::Measure(m) => m,
    };
    let timed = match (&m.copy_to_host, &m.copy_to_device, &m.from, &m.to) {
        (Some(b), None, None, None) => Timed::CopyToHost(p.buf(b)?),
        (None, Some(b), None, None) => Timed::CopyToDevice(p.buf(b)?),
        (None, None, Some(f), Some(t)) => {
            let (f, t) = (p.buf(f)?, p.buf(t)?);
            if f == t {
                return Err(p.err("`from` and `to` are the same buffer"));
            }
            Timed::DeviceToDevice { from: f, to: t }
        }
        _ => {
            return Err(
                p.err("give one of `copy_to_host: B`, `copy_to_device: B`, or `from: A, to: B`")
            )
        }
    };
    let repeat = m.repeat.unwrap_or(3);
    if repeat == 0 || repeat > MAX_REPEAT {
        return Err(p.err(format!("field repeat: 1 to {MAX_REPEAT}")));
    }
    let limits = |field: &str, m: &BTreeMap<String, f64>| {
        m.iter()
            .map(|(k, v)| {
                let r = DeviceReq::parse(k)
                    .ok_or_else(|| p.err(format!("field {field}: unknown device type '{k}'")))?;
                if !v.is_finite() || *v < 0.0 {
                    return Err(p.err(format!(
                        "field {field}: {k}: {v} is not a non-negative number"
                    )));
                }
                Ok((r, *v))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(Op::Measure {
        timed,
        repeat,
        min_gbps: limits("min_gbps", &m.min_gbps)?,
        max_us: limits("max_us", &m.max_us)?,
    })
}

pub fn run(op: &Op, s: &mut State) -> Result<(), StepError> {
    match op {
        Op::Profiling(on) => {
            s.ctx.set_profiling(*on);
            Ok(())
        }
        Op::Measure {
            timed,
            repeat,
            min_gbps,
            max_us,
        } => {
            let result = time(s, timed, *repeat)?;
            let verdict = judge(s, min_gbps, max_us, &result);
            s.measured.push(result);
            verdict
        }
    }
}

/// Runs the copy `repeat` times; the fastest run counts.
fn time(s: &mut State, timed: &Timed, repeat: u32) -> Result<Measurement, StepError> {
    let ctx = s.ctx;
    let (what, bytes, role) = match timed {
        Timed::CopyToHost(b) => {
            let b = s.get(*b)?;
            let what = format!("copy_to_host {}", b.name());
            (
                what,
                b.len() * b.elem().bytes() as u64,
                Some(Role::Readback),
            )
        }
        Timed::CopyToDevice(b) => {
            let b = s.get(*b)?;
            let what = format!("copy_to_device {}", b.name());
            (what, b.len() * b.elem().bytes() as u64, Some(Role::Upload))
        }
        Timed::DeviceToDevice { from, to } => {
            let (f, t) = (s.get(*from)?, s.get(*to)?);
            let what = format!("device_to_device {} -> {}", f.name(), t.name());
            (what, f.len() * f.elem().bytes() as u64, None)
        }
    };
    let mut best = f64::INFINITY;
    for _ in 0..repeat {
        let start;
        match timed {
            Timed::CopyToHost(b) => {
                let b = s.get_mut(*b)?;
                b.host_dirty = false;
                b.device_dirty = true;
                start = Instant::now();
                ctx.copy_to_host(b)?;
            }
            Timed::CopyToDevice(b) => {
                let b = s.get_mut(*b)?;
                b.device_dirty = false;
                b.host_dirty = true;
                start = Instant::now();
                ctx.copy_to_device(b)?;
            }
            Timed::DeviceToDevice { from, to } => {
                let (src, dst) = s.pair(*from, *to)?;
                if src.host_dirty || src.device_view().is_none() {
                    return Err(StepError::Check(format!(
                        "measure: {} has no up-to-date device data; copy it to the device first",
                        src.name()
                    )));
                }
                start = Instant::now();
                ctx.buffer_copy(src, dst, true)?;
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let staging_type = role.and_then(|r| {
        ctx.stats()
            .placements()
            .iter()
            .rev()
            .find(|p| p.role == r)
            .map(|p| p.memory_type)
    });
    Ok(Measurement {
        what,
        bytes,
        repeat,
        best_seconds: best,
        gbps: if best > 0.0 {
            bytes as f64 / best / 1e9
        } else {
            0.0
        },
        staging_type,
    })
}

/// Holds a measurement to the thresholds of the device's type.
fn judge(
    s: &State,
    min_gbps: &[(DeviceReq, f64)],
    max_us: &[(DeviceReq, f64)],
    r: &Measurement,
) -> Result<(), StepError> {
    let t = s.ctx.info().device_type;
    for (req, min) in min_gbps {
        if req.accepts(t) && r.gbps < *min {
            return Err(StepError::Check(format!(
                "measure {}: {:.3} GB/s, below the {min} GB/s expected of a {} device",
                r.what,
                r.gbps,
                req.name()
            )));
        }
    }
    let us = r.best_seconds * 1e6;
    for (req, max) in max_us {
        if req.accepts(t) && us > *max {
            return Err(StepError::Check(format!(
                "measure {}: {us:.1} us, above the {max} us expected of a {} device",
                r.what,
                req.name()
            )));
        }
    }
    Ok(())
}
