//! Timing copies, shared by the `measure` step and `vkcopy-suite bench`: the
//! host clock around a whole copy, GPU time from the timestamps of the context's
//! profile, and a host memcpy of the same bytes as a reference.

mod memcpy;
mod samples;

pub use memcpy::HostMemcpy;
pub use samples::{gbps, Samples};

use std::time::Instant;

use crate::rt::{Context, CopyPath};

/// Seconds `op` takes by the host clock.
pub fn host_seconds<E>(op: impl FnOnce() -> Result<(), E>) -> Result<f64, E> {
    let start = Instant::now();
    op()?;
    Ok(start.elapsed().as_secs_f64())
}

/// GPU seconds of the copies that `op` makes on `paths`, from the timestamps the
/// context's profile takes around them; None where the queue has no timestamps.
/// Profiling is on for this run only, so that host-timed runs carry no queries.
pub fn gpu_seconds<E>(
    ctx: &Context,
    paths: &[CopyPath],
    op: impl FnOnce() -> Result<(), E>,
) -> Result<Option<f64>, E> {
    let total =
        |ctx: &Context| -> f64 { paths.iter().map(|p| ctx.copy_stats(*p).gpu_seconds).sum() };
    let was = ctx.profiling();
    ctx.set_profiling(true);
    let before = total(ctx);
    let r = op();
    let after = total(ctx);
    ctx.set_profiling(was);
    r?;
    let d = after - before;
    Ok((d > 0.0).then_some(d))
}

/// Runs `op` `warmup` times untimed, then `runs` times by the host clock, each
/// followed by a run timed by GPU timestamps and by `between` (a reference timed
/// in the same rhythm), so that all of them see the same state of the machine.
pub fn sample<E>(
    ctx: &Context,
    paths: &[CopyPath],
    (warmup, runs): (u32, u32),
    mut op: impl FnMut() -> Result<(), E>,
    mut between: impl FnMut(),
) -> Result<Samples, E> {
    for _ in 0..warmup {
        op()?;
    }
    let mut s = Samples::default();
    for _ in 0..runs {
        s.host.push(host_seconds(&mut op)?);
        if let Some(g) = gpu_seconds(ctx, paths, &mut op)? {
            s.gpu.push(g);
        }
        between();
    }
    Ok(s)
}
