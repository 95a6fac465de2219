//! Measurement steps: timed copies held to per-device-type thresholds or to a
//! reference measured in the same run, and GPU timestamps on or off.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::CaseError;
use crate::requires::DeviceReq;
use crate::rt::floor::{self, Floor};
use crate::rt::{CopyPath, DeviceType, Role};
use crate::runtime::{State, StepError};
use crate::steps::planner::Planner;
use crate::timing::{self, gbps, HostMemcpy, Samples};
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

/// What a `measure` step times.
#[derive(Clone, Debug)]
pub enum Timed {
    CopyToHost(usize),
    CopyToDevice(usize),
    DeviceToDevice { from: usize, to: usize },
}

/// What a `min_ratio` compares with.
#[derive(Clone, Debug, PartialEq)]
pub enum Reference {
    /// A host memcpy of the same bytes, timed in the same runs.
    HostMemcpy,
    /// The runtime's plain copy of the same bytes along the same path, timed in
    /// the same runs.
    RawCopy,
    /// The driver's floor: the same bytes along the same path, recorded once,
    /// on every queue family; the fastest family's runs, timed after vkcopy's.
    Floor,
    /// An earlier measure of the case, by name.
    Measure(String),
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

pub fn run(op: &Op, s: &mut State) -> Result<(), StepError> {
    match op {
        Op::Profiling(on) => {
            s.ctx.set_profiling(*on);
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
            let (mut result, reference) = time(s, timed, *repeat, of)?;
            result.name = name.clone();
            let mut verdict = judge(s, min_gbps, max_us, &result);
            if let Some((of, min)) = min_ratio {
                let r = ratio_to(s, of, *min, reference.as_ref(), &result)?;
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
                let cpu = s.ctx.info().device_type == DeviceType::Cpu;
                let why = if s.ctx.validation() {
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
            s.measured.push(result);
            verdict
        }
    }
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

/// Runs the copy once untimed (imports, staging and first touches are not timed),
/// then `repeat` times by the host clock, each followed by a run timed by GPU
/// timestamps and, with a `host_memcpy` or `raw_copy` reference, by a run of it;
/// a `floor` is timed after the step's runs, as many.
fn time(
    s: &mut State,
    timed: &Timed,
    repeat: u32,
    of: Option<&Reference>,
) -> Result<(Measurement, Option<Samples>), StepError> {
    let ctx = s.ctx;
    let (what, bytes, role, path) = match timed {
        Timed::CopyToHost(b) => {
            let b = s.get(*b)?;
            let what = format!("copy_to_host {}", b.name());
            let bytes = b.len() * b.elem().bytes() as u64;
            (what, bytes, Some(Role::Readback), CopyPath::DeviceToHost)
        }
        Timed::CopyToDevice(b) => {
            let b = s.get(*b)?;
            let what = format!("copy_to_device {}", b.name());
            let bytes = b.len() * b.elem().bytes() as u64;
            (what, bytes, Some(Role::Upload), CopyPath::HostToDevice)
        }
        Timed::DeviceToDevice { from, to } => {
            let (f, t) = (s.get(*from)?, s.get(*to)?);
            let what = format!("device_to_device {} -> {}", f.name(), t.name());
            let bytes = f.len() * f.elem().bytes() as u64;
            (what, bytes, None, CopyPath::DeviceToDevice)
        }
    };
    let mut memcpy = match of {
        Some(Reference::HostMemcpy) => Some(HostMemcpy::new(bytes).map_err(StepError::Check)?),
        _ => None,
    };
    let raw = match of {
        Some(Reference::RawCopy) => Some(ctx.raw_copy(path, bytes)?),
        _ => None,
    };
    let mut reference_samples = Samples::default();
    let mut reference_error = None;
    let samples = timing::sample(
        ctx,
        &[path],
        (1, repeat),
        || copy_once(s, timed),
        || {
            if let Some(m) = &mut memcpy {
                reference_samples.host.push(m.run());
            }
            if let Some(r) = &raw {
                match r.run() {
                    Ok(t) => reference_samples.host.push(t.as_secs_f64()),
                    Err(e) => reference_error = Some(e),
                }
            }
        },
    )?;
    if let Some(e) = reference_error {
        return Err(StepError::Check(format!("measure: raw_copy: {e}")));
    }
    drop(raw);
    if let Some(Reference::Floor) = of {
        let at = |e: crate::rt::Error| StepError::Check(format!("measure: floor: {e}"));
        let times = Floor::new(ctx)
            .and_then(|f| f.measure(path, bytes, repeat))
            .map_err(at)?;
        if let Some(t) = floor::fastest(&times) {
            reference_samples.host = t.runs.iter().map(|d| d.as_secs_f64()).collect();
        }
    }
    let staging_type = role.and_then(|r| {
        ctx.stats()
            .placements()
            .iter()
            .rev()
            .find(|p| p.role == r)
            .map(|p| p.memory_type)
    });
    let (best, median) = (samples.best(), samples.median());
    let m = Measurement {
        what,
        name: None,
        bytes,
        repeat,
        best_seconds: best,
        median_seconds: median,
        gbps: gbps(bytes, best),
        median_gbps: gbps(bytes, median),
        gpu_best_seconds: samples.gpu_best(),
        gpu_median_seconds: samples.gpu_median(),
        staging_type,
        ratio: None,
        not_held: None,
    };
    Ok((m, of.is_some().then_some(reference_samples)))
}

/// One copy, its source marked as the side holding the data.
fn copy_once(s: &mut State, timed: &Timed) -> Result<(), StepError> {
    let ctx = s.ctx;
    match timed {
        Timed::CopyToHost(b) => {
            let b = s.get_mut(*b)?;
            b.set_host_dirty(false);
            b.set_device_dirty(true);
            ctx.copy_to_host(b)?;
        }
        Timed::CopyToDevice(b) => {
            let b = s.get_mut(*b)?;
            b.set_device_dirty(false);
            b.set_host_dirty(true);
            ctx.copy_to_device(b)?;
        }
        Timed::DeviceToDevice { from, to } => {
            let (src, dst) = s.pair(*from, *to)?;
            if src.host_dirty() || src.device_view().is_none() {
                return Err(StepError::Check(format!(
                    "measure: {} has no up-to-date device data; copy it to the device first",
                    src.name()
                )));
            }
            ctx.buffer_copy(src, dst, true)?;
        }
    }
    Ok(())
}

/// The measurement against its reference.
fn ratio_to(
    s: &State,
    of: &Reference,
    min: f64,
    timed: Option<&Samples>,
    r: &Measurement,
) -> Result<Ratio, StepError> {
    let (reference_gbps, reference_median_gbps) = match (of, timed) {
        (Reference::HostMemcpy | Reference::RawCopy | Reference::Floor, Some(m)) => {
            (gbps(r.bytes, m.best()), gbps(r.bytes, m.median()))
        }
        (Reference::Measure(n), _) => s
            .measured
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
