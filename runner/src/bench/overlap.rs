//! Concurrency: a readback and an upload at the same time (both directions of
//! the bus), and a readback while a kernel runs, each against the same work done
//! alone, measured in one run on one context. Best of N, host clock.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::bench::host::{self, HostMemory};
use crate::bench::sizes;
use vkcopy_engine::rt::{Buffer, Context, ElemType, Expr, Kernels};

/// What one concurrency measurement found.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OverlapResult {
    /// `duplex` (readback and upload together) or `copy_and_kernel`.
    pub what: String,
    /// Bytes of each copy.
    pub bytes: u64,
    /// Best seconds of each part alone: readback then upload, or readback then kernel.
    pub alone_seconds: [f64; 2],
    /// Best seconds of both at once.
    pub together_seconds: f64,
    /// Duplex: throughput together over the faster direction alone. Copy and
    /// kernel: time together over the longer part alone.
    pub ratio: f64,
}

fn best(runs: u32, mut f: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    f()?;
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed());
    }
    Ok(best.as_secs_f64())
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A host buffer of `bytes` whose device side is the valid one.
fn device_dirty(ctx: &Context, name: &str, bytes: u64) -> Result<Buffer, String> {
    let mut b = HostMemory::Aligned.buffer(name, bytes)?;
    ctx.copy_to_device(&mut b).map_err(err)?;
    b.set_host_dirty(false);
    b.set_device_dirty(true);
    Ok(b)
}

/// Measures both experiments with copies of `bytes`.
pub fn run(ctx: &Context, bytes: u64, runs: u32) -> Result<Vec<OverlapResult>, String> {
    let mut down = device_dirty(ctx, "down", bytes)?;
    let mut up = HostMemory::Aligned.buffer("up", bytes)?;
    ctx.copy_to_device(&mut up).map_err(err)?;
    let readback = |b: &mut Buffer| -> Result<(), String> {
        b.set_device_dirty(true);
        ctx.copy_to_host(b).map_err(err)
    };
    let t_down = best(runs, || readback(&mut down))?;
    let t_up = best(runs, || {
        up.set_host_dirty(true);
        ctx.copy_to_device(&mut up).map_err(err)
    })?;
    let t_both = best(runs, || {
        down.set_device_dirty(true);
        up.set_host_dirty(true);
        let r = ctx.start_copy_to_host(&mut down).map_err(err)?;
        let u = ctx.start_copy_to_device(&mut up).map_err(err)?;
        r.wait().map_err(err)?;
        u.wait().map_err(err).map(|_| ())
    })?;
    let one = (bytes as f64 / t_down).max(bytes as f64 / t_up);
    let duplex = OverlapResult {
        what: "duplex".into(),
        bytes,
        alone_seconds: [t_down, t_up],
        together_seconds: t_both,
        ratio: (2.0 * bytes as f64 / t_both) / one,
    };

    // A kernel about as long as the readback: a fill of a device buffer sized by
    // one timed fill.
    let fill = Expr::parse("x * 3 + 1").map_err(err)?;
    let mut probe = host::device_buffer(ctx, "probe", 64 << 20)?;
    let t_probe = best(2, || ctx.kernel_fill(&mut probe, &fill).map_err(err))?;
    drop(probe);
    let target = |elems: f64| -> Result<Buffer, String> {
        let elems = elems.clamp(1024.0, (1u64 << 28) as f64) as i64;
        let dims = vkcopy_engine::rt::dense_dims(&[elems]);
        let mut b = Buffer::with_dims("target", ElemType::I32, dims, false).map_err(err)?;
        ctx.device_malloc(&mut b).map_err(err)?;
        Ok(b)
    };
    let elems = (t_down / t_probe) * (16 << 20) as f64;
    let mut first_target = target(elems)?;
    let first = best(1, || ctx.kernel_fill(&mut first_target, &fill).map_err(err))?;
    drop(first_target);
    // Once more, sized by the first measurement of this kernel.
    let mut target = target((elems.clamp(1024.0, (1u64 << 28) as f64)) * t_down / first)?;
    let t_kernel = best(runs, || ctx.kernel_fill(&mut target, &fill).map_err(err))?;
    let t_overlap = best(runs, || {
        down.set_device_dirty(true);
        let r = ctx.start_copy_to_host(&mut down).map_err(err)?;
        ctx.kernel_fill(&mut target, &fill).map_err(err)?;
        r.wait().map_err(err).map(|_| ())
    })?;
    let overlap = OverlapResult {
        what: "copy_and_kernel".into(),
        bytes,
        alone_seconds: [t_down, t_kernel],
        together_seconds: t_overlap,
        ratio: t_overlap / t_down.max(t_kernel),
    };
    Ok(vec![duplex, overlap])
}

/// The results as lines of a table.
pub fn rows(results: &[OverlapResult]) -> Vec<String> {
    let mut out = vec![format!(
        "{:<16}{:>9}{:>12}{:>12}{:>14}{:>8}",
        "what", "size", "alone 1 ms", "alone 2 ms", "together ms", "ratio"
    )];
    for r in results {
        out.push(format!(
            "{:<16}{:>9}{:>12.3}{:>12.3}{:>14.3}{:>8.2}",
            r.what,
            sizes::format(r.bytes),
            r.alone_seconds[0] * 1e3,
            r.alone_seconds[1] * 1e3,
            r.together_seconds * 1e3,
            r.ratio
        ));
    }
    out
}
