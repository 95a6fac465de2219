//! The command line of `vkcopy-suite bench`, and the plan it asks for.

use std::path::PathBuf;

use crate::bench::paths::BenchPath;
use crate::bench::sizes::{self, GIB, KIB, MIB};
use crate::bench::sweep::Plan;
use vkcopy_engine::rt::DeviceType;

/// The sizes of the CUDA reference's default sweep.
pub const DEFAULT_SIZES: [u64; 7] = [4 * KIB, 64 * KIB, MIB, 16 * MIB, 64 * MIB, 256 * MIB, GIB];

/// Where the default sweep stops on a CPU device (lavapipe): its copies are
/// memcpys on the host's cores, and 1 GiB would take most of the run.
pub const CPU_DEFAULT_MAX: u64 = 256 * MIB;

/// Measures every copy path over a sweep of sizes and writes JSON in the shape of
/// bench/cuda_reference.py; with --compare, sets it side by side with CUDA's.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Sizes, comma or space separated: bytes, or KiB, MiB, GiB (default
    /// 4KiB,64KiB,1MiB,16MiB,64MiB,256MiB,1GiB; up to 256MiB on a CPU device).
    #[arg(long, value_delimiter = ',', num_args = 1.., value_parser = sizes::parse)]
    pub sizes: Option<Vec<u64>>,
    /// Leave out sizes above this (bytes, or KiB, MiB, GiB).
    #[arg(long, value_parser = sizes::parse)]
    pub max_bytes: Option<u64>,
    /// Timed runs per size (default 10, and 200 up to 1 MiB; at most 3 from
    /// 256 MiB on).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub repeat: Option<u32>,
    /// Paths, comma separated (default all).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub paths: Option<Vec<BenchPath>>,
    /// The JSON written (default `reports/out/<device>/bench.json`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A CUDA reference JSON (bench/cuda_reference.py): print the side-by-side table
    /// and draw bench_vs_cuda.svg next to vkcopy's JSON.
    #[arg(long)]
    pub compare: Option<PathBuf>,
    /// Compare this vkcopy JSON instead of running the sweep.
    #[arg(long, requires = "compare")]
    pub against: Option<PathBuf>,
    /// Instead of the sweep, measure concurrency with copies of this size: a
    /// readback and an upload at once, and a readback during a kernel, each against
    /// the same work alone; writes overlap.json (or --out).
    #[arg(long, value_parser = sizes::parse, conflicts_with_all = ["compare", "against"])]
    pub overlap: Option<u64>,
    /// Measure Halide's runtime instead of vkcopy (halide:VERSION or
    /// halide:PATH, as `run --runtime`): readback, upload, device to device and
    /// round trip, printed as a table.
    #[arg(long, value_name = "RUNTIME", conflicts_with_all = ["compare", "against", "overlap"])]
    pub runtime: Option<String>,
    /// Instead of the sweep, show where each copy's time goes: the submitter's
    /// lock, recording, vkQueueSubmit, the wait, the GPU's time and what is
    /// outside the submission (medians of --repeat copies; sizes default to
    /// 4KiB,64KiB,1MiB,16MiB); writes breakdown.json (or --out).
    #[arg(long, conflicts_with_all = ["compare", "against", "overlap", "runtime"])]
    pub breakdown: bool,
}

impl Args {
    /// What to measure on a device of type `t`.
    pub fn plan(&self, t: DeviceType) -> Plan {
        let mut notes = Vec::new();
        let max = match (self.max_bytes, &self.sizes, t) {
            (Some(m), _, _) => Some(m),
            (None, None, DeviceType::Cpu) => {
                notes.push(format!(
                    "a CPU device: the default sizes stop at {} (--sizes or --max-bytes for more)",
                    sizes::format(CPU_DEFAULT_MAX)
                ));
                Some(CPU_DEFAULT_MAX)
            }
            _ => None,
        };
        let mut all = self.sizes.clone().unwrap_or(DEFAULT_SIZES.to_vec());
        all.dedup();
        let (sizes, dropped): (Vec<u64>, Vec<u64>) =
            all.into_iter().partition(|&n| max.is_none_or(|m| n <= m));
        if !dropped.is_empty() && self.max_bytes.is_some() {
            let dropped: Vec<String> = dropped.into_iter().map(sizes::format).collect();
            notes.push(format!(
                "above --max-bytes, left out: {}",
                dropped.join(", ")
            ));
        }
        let paths = self.paths.clone().unwrap_or(BenchPath::ALL.to_vec());
        if paths.contains(&BenchPath::RoundTrip)
            && !sizes
                .iter()
                .any(|&n| n <= crate::bench::paths::ROUND_TRIP_MAX)
        {
            notes.push("round_trip skipped: it runs at sizes up to 64 KiB only".into());
        }
        Plan {
            paths,
            sizes,
            repeat: self.repeat,
            notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(line: &[&str]) -> Args {
        Cli::try_parse_from(std::iter::once("bench").chain(line.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn default_sizes_stop_at_256_mib_on_a_cpu_device_only() {
        let a = args(&[]);
        assert_eq!(a.plan(DeviceType::Cpu).sizes.last(), Some(&(256 * MIB)));
        assert_eq!(a.plan(DeviceType::DiscreteGpu).sizes.last(), Some(&GIB));
        let a = args(&["--max-bytes", "1MiB"]);
        assert_eq!(
            a.plan(DeviceType::DiscreteGpu).sizes,
            [4 * KIB, 64 * KIB, MIB]
        );
        let a = args(&["--sizes", "4KiB,1GiB", "--repeat", "2"]);
        let p = a.plan(DeviceType::Cpu);
        assert_eq!((p.sizes, p.repeat), (vec![4 * KIB, GIB], Some(2)));
        let a = args(&["--sizes", "4KiB", "1MiB", "--paths", "readback,round_trip"]);
        let p = a.plan(DeviceType::Cpu);
        assert_eq!(p.sizes, [4 * KIB, MIB]);
        assert_eq!(p.paths, [BenchPath::Readback, BenchPath::RoundTrip]);
    }

    #[test]
    fn bad_arguments_are_refused() {
        for line in [
            &["--sizes", "4KB"][..],
            &["--repeat", "0"],
            &["--paths", "sideways"],
            &["--against", "x.json"],
        ] {
            let all = std::iter::once("bench").chain(line.iter().copied());
            assert!(Cli::try_parse_from(all).is_err(), "{line:?}");
        }
    }
}
