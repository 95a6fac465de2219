//! Runs a plan: selection checks on recorded tables, or runtime steps on the
//! runtime under test ([`Target`]): a fresh vkcopy context, or the runtime's
//! own opener (a library of Halide's ABI).
//! The steps, the device-type check, the leak check and the validation check
//! are written here once for every runtime ([`Runtime`]).

use std::time::Instant;

use crate::plan::{BufferDecl, CasePlan, PlanKind, RuntimePlan};
use crate::rt::{span_bytes, Buffer, Context, ContextOptions, Error, HostBytes, MappedCopy};
use crate::runtime::{lacks, Capability, Fork, Runtime, Target};
use crate::runtime::{State, StepError};
use crate::selection;
use crate::steps::{self, Op, OpKind};
use vkcopy_results::outcome::{Outcome, Status};

/// What a case needs beyond every runtime's primitives: the first such
/// capability of its fields and steps, with where it is written.
pub fn needs(plan: &CasePlan) -> Option<(Capability, String)> {
    let r = match &plan.kind {
        PlanKind::Selection(_) => return Some((Capability::SelectionPolicies, String::new())),
        PlanKind::Runtime(r) => r,
    };
    if r.policy.is_some() {
        return Some((Capability::Policies, String::new()));
    }
    if [r.mapped_upload, r.mapped_readback]
        .iter()
        .any(|m| m.is_some_and(|m| m != MappedCopy::Never))
    {
        return Some((Capability::MappedCopies, String::new()));
    }
    if r.small_copy_queue == Some(crate::rt::SmallCopyQueue::Other) {
        return Some((Capability::SecondQueue, String::new()));
    }
    r.ops.iter().find_map(|op| {
        steps::needs(op).map(|c| (c, format!(" (step {}, line {})", op.step, op.line)))
    })
}

/// Why `plan` cannot run on `runtime`, if it cannot.
pub fn unsupported(plan: &CasePlan, runtime: &Target) -> Option<String> {
    let (need, at) = needs(plan)?;
    (!runtime.capabilities().contains(&need)).then(|| {
        if need == Capability::SelectionPolicies {
            // No runtime to ask: the case checks vkcopy's own policy function.
            format!(
                "needs {}: it checks vkcopy's policy function on a recorded table, with no runtime under test",
                need.about()
            )
        } else {
            format!("needs {}{at}: {}", need.about(), runtime.lacking())
        }
    })
}

/// The run's options with the case's own fields over them.
fn case_options(options: &ContextOptions, r: &RuntimePlan) -> ContextOptions {
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
    if let Some(m) = r.mapped_readback {
        options.mapped_readback = m;
    }
    if let Some(q) = r.small_copy_queue {
        options.small_copy_queue = q;
    }
    options
}

/// Runs `plan` on `runtime`; `options` says which device, policy and table.
/// A case that needs a device gets a context of its own.
pub fn run(plan: &CasePlan, options: &ContextOptions, runtime: &Target) -> Outcome {
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
    if let Some(why) = unsupported(plan, runtime) {
        return Outcome::new(Status::Skip, why, start.elapsed());
    }
    let options = case_options(options, r);
    match runtime.opener() {
        None => run_vkcopy(plan, r, options, start),
        Some(open) => match open(&options, r.slots.clone()) {
            Ok(mut rt) => run_on(plan, r, &mut *rt, start),
            Err(e) => Outcome::new(Status::Fail, e.to_string(), start.elapsed()),
        },
    }
}

fn run_vkcopy(
    plan: &CasePlan,
    r: &RuntimePlan,
    options: ContextOptions,
    start: Instant,
) -> Outcome {
    let ctx = match Context::new(options) {
        Ok(c) => c,
        Err(e) => {
            let m = format!("cannot create a Vulkan context: {e}");
            return Outcome::new(status_of(&e), m, start.elapsed());
        }
    };
    let wants = |m: Option<MappedCopy>| m.is_some_and(|m| m != MappedCopy::Never);
    if (wants(r.mapped_upload) && ctx.mapped_upload() == MappedCopy::Never)
        || (wants(r.mapped_readback) && ctx.mapped_readback() == MappedCopy::Never)
    {
        let why = "needs copies made by the CPU (`mapped_upload:`, `mapped_readback:`): this \
                   device has no host-visible, host-coherent device memory off a small BAR heap";
        return Outcome::new(Status::Skip, why.into(), start.elapsed());
    }
    let mut state = State::new(&ctx, r.slots.clone());
    run_on(plan, r, &mut state, start)
}

/// Runs the steps of `r` on `rt`, then empties it: the case's outcome, with
/// what was left alive and what the validation layer said as failures.
pub fn run_on<'a>(
    plan: &CasePlan,
    r: &RuntimePlan,
    rt: &mut dyn Runtime<'a>,
    start: Instant,
) -> Outcome {
    let result = run_steps(plan, rt, r);
    let measured = rt
        .timed_copies()
        .map(|t| t.take_measured())
        .unwrap_or_default();
    let unwaited = rt.async_copies().map(|a| a.unwaited()).unwrap_or_default();
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
    let finish = rt.finish();
    if let Some(leaks) = finish.leaks {
        problems.push(format!("leak check: {leaks}"));
    }
    problems.extend(finish.findings);
    if !finish.messages.is_empty() {
        problems.push(format!(
            "{} validation message(s):\n  {}",
            finish.messages.len(),
            finish.messages.join("\n  ")
        ));
    }
    let mut out = match (skip, problems.is_empty()) {
        (Some(why), true) => Outcome::new(Status::Skip, why, start.elapsed()),
        (None, true) => Outcome::new(Status::Pass, String::new(), start.elapsed()),
        (_, false) => Outcome::new(failed, problems.join("\n"), start.elapsed()),
    };
    out.placements = rt.placements();
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
/// skipped (the device lacks a feature, or is not of a type the case runs on), and why.
fn run_steps<'a>(
    plan: &CasePlan,
    rt: &mut dyn Runtime<'a>,
    r: &RuntimePlan,
) -> Result<(), (Status, String)> {
    for (i, d) in r.buffers.iter().enumerate() {
        let b = new_buffer(d).map_err(|e| (status_of(&e), format!("buffer {}: {e}", d.name)))?;
        rt.put(i, b)
            .map_err(|e| (Status::Fail, format!("buffer {}: {e}", d.name)))?;
    }
    // A runtime that opens its device lazily (Halide) says its type after a step.
    let mut device_checked = false;
    for op in &r.ops {
        if !device_checked {
            if let Some(t) = rt.device_type() {
                device_checked = true;
                if let Some(why) = plan.unmet(t) {
                    return Err((Status::Skip, why));
                }
            }
        }
        if let OpKind::Threads { count, ops } = &op.kind {
            let fork = rt.fork().ok_or_else(|| {
                let e = lacks(Capability::Threads);
                (Status::Skip, format!("{}: {e}", op.located()))
            })?;
            run_threads(&fork, r, *count, ops)
                .map_err(|(status, m)| (status, format!("{}: {m}", op.located())))?;
            continue;
        }
        run_op(op, rt)?;
    }
    match (device_checked, rt.device_type()) {
        (false, Some(t)) => plan.unmet(t).map_or(Ok(()), |why| Err((Status::Skip, why))),
        _ => Ok(()),
    }
}

/// One step, or the steps of a `repeat` without a variable, run in turn; a
/// failure there names its run.
fn run_op<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), (Status, String)> {
    if let OpKind::OnRuntime { halide, vkcopy } = &op.kind {
        let ops = if rt.generic_layer() { halide } else { vkcopy };
        return ops.iter().try_for_each(|inner| run_op(inner, rt));
    }
    let OpKind::Repeat { times, ops } = &op.kind else {
        return run_one(op, rt);
    };
    for run in 0..*times {
        for inner in ops {
            run_op(inner, rt).map_err(|(status, m)| {
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
fn run_one<'a>(op: &Op, rt: &mut dyn Runtime<'a>) -> Result<(), (Status, String)> {
    steps::run(op, rt).map_err(|e| {
        let status = match &e {
            StepError::Unsupported(_) => Status::Skip,
            StepError::Runtime(e) => status_of(e),
            StepError::Call { .. } | StepError::Check(_) => Status::Fail,
        };
        (status, format!("{}: {e}", op.located()))
    })
}

/// `ops` on `count` threads at once, each on a runtime of `fork` with fresh buffers of the
/// case's declarations; the first failure, naming its thread.
fn run_threads(
    fork: &Fork<'_>,
    plan: &RuntimePlan,
    count: usize,
    ops: &[Vec<Op>],
) -> Result<(), (Status, String)> {
    // The threads start their steps together, once each has its buffers.
    let start = std::sync::Barrier::new(count);
    let thread = |t: usize| -> Result<(), (Status, String)> {
        let ops = &ops[t.min(ops.len() - 1)];
        let mut state = fork(plan.slots.clone());
        let mut made = Ok(());
        for (i, d) in plan.buffers.iter().enumerate() {
            let put = match new_buffer(d) {
                Ok(b) => state
                    .put(i, b)
                    .map_err(|e| (Status::Fail, format!("buffer {}: {e}", d.name))),
                Err(e) => Err((status_of(&e), format!("buffer {}: {e}", d.name))),
            };
            if put.is_err() {
                made = put;
                break;
            }
        }
        start.wait();
        made?;
        for op in ops {
            run_op(op, &mut *state)?;
        }
        let unwaited = state
            .async_copies()
            .map(|a| a.unwaited())
            .unwrap_or_default();
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
