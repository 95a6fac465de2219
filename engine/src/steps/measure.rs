//! Measurement steps: timed copies held to per-device-type thresholds or to a
//! reference measured in the same run, and GPU timestamps on or off.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::requires::DeviceReq;
use crate::rt::DeviceType;
use crate::runtime::{lacks, Capability, Reference, Runtime, StepError, Timed, TimedCopies};
use crate::steps::planner::Planner;
use crate::timing::{gbps, Samples};
use crate::vocab::DeviceLimits;
use vkcopy_results::outcome::{Measurement, Ratio};

/// Most repeats of a `measure` step.
pub const MAX_REPEAT: u32 = 100_000;

/// `min_ratio: { of: host_memcpy }`.
pub const HOST_MEMCPY: &str = "host_memcpy";
/// `min_ratio: { of: raw_copy }`: the runtime's plain copy along the same path.
pub const RAW_COPY: &str = "raw_copy";
/// `min_ratio: { of: floor }`: the driver's floor, the best bare copy along the
/// same path on any queue family, recorded once (`vkcopy::floor`).
pub const FLOOR: &str = "floor";

/// The measurement steps as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(rename = "MeasureStep")]
pub enum Step {
    /// Times a copy (see [`Measure`]); boxed, as it is much larger than the other.
    Measure(Box<Measure>),
    /// Turns GPU timestamps around copies on or off.
    Profiling(bool),
}

/// A timed copy: `copy_to_host: g`, `copy_to_device: g`, or a device-to-device
/// `buffer_copy` from `from` to `to`, repeated. Thresholds apply to the named
/// device types only, so the case runs everywhere and is held to a speed only
/// where one is expected; `min_ratio` holds on every device.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Measure {
    /// A name for `min_ratio: { of: NAME }` of a later measure.
    #[serde(default)]
    name: Option<String>,
    /// Times `copy_to_host` of this buffer.
    #[serde(default)]
    copy_to_host: Option<String>,
    /// Times `copy_to_device` of this buffer.
    #[serde(default)]
    copy_to_device: Option<String>,
    /// With `to`: times a device-to-device `buffer_copy` from this buffer.
    #[serde(default)]
    from: Option<String>,
    /// With `from`: the destination of the device-to-device copy.
    #[serde(default)]
    to: Option<String>,
    /// Timed runs, 1 to 100000. Default 3.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100_000))]
    repeat: Option<u32>,
    /// Lowest acceptable GB/s (1e9 bytes/s) by device type.
    #[serde(default)]
    #[schemars(with = "DeviceLimits")]
    min_gbps: BTreeMap<String, f64>,
    /// Highest acceptable microseconds per copy by device type.
    #[serde(default)]
    #[schemars(with = "DeviceLimits")]
    max_us: BTreeMap<String, f64>,
    /// Lowest acceptable GB/s as a multiple of a reference's.
    #[serde(default)]
    min_ratio: Option<MinRatio>,
}

/// `min_ratio: { of: host_memcpy | NAME, value: R }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MinRatio {
    /// The reference: `host_memcpy` (a host memcpy of the same bytes in the same
    /// runs), `raw_copy` (one `vkCmdCopyBuffer` of the same bytes along the same
    /// path between memory the runtime allocated for it, in the same runs: the
    /// hardware's speed), `floor` (the driver's floor: the same copy recorded
    /// once and submitted again on every queue family, on a device of its own,
    /// the fastest family's runs, timed after the step's) or the `name` of an
    /// earlier measure.
    of: String,
    /// The lowest acceptable ratio of best GB/s to the reference's best GB/s.
    value: f64,
}

impl Reference {
    fn name(&self) -> &str {
        match self {
            Reference::HostMemcpy => HOST_MEMCPY,
            Reference::RawCopy => RAW_COPY,
            Reference::Floor => FLOOR,
            Reference::Measure(n) => n,
        }
    }
}

/// A checked measurement step; buffers are slots.
#[derive(Clone, Debug)]
pub enum Op {
    Measure {
        timed: Timed,
        name: Option<String>,
        repeat: u32,
        min_gbps: Vec<(DeviceReq, f64)>,
        max_us: Vec<(DeviceReq, f64)>,
        min_ratio: Option<(Reference, f64)>,
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
    let (field, slot) = match &timed {
        Timed::CopyToHost(b) => ("copy_to_host", *b),
        Timed::CopyToDevice(b) => ("copy_to_device", *b),
        Timed::DeviceToDevice { from, .. } => ("from", *from),
    };
    if p.slots[slot].dims.iter().any(|d| d.extent == 0) {
        return Err(p.err(format!(
            "field {field}: {} has no elements; there are no bytes to time",
            p.slots[slot].name
        )));
    }
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
    let min_gbps = limits("min_gbps", &m.min_gbps)?;
    let max_us = limits("max_us", &m.max_us)?;
    let min_ratio = m.min_ratio.as_ref().map(|r| plan_ratio(r, p)).transpose()?;
    let name = m.name.as_ref().map(|n| plan_name(n, p)).transpose()?;
    Ok(Op::Measure {
        timed,
        name,
        repeat,
        min_gbps,
        max_us,
        min_ratio,
    })
}

fn plan_ratio(r: &MinRatio, p: &Planner) -> Result<(Reference, f64), CaseError> {
    if !r.value.is_finite() || r.value <= 0.0 {
        return Err(p.err(format!(
            "field min_ratio: value: {} is not a positive number",
            r.value
        )));
    }
    let of = p
        .loops
        .name(&r.of)
        .map_err(|e| p.err(format!("field min_ratio: of: {e}")))?;
    let reference = match of.as_str() {
        HOST_MEMCPY => Reference::HostMemcpy,
        RAW_COPY => Reference::RawCopy,
        FLOOR => Reference::Floor,
        _ if p.measures.contains(&of) => Reference::Measure(of),
        _ => {
            return Err(p.err(format!(
                "field min_ratio: of: no earlier measure named '{of}' (named so far: {:?}); \
                 give host_memcpy, raw_copy, floor or the `name:` of an earlier measure",
                p.measures
            )))
        }
    };
    Ok((reference, r.value))
}

fn plan_name(n: &str, p: &mut Planner) -> Result<String, CaseError> {
    let name = p
        .loops
        .name(n)
        .map_err(|e| p.err(format!("field name: {e}")))?;
    if name == HOST_MEMCPY || name == RAW_COPY {
        return Err(p.err(format!("field name: '{name}' is a reference, not a name")));
    }
    if p.measures.contains(&name) {
        return Err(p.err(format!("field name: '{name}' already names a measure")));
    }
    p.measures.push(name.clone());
    Ok(name)
}

pub fn run<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), StepError> {
    match op {
        Op::Profiling(on) => {
            timed_copies(rt)?.set_profiling(*on);
            Ok(())
        }
        Op::Measure {
            timed,
            name,
            repeat,
            min_gbps,
            max_us,
            min_ratio,
        } => {
            let of = min_ratio.as_ref().map(|(of, _)| of);
            let (mut result, reference) = timed_copies(rt)?.time(timed, *repeat, of)?;
            result.name = name.clone();
            // Asked after the copies: a runtime may open its device on first use.
            let device_type = rt.device_type();
            let t = timed_copies(rt)?;
            let mut verdict = judge(device_type, min_gbps, max_us, &result);
            if let Some((of, min)) = min_ratio {
                let r = ratio_to(t, of, *min, reference.as_ref(), &result)?;
                if verdict.is_ok() {
                    verdict = check_ratio(&result, &r);
                }
                result.ratio = Some(r);
            }
            // Under the validation layer a copy's time is mostly the layer's;
            // on a CPU device (lavapipe) the device is the machine's own cores,
            // so a time measures the machine's load as much as the code; and
            // where speed is only reported other load moves it: the figures
            // are reported, a miss is not a failure.
            if let Err(StepError::Check(miss)) = &verdict {
                let cpu = device_type == Some(DeviceType::Cpu);
                let why = if t.under_validation() {
                    Some("under the validation layer".to_owned())
                } else {
                    match speed_mode() {
                        SpeedMode::Report => Some(format!("{SPEED_VAR}=report")),
                        SpeedMode::Auto if cpu => {
                            Some(format!("on a CPU device ({SPEED_VAR}=auto)"))
                        }
                        _ => None,
                    }
                };
                if let Some(why) = why {
                    result.not_held = Some(format!("{why} ({miss})"));
                    verdict = Ok(());
                }
            }
            t.record(result);
            verdict
        }
    }
}

fn timed_copies<'r, 'a>(rt: &'r mut dyn Runtime<'a>) -> Result<&'r mut dyn TimedCopies, StepError> {
    rt.timed_copies()
        .ok_or_else(|| lacks(Capability::TimedCopies))
}

/// Where a run says whether speed thresholds fail a case: `auto` (the
/// default: on a GPU, not on a CPU device), `hold` (on any device) or
/// `report` (figures kept, misses not failures). `cargo test` reports unless
/// told otherwise, so a busy machine cannot fail it on speed.
pub const SPEED_VAR: &str = "VKCOPY_SPEED";

/// What [`SPEED_VAR`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpeedMode {
    Auto,
    Hold,
    Report,
}

/// Whether speed thresholds fail a case in this process ([`SPEED_VAR`]).
pub fn speed_mode() -> SpeedMode {
    match std::env::var(SPEED_VAR).as_deref().map(str::trim) {
        Ok("report") => SpeedMode::Report,
        Ok("hold") => SpeedMode::Hold,
        _ => SpeedMode::Auto,
    }
}

/// The measurement against its reference.
fn ratio_to(
    t: &dyn TimedCopies,
    of: &Reference,
    min: f64,
    timed: Option<&Samples>,
    r: &Measurement,
) -> Result<Ratio, StepError> {
    let (reference_gbps, reference_median_gbps) = match (of, timed) {
        (Reference::HostMemcpy | Reference::RawCopy | Reference::Floor, Some(m)) => {
            (gbps(r.bytes, m.best()), gbps(r.bytes, m.median()))
        }
        (Reference::Measure(n), _) => t
            .measured()
            .iter()
            .rev()
            .find(|m| m.name.as_deref() == Some(n))
            .map(|m| (m.gbps, m.median_gbps))
            .ok_or_else(|| StepError::Check(format!("measure: no result of measure '{n}'")))?,
        (Reference::HostMemcpy | Reference::RawCopy | Reference::Floor, None) => {
            return Err(StepError::Check(format!(
                "measure: {} was not timed",
                of.name()
            )))
        }
    };
    let ratio = if reference_gbps > 0.0 {
        r.gbps / reference_gbps
    } else {
        0.0
    };
    Ok(Ratio {
        of: of.name().to_owned(),
        reference_gbps,
        reference_median_gbps,
        ratio,
        min,
    })
}

/// An error naming both figures when the ratio is below its minimum.
fn check_ratio(r: &Measurement, ratio: &Ratio) -> Result<(), StepError> {
    if ratio.ratio >= ratio.min {
        return Ok(());
    }
    Err(StepError::Check(format!(
        "measure {}: {:.3} GB/s is {:.3}x {} ({:.3} GB/s), below the {}x expected \
         (best runs, measured in the same run)",
        r.what, r.gbps, ratio.ratio, ratio.of, ratio.reference_gbps, ratio.min
    )))
}

/// Holds a measurement to the thresholds of the device's type.
fn judge(
    t: Option<DeviceType>,
    min_gbps: &[(DeviceReq, f64)],
    max_us: &[(DeviceReq, f64)],
    r: &Measurement,
) -> Result<(), StepError> {
    let accepts = |req: &DeviceReq| t.is_some_and(|t| req.accepts(t));
    for (req, min) in min_gbps {
        if accepts(req) && r.gbps < *min {
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
        if accepts(req) && us > *max {
            return Err(StepError::Check(format!(
                "measure {}: {us:.1} us, above the {max} us expected of a {} device",
                r.what,
                req.name()
            )));
        }
    }
    Ok(())
}
