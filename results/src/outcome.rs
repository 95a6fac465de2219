//! What running a case gives: the case's own [`Status`], its [`Verdict`]
//! against the expectations, message, placements and timed copies.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use vkcopy::Placement;

/// What the case itself did, whatever the expectations say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every step and check passed, and nothing leaked.
    Pass,
    /// A check failed, a step returned an error, or the case does not load.
    Fail,
    /// The device cannot run the case (its type, a missing feature).
    Skip,
    /// The worker running the case died: a panic, abort or signal (driver bugs).
    Crash,
    /// The case ran past its time limit and was killed, or a wait for the device
    /// timed out.
    Timeout,
    /// `VK_ERROR_DEVICE_LOST`: the device stopped answering.
    DeviceLost,
    /// Device or host memory ran out (`device_malloc_failed`, `VK_ERROR_OUT_OF_*_MEMORY`).
    ResourceError,
}

impl Status {
    /// Every status, in report order.
    pub const ALL: [Status; 7] = [
        Status::Pass,
        Status::Fail,
        Status::Skip,
        Status::Crash,
        Status::Timeout,
        Status::DeviceLost,
        Status::ResourceError,
    ];

    /// Whether the case did not pass (a skip is not a failure).
    pub fn is_failure(self) -> bool {
        !matches!(self, Status::Pass | Status::Skip)
    }

    /// The name as reports write it: `device_lost`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Skip => "skip",
            Status::Crash => "crash",
            Status::Timeout => "timeout",
            Status::DeviceLost => "device_lost",
            Status::ResourceError => "resource_error",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The status judged against the expectations (known failures and known flakes)
/// and the re-runs; this, not the status, decides whether the run fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A passing status.
    Pass,
    /// A failing status not listed as expected.
    Fail,
    /// A skip: the device cannot run the case.
    Skip,
    /// A failing status listed in the expectations file (CTS "xfail").
    ExpectedFail,
    /// Passed, but listed as a known failure: the list is out of date, which fails the
    /// run until it is updated (deqp-runner's "UnexpectedImprovement").
    UnexpectedPass,
    /// Failed, then passed on a re-run (`--retries`), or failed while listed as a
    /// known flake. Reported; fails the run only under `--strict`.
    Flake,
}

impl Verdict {
    /// Every verdict, in report order.
    pub const ALL: [Verdict; 6] = [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::Skip,
        Verdict::ExpectedFail,
        Verdict::UnexpectedPass,
        Verdict::Flake,
    ];

    /// Whether this verdict fails the run; flakes only when `strict`.
    pub fn fails_run(self, strict: bool) -> bool {
        match self {
            Verdict::Fail | Verdict::UnexpectedPass => true,
            Verdict::Flake => strict,
            Verdict::Pass | Verdict::Skip | Verdict::ExpectedFail => false,
        }
    }

    /// The name as reports write it: `expected_fail`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Skip => "skip",
            Verdict::ExpectedFail => "expected_fail",
            Verdict::UnexpectedPass => "unexpected_pass",
            Verdict::Flake => "flake",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What running a case once gave (one attempt).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outcome {
    /// What the case did.
    pub status: Status,
    /// Why it failed or was skipped; empty on a pass.
    pub message: String,
    /// How long the attempt took.
    pub seconds: f64,
    /// Where the case's allocations landed.
    #[serde(default)]
    pub placements: Vec<PlacementRecord>,
    /// Timed copies.
    #[serde(default)]
    pub measurements: Vec<Measurement>,
    /// What a crashed or killed worker printed while running the case (stdout and
    /// stderr, the last lines); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
}

/// One `measure` step's result. Seconds by the host clock around the whole copy
/// unless named `gpu_`; GB/s are 1e9 bytes/s.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Measurement {
    /// `copy_to_host g`, `copy_to_device g`, `device_to_device a -> b`.
    pub what: String,
    /// The step's `name:`, by which a later `min_ratio` refers to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Bytes per copy.
    pub bytes: u64,
    /// Timed runs.
    pub repeat: u32,
    /// Fastest run.
    pub best_seconds: f64,
    /// Median run.
    pub median_seconds: f64,
    /// bytes / best_seconds / 1e9.
    pub gbps: f64,
    /// bytes / median_seconds / 1e9.
    pub median_gbps: f64,
    /// From GPU timestamps around the copy commands, in separate runs; None where
    /// the queue has no timestamps.
    pub gpu_best_seconds: Option<f64>,
    /// The median by GPU timestamps.
    pub gpu_median_seconds: Option<f64>,
    /// Memory types of the staging used, if any (`readback` / `upload` roles).
    pub staging_type: Option<u32>,
    /// The `min_ratio` check, with the reference's figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<Ratio>,
    /// Why the step's speed thresholds were not held, if they were not (under
    /// the validation layer, whose cost per call is part of every time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_held: Option<String>,
}

/// A measurement against a reference measured in the same run.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ratio {
    /// `host_memcpy`, or the name of another measure of the case.
    pub of: String,
    /// The reference's best and median GB/s.
    pub reference_gbps: f64,
    /// The reference's median GB/s.
    pub reference_median_gbps: f64,
    /// Best GB/s over the reference's best GB/s.
    pub ratio: f64,
    /// The lowest ratio the case accepts.
    pub min: f64,
}

impl Measurement {
    /// One line for the console: `copy_to_host g, 67108864 bytes: best 5.1 GB/s ...`.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{}, {} bytes: best {:.3} GB/s ({:.1} us), median {:.3} GB/s",
            self.what,
            self.bytes,
            self.gbps,
            self.best_seconds * 1e6,
            self.median_gbps
        );
        if let Some(g) = self.gpu_best_seconds {
            line += &format!(", GPU best {:.1} us", g * 1e6);
        }
        if let Some(r) = &self.ratio {
            line += &format!(
                "; {:.3}x {} ({:.3} GB/s, min {})",
                r.ratio, r.of, r.reference_gbps, r.min
            );
        }
        if let Some(why) = &self.not_held {
            line += &format!("; not held: {why}");
        }
        line
    }

    /// `copy g | bytes | best GB/s | median GB/s | best us | GPU best us | ratio`,
    /// the cells of a Markdown table row.
    pub fn table_row(&self) -> String {
        let gpu = self
            .gpu_best_seconds
            .map_or("-".to_owned(), |g| format!("{:.1}", g * 1e6));
        let ratio = self.ratio.as_ref().map_or("-".to_owned(), |r| {
            format!(
                "{:.3}x {} ({:.3} GB/s; min {})",
                r.ratio, r.of, r.reference_gbps, r.min
            )
        });
        format!(
            "{} | {} | {:.3} | {:.3} | {:.1} | {gpu} | {ratio}",
            self.what,
            self.bytes,
            self.gbps,
            self.median_gbps,
            self.best_seconds * 1e6
        )
    }
}

/// A placement as it goes into reports.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlacementRecord {
    /// What the memory is for: `device`, `upload`, `readback` ...
    pub role: String,
    /// The memory type it landed in.
    pub memory_type: u32,
    /// That type's property flags, `DEVICE_LOCAL|HOST_VISIBLE|...`.
    pub flags: String,
    /// The heap of that type.
    pub heap: u32,
    /// The allocation's size.
    pub bytes: u64,
    /// Memory types tried before this one, which refused the allocation.
    pub fallbacks: u32,
    /// The caller's host memory imported for the copy (`VK_EXT_external_memory_host`)
    /// rather than a staging buffer. Absent in reports before this field.
    #[serde(default)]
    pub imported: bool,
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
            imported: p.imported,
        }
    }
}

impl Outcome {
    /// A failure before the case could run (it does not load, or there is no device).
    pub fn failed(message: String) -> Self {
        Outcome::new(Status::Fail, message, Duration::ZERO)
    }

    /// An attempt with `status` and `message` that took `took`, with no placements or timed copies.
    pub fn new(status: Status, message: String, took: Duration) -> Self {
        Outcome {
            status,
            message,
            seconds: took.as_secs_f64(),
            placements: Vec::new(),
            measurements: Vec::new(),
            output: String::new(),
        }
    }
}
