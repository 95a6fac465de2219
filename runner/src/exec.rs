//! Runs a plan: selection checks on recorded tables, or runtime steps on a
//! `vkcopy` context. Every runtime case ends with a leak check and a check that
//! the validation layer said nothing.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use vkcopy::Placement;
use vkcopy::{Buffer, Context, ContextOptions};
use vkcopy_kernels::Kernels;

use crate::plan::{CasePlan, Measure, MeasureOp, Op, OpKind, PlanKind, RuntimePlan, SelectionPlan};
use vkcopy::memory::table::parse_property_flag;
use vkcopy::Role;

/// The verdict of one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    Skip,
    /// Failed, and listed in the expectations file as a known failure (CTS "xfail").
    ExpectedFail,
    /// Passed, but listed as a known failure: the list is out of date, which fails the
    /// run until it is updated (deqp-runner's "UnexpectedImprovement").
    UnexpectedPass,
}

/// What running a case gave.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Outcome {
    pub status: Status,
    /// Why it failed or was skipped; empty on a pass.
    pub message: String,
    pub seconds: f64,
    /// Where the case's allocations landed.
    pub placements: Vec<PlacementRecord>,
    /// Timed copies.
    pub measurements: Vec<Measurement>,
}

/// One `measure` step's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measurement {
    /// `copy_to_host g`, `copy_to_device g`, `device_to_device a -> b`.
    pub what: String,
    pub bytes: u64,
    pub repeat: u32,
    /// Fastest run, host clock, seconds.
    pub best_seconds: f64,
    /// bytes / best_seconds / 1e9.
    pub gbps: f64,
    /// Memory types of the staging used, if any (`readback` / `upload` roles).
    pub staging_type: Option<u32>,
}

/// A placement as it goes into reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PlacementRecord {
    pub role: String,
    pub memory_type: u32,
    pub flags: String,
    pub heap: u32,
    pub bytes: u64,
    pub fallbacks: u32,
}

impl From<&Placement> for PlacementRecord {
    fn from(p: &Placement) -> Self {
        PlacementRecord {
            role: p.role.to_string(),
            memory_type: p.memory_type,
            flags: p.flags_name(),
            heap: p.heap,
            bytes: p.size,
            fallbacks: p.fallbacks,
        }
    }
}

impl Outcome {
    /// A failure before the case could run (it does not load, or there is no device).
    pub fn failed(message: String) -> Self {
        Outcome::new(Status::Fail, message, Duration::ZERO)
    }

    fn new(status: Status, message: String, took: Duration) -> Self {
        Outcome {
            status,
            message,
            seconds: took.as_secs_f64(),
            placements: Vec::new(),
            measurements: Vec::new(),
        }
    }
}

/// Runs `plan`; `options` says which device and policy. A case that needs a device
/// gets a fresh context of its own.
pub fn run(plan: &CasePlan, options: &ContextOptions) -> Outcome {
    let start = Instant::now();
    match &plan.kind {
        PlanKind::Selection(s) => match check_selection(s) {
            Ok(()) => Outcome::new(Status::Pass, String::new(), start.elapsed()),
            Err(m) => Outcome::new(Status::Fail, m, start.elapsed()),
        },
        PlanKind::Runtime(r) => {
            let mut options = options.clone();
            if r.simulate_memory.is_some() {
                options.simulate_memory = r.simulate_memory.clone();
            }
            if let Some(p) = r.policy {
                options.policy = p;
            }
            let ctx = match Context::new(options) {
                Ok(c) => c,
                Err(e) => {
                    return Outcome::new(
                        Status::Fail,
                        format!("cannot create a Vulkan context: {e}"),
                        start.elapsed(),
                    )
                }
            };
            if let Some(why) = plan.unmet(ctx.info().device_type) {
                return Outcome::new(Status::Skip, why, start.elapsed());
            }
            let mut measured = Vec::new();
            let result = run_steps(&ctx, r, &mut measured);
            let mut problems = Vec::new();
            let mut skip = None;
            match result {
                Ok(()) => {}
                Err((Status::Skip, m)) => skip = Some(m),
                Err((_, m)) => problems.push(m),
            }
            let leaks = ctx.leak_check();
            if !leaks.is_empty() {
                problems.push(format!("leak check: {leaks}"));
            }
            let messages = ctx.take_validation_messages();
            if !messages.is_empty() {
                problems.push(format!(
                    "{} validation message(s):\n  {}",
                    messages.len(),
                    messages.join("\n  ")
                ));
            }
            let placements = ctx
                .stats()
                .placements()
                .iter()
                .map(PlacementRecord::from)
                .collect();
            let mut out = if let (Some(why), true) = (&skip, problems.is_empty()) {
                Outcome::new(Status::Skip, why.clone(), start.elapsed())
            } else if problems.is_empty() {
                Outcome::new(Status::Pass, String::new(), start.elapsed())
            } else {
                Outcome::new(Status::Fail, problems.join("\n"), start.elapsed())
            };
            out.placements = placements;
            out.measurements = measured;
            out
        }
    }
}

/// Checks every expectation of a selection case; lists every mismatch.
pub fn check_selection(s: &SelectionPlan) -> Result<(), String> {
    let mut wrong = Vec::new();
    for c in &s.checks {
        for &(policy, want) in &c.expect {
            let request = match (c.role, &c.raw) {
                (Some(role), _) => policy.request(role),
                (None, Some(raw)) => *raw,
                (None, None) => unreachable!("the plan has a role or a raw request"),
            };
            let got = policy.select(&s.table, &request, u32::MAX);
            match got {
                Ok(t) if t == want => {}
                Ok(t) => wrong.push(format!(
                    "line {}: {} under {policy}: picked {}, expected {}",
                    c.line,
                    c.request,
                    s.table.describe_type(t),
                    s.table.describe_type(want)
                )),
                Err(e) => wrong.push(format!(
                    "line {}: {} under {policy}: {e}; expected type {want}",
                    c.line, c.request
                )),
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} on {}:\n  {}",
            "selection differs",
            s.table_name,
            wrong.join("\n  ")
        ))
    }
}

/// The buffers and views of a running case, by slot.
struct Slots {
    names: Vec<String>,
    bufs: Vec<Option<Buffer>>,
}

impl Slots {
    fn get(&self, i: usize) -> Result<&Buffer, StepError> {
        self.bufs[i].as_ref().ok_or_else(|| self.missing(i))
    }

    fn get_mut(&mut self, i: usize) -> Result<&mut Buffer, StepError> {
        if self.bufs[i].is_none() {
            return Err(self.missing(i));
        }
        Ok(self.bufs[i].as_mut().expect("checked"))
    }

    /// Two different slots, the second mutable.
    fn pair(&mut self, a: usize, b: usize) -> Result<(&Buffer, &mut Buffer), StepError> {
        self.get(a)?;
        self.get(b)?;
        let (x, y) = if a < b {
            let (lo, hi) = self.bufs.split_at_mut(b);
            (lo[a].as_ref(), hi[0].as_mut())
        } else {
            let (lo, hi) = self.bufs.split_at_mut(a);
            (hi[0].as_ref(), lo[b].as_mut())
        };
        Ok((x.expect("checked"), y.expect("checked")))
    }

    fn take(&mut self, i: usize) -> Result<Buffer, StepError> {
        self.bufs[i].take().ok_or_else(|| self.missing(i))
    }

    fn put(&mut self, i: usize, b: Buffer) {
        self.bufs[i] = Some(b);
    }

    fn missing(&self, i: usize) -> StepError {
        StepError::Check(format!(
            "buffer {} does not exist (released, or the step that makes it failed)",
            self.names[i]
        ))
    }
}

/// Runs the steps; on the first that fails, says whether the case failed or is
/// skipped (the device lacks a feature), and why.
fn run_steps(
    ctx: &Context,
    plan: &RuntimePlan,
    measured: &mut Vec<Measurement>,
) -> Result<(), (Status, String)> {
    let mut bufs = Slots {
        names: plan.slots.clone(),
        bufs: (0..plan.slots.len()).map(|_| None).collect(),
    };
    for (i, d) in plan.buffers.iter().enumerate() {
        bufs.bufs[i] = Some(
            Buffer::with_dims(&d.name, d.elem, d.dims.clone(), d.host)
                .map_err(|e| (Status::Fail, format!("buffer {}: {e}", d.name)))?,
        );
    }
    for op in &plan.ops {
        step(ctx, &mut bufs, op, measured).map_err(|e| {
            let status = match e {
                StepError::Unsupported(_) => Status::Skip,
                _ => Status::Fail,
            };
            (status, format!("line {}: {e}", op.line))
        })?;
    }
    Ok(())
}

/// Why a step failed: a runtime error (with its name, for `expect_error`), a failed
/// check, or something the device lacks (the case is then skipped).
enum StepError {
    Runtime(vkcopy::Error),
    Check(String),
    Unsupported(String),
}

/// Skips the case when the device cannot run kernels on the buffer's element type.
fn supported(ctx: &Context, b: &Buffer) -> Result<(), StepError> {
    ctx.kernel_supports(b.elem())
        .map_err(|e| StepError::Unsupported(e.to_string()))
}

impl From<vkcopy::Error> for StepError {
    fn from(e: vkcopy::Error) -> Self {
        StepError::Runtime(e)
    }
}

impl From<String> for StepError {
    fn from(m: String) -> Self {
        StepError::Check(m)
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Runtime(e) => write!(f, "{e}"),
            StepError::Check(m) | StepError::Unsupported(m) => f.write_str(m),
        }
    }
}

fn step(
    ctx: &Context,
    bufs: &mut Slots,
    op: &Op,
    measured: &mut Vec<Measurement>,
) -> Result<(), StepError> {
    let err = StepError::Runtime;
    match &op.kind {
        OpKind::FillHost { buffer, value } => {
            let f = value.compile();
            bufs.get_mut(*buffer)?.fill(|c| f.eval(c)).map_err(err)
        }
        OpKind::DeviceMalloc(b) => ctx.device_malloc(bufs.get_mut(*b)?).map_err(err),
        OpKind::DeviceFree(b) => ctx.device_free(bufs.get_mut(*b)?).map_err(err),
        OpKind::CopyToDevice(b) => ctx.copy_to_device(bufs.get_mut(*b)?).map_err(err),
        OpKind::CopyToHost(b) => ctx.copy_to_host(bufs.get_mut(*b)?).map_err(err),
        OpKind::SetDirty {
            buffer,
            host,
            device,
        } => {
            let b = bufs.get_mut(*buffer)?;
            if let Some(h) = host {
                b.host_dirty = *h;
            }
            if let Some(d) = device {
                b.device_dirty = *d;
            }
            Ok(())
        }
        OpKind::Expect {
            buffer,
            value,
            region,
        } => {
            let whole = bufs.get(*buffer)?;
            let part;
            let b = match region {
                None => whole,
                Some((min, extent)) => {
                    // The box clipped to the buffer, as a host view.
                    let (mut lo, mut ext) = (Vec::new(), Vec::new());
                    for (d, (&m, &e)) in whole.dims().iter().zip(min.iter().zip(extent)) {
                        let a = m.max(d.min);
                        let b = m.saturating_add(e).min(d.min + d.extent);
                        if b <= a {
                            return Err(StepError::Check(format!(
                                "expect {}: the box [{m}, {}) does not meet the buffer's [{}, {}) in a dimension",
                                whole.name(),
                                m.saturating_add(e),
                                d.min,
                                d.min + d.extent
                            )));
                        }
                        lo.push(a);
                        ext.push(b - a);
                    }
                    part = whole.cropped(whole.name(), &lo, &ext).map_err(err)?;
                    &part
                }
            };
            let f = value.compile();
            let cmp = b.compare(|c| f.eval(c), 5).map_err(err)?;
            let count = cmp.mismatches;
            if count == 0 {
                return Ok(());
            }
            let shown: Vec<String> = cmp
                .first
                .iter()
                .map(|m| format!("{:?}: expected {}, got {}", m.coords, m.expected, m.actual))
                .collect();
            Err(StepError::Check(format!(
                "expect {}: {count} of {} elements differ from '{value}'; first: {}",
                b.name(),
                b.len(),
                shown.join("; ")
            )))
        }
        OpKind::ExpectFlags {
            buffer,
            host_dirty,
            device_dirty,
            has_device,
        } => {
            let b = bufs.get(*buffer)?;
            let mut wrong = Vec::new();
            let mut check = |what: &str, want: Option<bool>, got: bool| {
                if let Some(w) = want {
                    if w != got {
                        wrong.push(format!("{what} is {got}, expected {w}"));
                    }
                }
            };
            check("host_dirty", *host_dirty, b.host_dirty);
            check("device_dirty", *device_dirty, b.device_dirty);
            check("has_device", *has_device, b.has_device_allocation());
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(StepError::Check(format!(
                    "expect_flags {}: {}",
                    b.name(),
                    wrong.join(", ")
                )))
            }
        }
        OpKind::Crop {
            from,
            to,
            min,
            extent,
        } => {
            let name = bufs.names[*to].clone();
            let v = bufs.get(*from)?.cropped(&name, min, extent).map_err(err)?;
            bufs.bufs[*to] = Some(v);
            Ok(())
        }
        OpKind::Slice { from, to, dim, pos } => {
            let name = bufs.names[*to].clone();
            let v = bufs.get(*from)?.sliced(&name, *dim, *pos).map_err(err)?;
            bufs.bufs[*to] = Some(v);
            Ok(())
        }
        OpKind::View { from, to, at, dims } => {
            let name = bufs.names[*to].clone();
            let v = bufs
                .get(*from)?
                .strided_view(&name, at, dims.clone())
                .map_err(err)?;
            bufs.bufs[*to] = Some(v);
            Ok(())
        }
        OpKind::ViewNoHost { from, to } => {
            let name = bufs.names[*to].clone();
            let v = bufs.get(*from)?.without_host(&name);
            bufs.bufs[*to] = Some(v);
            Ok(())
        }
        OpKind::Release(b) => {
            // Through device_free, as Halide's Buffer destructor does.
            ctx.device_free(bufs.get_mut(*b)?).map_err(err)?;
            bufs.bufs[*b] = None;
            Ok(())
        }
        OpKind::BufferCopy {
            from,
            to,
            to_device,
        } => {
            let (src, dst) = bufs.pair(*from, *to)?;
            ctx.buffer_copy(src, dst, *to_device)
                .map(|_| ())
                .map_err(err)
        }
        OpKind::ExpectCounters(want) => {
            let have = ctx.counters();
            let wrong: Vec<String> = want
                .iter()
                .filter_map(|(name, v)| {
                    let got = have.iter().find(|(n, _)| n == name).map_or(0, |(_, g)| *g);
                    (got != *v).then(|| format!("{name} is {got}, expected {v}"))
                })
                .collect();
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(StepError::Check(format!(
                    "expect_counters: {}",
                    wrong.join(", ")
                )))
            }
        }
        OpKind::KernelFill { out, value } => {
            let b = bufs.get_mut(*out)?;
            supported(ctx, b)?;
            ctx.kernel_fill(b, value).map_err(err)
        }
        OpKind::KernelAdd {
            out,
            inputs,
            constant,
        } => {
            // Take the buffers out of their slots for disjoint borrows; put them back.
            let mut o = bufs.take(*out)?;
            let mut ins = Vec::new();
            for &i in inputs {
                match bufs.take(i) {
                    Ok(b) => ins.push((i, b)),
                    Err(e) => {
                        bufs.put(*out, o);
                        for (j, b) in ins {
                            bufs.put(j, b);
                        }
                        return Err(e);
                    }
                }
            }
            let result = supported(ctx, &o).and_then(|()| {
                let mut refs: Vec<&mut Buffer> = ins.iter_mut().map(|(_, b)| b).collect();
                ctx.kernel_add(&mut o, &mut refs, *constant).map_err(err)
            });
            bufs.put(*out, o);
            for (j, b) in ins {
                bufs.put(j, b);
            }
            result
        }
        OpKind::KernelSum { out, input, dim } => {
            let mut i = bufs.take(*input)?;
            let result = bufs.get_mut(*out).and_then(|o| {
                supported(ctx, o)?;
                ctx.kernel_sum(o, &mut i, *dim).map_err(err)
            });
            bufs.put(*input, i);
            result
        }
        OpKind::FillHeap { heap, leave } => ctx.fill_heap(*heap, *leave).map(|_| ()).map_err(err),
        OpKind::Measure(m) => {
            let result = measure(ctx, bufs, m)?;
            let verdict = judge(ctx, m, &result);
            measured.push(result);
            verdict
        }
        OpKind::HostAdd { out, inputs, value } => host_add(bufs, *out, inputs, value.as_ref()),
        OpKind::ReleaseUnused => {
            ctx.release_unused();
            Ok(())
        }
        OpKind::DeviceRelease => {
            ctx.device_release();
            Ok(())
        }
        OpKind::Profiling(on) => {
            ctx.set_profiling(*on);
            Ok(())
        }
        OpKind::ExpectError { error, op: inner } => match step(ctx, bufs, inner, measured) {
            Ok(()) => Err(StepError::Check(format!(
                "expect_error: the step succeeded; expected error {error}"
            ))),
            Err(StepError::Runtime(e)) if e.name() == error => Ok(()),
            Err(e) => Err(StepError::Check(format!(
                "expect_error: expected {error}, got: {e}"
            ))),
        },
        OpKind::ExpectMemory {
            role,
            memory_type,
            flags,
            fallbacks,
        } => {
            let placements = ctx.stats().placements();
            let p = placements
                .iter()
                .rev()
                .find(|p| p.role == *role)
                .ok_or_else(|| format!("expect_memory: no {role} allocation was made"))?;
            let table = ctx.memory_table();
            if let Some(t) = memory_type {
                if p.memory_type != *t {
                    return Err(StepError::Check(format!(
                        "expect_memory: {role} landed in {}, expected {} (policy {})",
                        table.describe_type(p.memory_type),
                        table.describe_type(*t),
                        ctx.policy()
                    )));
                }
            }
            if let Some(f) = fallbacks {
                if p.fallbacks != *f {
                    return Err(StepError::Check(format!(
                        "expect_memory: {role} landed in {} after {} fallback(s), expected {f}",
                        table.describe_type(p.memory_type),
                        p.fallbacks
                    )));
                }
            }
            if let Some(want) = flags {
                let want_flags = want
                    .iter()
                    .filter_map(|f| parse_property_flag(f))
                    .fold(vkcopy::ash::vk::MemoryPropertyFlags::empty(), |a, f| a | f);
                let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
                if want_flags != p.flags {
                    return Err(StepError::Check(format!(
                        "expect_memory: {role} landed in {}, expected flags {}",
                        table.describe_type(p.memory_type),
                        want.into_iter().collect::<Vec<_>>().join("|")
                    )));
                }
            }
            Ok(())
        }
    }
}

/// Runs a `measure` step's copy `repeat` times; the fastest run counts.
fn measure(ctx: &Context, bufs: &mut Slots, m: &Measure) -> Result<Measurement, StepError> {
    let err = StepError::Runtime;
    let mut best = f64::INFINITY;
    let (what, bytes, role) = match &m.op {
        MeasureOp::CopyToHost(b) => {
            let b = bufs.get(*b)?;
            (
                format!("copy_to_host {}", b.name()),
                b.len() * b.elem().bytes() as u64,
                Some(Role::Readback),
            )
        }
        MeasureOp::CopyToDevice(b) => {
            let b = bufs.get(*b)?;
            (
                format!("copy_to_device {}", b.name()),
                b.len() * b.elem().bytes() as u64,
                Some(Role::Upload),
            )
        }
        MeasureOp::DeviceToDevice { from, to } => {
            let (f, t) = (bufs.get(*from)?, bufs.get(*to)?);
            (
                format!("device_to_device {} -> {}", f.name(), t.name()),
                f.len() * f.elem().bytes() as u64,
                None,
            )
        }
    };
    for _ in 0..m.repeat {
        let start;
        match &m.op {
            MeasureOp::CopyToHost(b) => {
                let b = bufs.get_mut(*b)?;
                b.host_dirty = false;
                b.device_dirty = true;
                start = Instant::now();
                ctx.copy_to_host(b).map_err(err)?;
            }
            MeasureOp::CopyToDevice(b) => {
                let b = bufs.get_mut(*b)?;
                b.device_dirty = false;
                b.host_dirty = true;
                start = Instant::now();
                ctx.copy_to_device(b).map_err(err)?;
            }
            MeasureOp::DeviceToDevice { from, to } => {
                let (src, dst) = bufs.pair(*from, *to)?;
                if src.host_dirty || src.device_view().is_none() {
                    return Err(StepError::Check(format!(
                        "measure: {} has no up-to-date device data; copy it to the device first",
                        src.name()
                    )));
                }
                start = Instant::now();
                ctx.buffer_copy(src, dst, true).map_err(err)?;
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
        repeat: m.repeat,
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
fn judge(ctx: &Context, m: &Measure, r: &Measurement) -> Result<(), StepError> {
    let t = ctx.info().device_type;
    for (req, min) in &m.min_gbps {
        if req.accepts(t) && r.gbps < *min {
            return Err(StepError::Check(format!(
                "measure {}: {:.3} GB/s, below the {min} GB/s expected of a {} device",
                r.what,
                r.gbps,
                req.name()
            )));
        }
    }
    for (req, max) in &m.max_us {
        let us = r.best_seconds * 1e6;
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

/// `out(c) = sum of inputs(c) + value(c)` on the host. Values are read first and
/// written after, so an input may share memory with `out`.
fn host_add(
    bufs: &mut Slots,
    out: usize,
    inputs: &[usize],
    value: Option<&crate::expr::Expr>,
) -> Result<(), StepError> {
    let value = value.map(|v| v.compile());
    let mut sums = Vec::new();
    {
        let o = bufs.get(out)?;
        let mut readers = Vec::new();
        for &i in inputs {
            let b = bufs.get(i)?;
            if b.device_dirty {
                return Err(StepError::Check(format!(
                    "host_add: input {} is device-dirty: its host memory is stale (copy_to_host first)",
                    b.name()
                )));
            }
            let h = b.host_view().ok_or_else(|| {
                StepError::Runtime(vkcopy::Error::HostIsNull(b.name().to_owned()))
            })?;
            readers.push((
                b,
                h.memory.read().unwrap_or_else(|p| p.into_inner()),
                h.offset,
            ));
        }
        let mut outside = None;
        o.for_each_element(|c, _| {
            let mut v = value.as_ref().map_or(0, |f| f.eval(c));
            for (b, mem, base) in &readers {
                match b.offset_of(c) {
                    Some(off) => {
                        let at = base + off as usize * b.elem().bytes();
                        v = v.wrapping_add(match b.elem().load(&mem[at..]) {
                            vkcopy::Value::Int(i) => i,
                            vkcopy::Value::Float(f) => f as i64,
                        });
                    }
                    None => {
                        if outside.is_none() {
                            outside = Some(format!("{c:?} is outside input {}", b.name()));
                        }
                    }
                }
            }
            sums.push(v);
        });
        if let Some(m) = outside {
            return Err(StepError::Check(format!("host_add: {m}")));
        }
    }
    let o = bufs.get_mut(out)?;
    let mut next = sums.into_iter();
    o.fill(|_| next.next().unwrap_or(0))
        .map_err(StepError::Runtime)
}
