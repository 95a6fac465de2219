//! Runs a plan: selection checks on recorded tables, or runtime steps on a
//! fresh `vkcopy` context. Every runtime case ends with a leak check and a
//! check that the validation layer said nothing.

use std::time::Instant;

use crate::outcome::{Outcome, PlacementRecord, Status};
use crate::plan::{BufferDecl, CasePlan, PlanKind, RuntimePlan};
use crate::rt::{span_bytes, Buffer, Context, ContextOptions, Error, HostBytes, MappedUpload};
use crate::selection;
use crate::steps::state::{State, StepError};
use crate::steps::{self, Op, OpKind};

/// Runs `plan`; `options` says which device and policy. A case that needs a device
/// gets a context of its own.
pub fn run(plan: &CasePlan, options: &ContextOptions) -> Outcome {
    let start = Instant::now();
    let r = match &plan.kind {
        PlanKind::Selection(s) => {
            return match selection::check(s) {
                Ok(()) => Outcome::new(Status::Pass, String::new(), start.elapsed()),
                Err(m) => Outcome::new(Status::Fail, m, start.elapsed()),
            }
        }
        PlanKind::Runtime(r) => r,
    };
    match crate::halide::selected() {
        Ok(None) => {}
        Ok(Some(path)) => return crate::halide::run(plan, r, &path, options.validation),
        Err(m) => return Outcome::new(Status::Fail, m, start.elapsed()),
    }
    let mut options = options.clone();
    if r.simulate_memory.is_some() {
        options.simulate_memory = r.simulate_memory.clone();
    }
    if let Some(p) = r.policy {
        options.policy = p;
    }
    if let Some(m) = r.mapped_upload {
        options.mapped_upload = m;
    }
    if let Some(q) = r.small_copy_queue {
        options.small_copy_queue = q;
    }
    let ctx = match Context::new(options) {
        Ok(c) => c,
        Err(e) => {
            let m = format!("cannot create a Vulkan context: {e}");
            return Outcome::new(status_of(&e), m, start.elapsed());
        }
    };
    if let Some(why) = plan.unmet(ctx.info().device_type) {
        return Outcome::new(Status::Skip, why, start.elapsed());
    }
    if r.mapped_upload.is_some_and(|m| m != MappedUpload::Never)
        && ctx.mapped_upload() == MappedUpload::Never
    {
        let why = "needs uploads written by the CPU (`mapped_upload:`): this device has no \
                   host-visible, host-coherent device memory off a small BAR heap";
        return Outcome::new(Status::Skip, why.into(), start.elapsed());
    }
    let mut state = State::new(&ctx, r.slots.clone());
    let result = run_steps(&mut state, r);
    let measured = std::mem::take(&mut state.measured);
    let unwaited = state.in_flight();
    drop(state);
    let mut problems = Vec::new();
    if result.is_ok() && !unwaited.is_empty() {
        problems.push(format!(
            "async copies never waited for (add `wait:` steps): {}",
            unwaited.join(", ")
        ));
    }
    let (mut skip, mut failed) = (None, Status::Fail);
    match result {
        Ok(()) => {}
        Err((Status::Skip, m)) => skip = Some(m),
        Err((s, m)) => {
            failed = s;
            problems.push(m)
        }
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
    let mut out = match (skip, problems.is_empty()) {
        (Some(why), true) => Outcome::new(Status::Skip, why, start.elapsed()),
        (None, true) => Outcome::new(Status::Pass, String::new(), start.elapsed()),
        (_, false) => Outcome::new(failed, problems.join("\n"), start.elapsed()),
    };
    out.placements = ctx
        .stats()
        .placements()
        .iter()
        .map(PlacementRecord::from)
        .collect();
    out.measurements = measured;
    out
}

/// A declared buffer: host memory of zeros, vkcopy's own or (with `host_offset`)
/// a vector placed that many bytes past a page boundary, as a caller's would be.
pub(crate) fn new_buffer(d: &BufferDecl) -> Result<Buffer, Error> {
    let Some(offset) = d.host_offset else {
        return Buffer::with_dims(&d.name, d.elem, d.dims.clone(), d.host);
    };
    const PAGE: usize = 4096;
    let bytes = span_bytes(d.elem, &d.dims).unwrap_or(0) as usize;
    let v = vec![0u8; bytes + 2 * PAGE];
    let addr = v.as_ptr() as usize;
    let start = addr.next_multiple_of(PAGE) + offset as usize - addr;
    let host = HostBytes::from_vec_range(v, start..start + bytes)
        .ok_or_else(|| Error::BadDimensions(format!("{}: host memory", d.name)))?;
    let mut b = Buffer::from_host(&d.name, d.elem, d.dims.clone(), host)?;
    // Zeros, like any new buffer: nothing to upload yet.
    b.set_host_dirty(false);
    Ok(b)
}

/// Runs the steps; on the first that fails, says whether the case failed or is
/// skipped (the device lacks a feature), and why.
fn run_steps(state: &mut State, plan: &RuntimePlan) -> Result<(), (Status, String)> {
    for (i, d) in plan.buffers.iter().enumerate() {
        let b = new_buffer(d).map_err(|e| (status_of(&e), format!("buffer {}: {e}", d.name)))?;
        state.put(i, b);
    }
    for op in &plan.ops {
        if let OpKind::Threads { count, ops } = &op.kind {
            run_threads(state.ctx, plan, *count, ops)
                .map_err(|(status, m)| (status, format!("{}: {m}", op.located())))?;
            continue;
        }
        run_op(op, state)?;
    }
    Ok(())
}

/// One step, or the steps of a `repeat` without a variable, run in turn; a
/// failure there names its run.
fn run_op(op: &Op, state: &mut State) -> Result<(), (Status, String)> {
    let OpKind::Repeat { times, ops } = &op.kind else {
        return run_one(op, state);
    };
    for run in 0..*times {
        for inner in ops {
            run_op(inner, state).map_err(|(status, m)| {
                (
                    status,
                    format!(
                        "{m} (run {} of {times} of the repeat at line {})",
                        run + 1,
                        op.line
                    ),
                )
            })?;
        }
    }
    Ok(())
}

/// One step; a failure as the case's status and a located message.
fn run_one(op: &Op, state: &mut State) -> Result<(), (Status, String)> {
    steps::run(op, state).map_err(|e| {
        let status = match &e {
            StepError::Unsupported(_) => Status::Skip,
            StepError::Runtime(e) => status_of(e),
            StepError::Check(_) => Status::Fail,
        };
        (status, format!("{}: {e}", op.located()))
    })
}

/// `ops` on `count` threads at once on `ctx`, each with fresh buffers of the
/// case's declarations; the first failure, naming its thread.
fn run_threads(
    ctx: &Context,
    plan: &RuntimePlan,
    count: usize,
    ops: &[Vec<Op>],
) -> Result<(), (Status, String)> {
    // The threads start their steps together, once each has its buffers.
    let start = std::sync::Barrier::new(count);
    let thread = |t: usize| -> Result<(), (Status, String)> {
        let ops = &ops[t.min(ops.len() - 1)];
        let mut state = State::new(ctx, plan.slots.clone());
        let mut made = Ok(());
        for (i, d) in plan.buffers.iter().enumerate() {
            match new_buffer(d) {
                Ok(b) => state.put(i, b),
                Err(e) => {
                    made = Err((status_of(&e), format!("buffer {}: {e}", d.name)));
                    break;
                }
            }
        }
        start.wait();
        made?;
        for op in ops {
            run_op(op, &mut state)?;
        }
        let unwaited = state.in_flight();
        if !unwaited.is_empty() {
            return Err((
                Status::Fail,
                format!(
                    "async copies never waited for (add `wait:` steps): {}",
                    unwaited.join(", ")
                ),
            ));
        }
        Ok(())
    };
    let thread = &thread;
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..count).map(|t| s.spawn(move || thread(t))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err((Status::Crash, "panicked".into())))
            })
            .collect()
    });
    match results
        .into_iter()
        .enumerate()
        .find_map(|(t, r)| r.err().map(|e| (t, e)))
    {
        Some((t, (status, m))) => Err((status, format!("thread {t} of {count}: {m}"))),
        None => Ok(()),
    }
}

/// The status of a case that stopped on a runtime error: the device was lost,
/// memory ran out, a wait timed out, or (any other error) it failed.
pub fn status_of(e: &Error) -> Status {
    use crate::rt::VkResult;
    match e {
        Error::DeviceLost(_) => Status::DeviceLost,
        Error::Vulkan {
            result: VkResult::ERROR_DEVICE_LOST,
            ..
        } => Status::DeviceLost,
        Error::DeviceMallocFailed(_)
        | Error::Vulkan {
            result: VkResult::ERROR_OUT_OF_DEVICE_MEMORY | VkResult::ERROR_OUT_OF_HOST_MEMORY,
            ..
        } => Status::ResourceError,
        Error::Timeout { .. } => Status::Timeout,
        _ => Status::Fail,
    }
}
