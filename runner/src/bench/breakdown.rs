//! `bench --breakdown`: where the time of one copy goes, step by step. Each copy
//! is timed on the host around the call, and its submissions report their own
//! steps ([`SubmitSteps`]): the submitter's lock, recording, `vkQueueSubmit`,
//! the wait until the host sees the work done, and the GPU's time between
//! timestamps at the start and end of the recorded work. What is left of the
//! copy's time is outside the submission: planning, staging on the host,
//! bookkeeping.

use serde::Serialize;

use crate::bench::host::{self, HostMemory};
use crate::bench::paths::{self, BenchPath, Pair};
use crate::bench::sizes;
use crate::bench::sweep::WARMUP;
use vkcopy_engine::rt::{Context, SubmitSteps};

/// Sizes of the breakdown unless `--sizes` says otherwise: where the fixed cost
/// shows.
pub const DEFAULT_SIZES: [u64; 4] = [4 << 10, 64 << 10, 1 << 20, 16 << 20];

/// Median microseconds of each step over the timed copies of one path and size.
#[derive(Clone, Debug, Serialize)]
pub struct Breakdown {
    pub path: &'static str,
    pub bytes: u64,
    pub copies: u32,
    /// Submissions per copy.
    pub submissions: f64,
    pub total_us: f64,
    pub lock_us: f64,
    pub record_us: f64,
    pub submit_us: f64,
    pub wait_us: f64,
    /// The GPU's part of the wait; None without timestamps.
    pub gpu_us: Option<f64>,
    /// The copy's time outside its submissions.
    pub outside_us: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Measures `copies` copies of each path and size on `ctx`, after warm-up
/// copies, with profiling and the step trace on; both are off again after.
pub fn run(
    ctx: &Context,
    paths: &[BenchPath],
    sizes: &[u64],
    copies: u32,
) -> Result<Vec<Breakdown>, String> {
    let profiling = ctx.profiling();
    ctx.set_profiling(true);
    let mut out = Vec::new();
    let mut each = || -> Result<(), String> {
        for &path in paths {
            for &bytes in sizes {
                if path == BenchPath::RoundTrip && bytes > paths::ROUND_TRIP_MAX {
                    continue;
                }
                let b = measure(ctx, path, bytes, copies)
                    .map_err(|e| format!("{} {}: {e}", path.name(), sizes::format(bytes)))?;
                out.push(b);
                ctx.release_unused();
            }
        }
        Ok(())
    };
    let result = each();
    ctx.set_step_trace(false);
    ctx.set_profiling(profiling);
    result.map(|()| out)
}

fn measure(ctx: &Context, path: BenchPath, bytes: u64, copies: u32) -> Result<Breakdown, String> {
    let mut bufs = match path.uses_host() {
        true => {
            let mut b = HostMemory::Aligned.buffer("b", bytes)?;
            ctx.copy_to_device(&mut b).map_err(|e| e.to_string())?;
            Pair { a: None, b }
        }
        false => Pair {
            a: Some(host::device_buffer(ctx, "a", bytes)?),
            b: host::device_buffer(ctx, "b", bytes)?,
        },
    };
    for _ in 0..WARMUP {
        paths::copy(ctx, path, &mut bufs).map_err(|e| e.to_string())?;
    }
    ctx.set_step_trace(true);
    let us = |ns: u64| ns as f64 / 1e3;
    let mut rows: Vec<(f64, Vec<SubmitSteps>)> = Vec::new();
    for _ in 0..copies {
        let start = std::time::Instant::now();
        paths::copy(ctx, path, &mut bufs).map_err(|e| e.to_string())?;
        let total = us(start.elapsed().as_nanos() as u64);
        rows.push((total, ctx.take_step_trace()));
    }
    ctx.set_step_trace(false);
    let sum = |f: &dyn Fn(&SubmitSteps) -> u64| -> Vec<f64> {
        rows.iter()
            .map(|(_, s)| us(s.iter().map(f).sum()))
            .collect()
    };
    let gpu = rows
        .iter()
        .all(|(_, s)| s.iter().all(|s| s.gpu_ns.is_some()))
        .then(|| median(sum(&|s| s.gpu_ns.unwrap_or(0))));
    let outside = rows
        .iter()
        .map(|(total, s)| {
            let inside: u64 = s
                .iter()
                .map(|s| s.lock_ns + s.record_ns + s.submit_ns + s.wait_ns)
                .sum();
            total - us(inside)
        })
        .collect();
    let submissions: usize = rows.iter().map(|(_, s)| s.len()).sum();
    Ok(Breakdown {
        path: path.name(),
        bytes,
        copies,
        submissions: submissions as f64 / f64::from(copies.max(1)),
        total_us: median(rows.iter().map(|(t, _)| *t).collect()),
        lock_us: median(sum(&|s| s.lock_ns)),
        record_us: median(sum(&|s| s.record_ns)),
        submit_us: median(sum(&|s| s.submit_ns)),
        wait_us: median(sum(&|s| s.wait_ns)),
        gpu_us: gpu,
        outside_us: median(outside),
    })
}

/// The table's heading.
pub fn heading() -> String {
    format!(
        "{:<17}{:>9}{:>6}{:>10}{:>8}{:>8}{:>8}{:>8}{:>8}{:>9}",
        "path", "size", "subs", "total us", "lock", "record", "submit", "wait", "gpu", "outside"
    )
}

/// One row: medians in microseconds.
pub fn row(b: &Breakdown) -> String {
    let gpu = b.gpu_us.map_or("-".to_owned(), |g| format!("{g:.1}"));
    format!(
        "{:<17}{:>9}{:>6.1}{:>10.1}{:>8.1}{:>8.1}{:>8.1}{:>8.1}{:>8}{:>9.1}",
        b.path,
        sizes::format(b.bytes),
        b.submissions,
        b.total_us,
        b.lock_us,
        b.record_us,
        b.submit_us,
        b.wait_us,
        gpu,
        b.outside_us
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }
}
