//! The sweep: every path over every size (and, for host paths, every kind of
//! host memory), each measured after warm-up copies, host clock and GPU
//! timestamps in interleaved runs, as the CUDA reference measures.

use std::collections::hash_map::{Entry, HashMap};

use crate::bench::doc::{BenchResult, FloorTime};
use crate::bench::host::{self, HostMemory};
use crate::bench::paths::{self, BenchPath, Pair, ROUND_TRIP_MAX};
use crate::bench::sizes;
use vkcopy_engine::rt::floor::Floor;
use vkcopy_engine::rt::Context;
use vkcopy_engine::timing;

/// Untimed copies before the timed ones: imports, staging, first touches.
pub const WARMUP: u32 = 2;
/// From this size on, at most [`BIG_REPEAT`] timed runs: each is long.
pub const BIG: u64 = 256 << 20;
pub const BIG_REPEAT: u32 = 3;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    pub paths: Vec<BenchPath>,
    pub sizes: Vec<u64>,
    pub repeat: Option<u32>,
    /// What the plan left out and why, for the user.
    pub notes: Vec<String>,
}

/// Timed runs per size unless `--repeat` says.
pub const DEFAULT_REPEAT: u32 = 10;
/// Up to this size a copy gets [`SMALL_REPEAT`] timed runs unless `--repeat`
/// says: a best of 10 there is not yet the best (CUDA's reference counts the
/// same way).
pub const SMALL: u64 = 1 << 20;
pub const SMALL_REPEAT: u32 = 200;

/// Timed runs for a copy of `bytes`: `repeat` as given (the default where
/// `None`, raised to [`SMALL_REPEAT`] for small copies), at most
/// [`BIG_REPEAT`] for big ones.
pub fn repeats_for(bytes: u64, repeat: Option<u32>) -> u32 {
    let n = match repeat {
        Some(n) => n,
        None if bytes <= SMALL => SMALL_REPEAT,
        None => DEFAULT_REPEAT,
    };
    if bytes >= BIG {
        n.min(BIG_REPEAT)
    } else {
        n
    }
}

/// Measures the plan on `ctx`; `each` gets every result as it is made. Each
/// path and size but round trips also gets the driver's floor under it, timed
/// once (whatever the host memory) right after vkcopy's first measurement.
pub fn run(ctx: &Context, plan: &Plan, mut each: impl FnMut(&BenchResult)) -> Result<(), String> {
    let floor = Floor::new(ctx).map_err(|e| format!("the driver's floor: {e}"))?;
    let mut floors: HashMap<(BenchPath, u64), Vec<FloorTime>> = HashMap::new();
    for &path in &plan.paths {
        let sizes: Vec<u64> = match path {
            BenchPath::RoundTrip => plan
                .sizes
                .iter()
                .copied()
                .filter(|&n| n <= ROUND_TRIP_MAX)
                .collect(),
            _ => plan.sizes.clone(),
        };
        let memories: Vec<Option<HostMemory>> = if path.uses_host() {
            HostMemory::ALL.iter().copied().map(Some).collect()
        } else {
            vec![None]
        };
        for memory in memories {
            for &n in &sizes {
                let runs = repeats_for(n, plan.repeat);
                let at = |e: &dyn std::fmt::Display| {
                    format!("{} {}: {e}", path.name(), sizes::format(n))
                };
                let mut r = measure(ctx, path, memory, n, runs).map_err(|e| at(&e))?;
                if let [one] = path.copy_paths() {
                    let floor = match floors.entry((path, n)) {
                        Entry::Occupied(e) => e.into_mut(),
                        Entry::Vacant(e) => {
                            let times = floor.measure(*one, n, runs).map_err(|e| at(&e))?;
                            e.insert(times.iter().map(FloorTime::new).collect())
                        }
                    };
                    r.floor = floor.clone();
                }
                each(&r);
                // Each size starts from empty pools, as the CUDA reference frees its
                // buffers after each size.
                ctx.release_unused();
            }
        }
    }
    Ok(())
}

fn measure(
    ctx: &Context,
    path: BenchPath,
    memory: Option<HostMemory>,
    bytes: u64,
    runs: u32,
) -> Result<BenchResult, String> {
    let mut bufs = match memory {
        Some(m) => {
            let mut b = m.buffer("b", bytes)?;
            ctx.copy_to_device(&mut b).map_err(|e| e.to_string())?;
            Pair { a: None, b }
        }
        None => Pair {
            a: Some(host::device_buffer(ctx, "a", bytes)?),
            b: host::device_buffer(ctx, "b", bytes)?,
        },
    };
    let samples = timing::sample(
        ctx,
        path.copy_paths(),
        (WARMUP, runs),
        || paths::copy(ctx, path, &mut bufs),
        || {},
    )
    .map_err(|e| e.to_string())?;
    let host_memory = memory.map_or(host::DEVICE, HostMemory::name);
    Ok(BenchResult::new(path.name(), host_memory, bytes, &samples))
}

/// The heading of the table printed as the sweep runs.
pub fn heading() -> String {
    format!(
        "{:<17}{:<10}{:>9}{:>4}{:>11}{:>10}{:>11}{:>13}{:>10}{:>8}",
        "path",
        "host",
        "size",
        "n",
        "best GB/s",
        "med GB/s",
        "best us",
        "gpu best us",
        "floor us",
        "/floor"
    )
}

/// One line of that table.
pub fn row(r: &BenchResult) -> String {
    let gpu = r
        .gpu_best_seconds
        .map_or("-".to_owned(), |g| format!("{:.1}", g * 1e6));
    let floor = r
        .best_floor()
        .map_or("-".to_owned(), |f| format!("{:.1}", f.best_seconds * 1e6));
    let over = r.over_floor().map_or("-".to_owned(), |x| format!("{x:.2}"));
    format!(
        "{:<17}{:<10}{:>9}{:>4}{:>11.2}{:>10.2}{:>11.1}{:>13}{:>10}{:>8}",
        r.path,
        r.host_memory,
        sizes::format(r.bytes),
        r.repeat,
        r.best_gbps,
        r.median_gbps,
        r.best_seconds * 1e6,
        gpu,
        floor,
        over
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_sizes_get_fewer_runs() {
        assert_eq!(repeats_for(1 << 30, None), 3);
        assert_eq!(repeats_for(1 << 30, Some(10)), 3);
        assert_eq!(repeats_for(1 << 30, Some(2)), 2);
        assert_eq!(repeats_for(1 << 20, None), SMALL_REPEAT);
        assert_eq!(repeats_for(16 << 20, None), DEFAULT_REPEAT);
        assert_eq!(repeats_for(4096, Some(500)), 500);
        // Told, small copies get what they are told: a quick check stays quick.
        assert_eq!(repeats_for(4096, Some(2)), 2);
    }
}
