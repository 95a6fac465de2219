//! Run reports: per run, a new folder `reports/out/<device>/<start time>/`
//! with `journal.jsonl` (the cases as they end), then `results.json` (schema:
//! `reports/results.schema.json`), `results.csv`, `failures.csv`, `junit.xml`,
//! `summary.md` and the throughput chart.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::outcome::{Outcome, Verdict};

pub(crate) mod csv;
pub(crate) mod folder;
pub mod journal;
pub mod junit;
pub(crate) mod markdown;
pub(crate) mod meta;
pub mod read;
pub mod schema;

pub use meta::{driver_version_name, MemoryRecord, ToolRecord};

/// The folders of `reports/expectations/` below `all.yaml`, one per layer
/// (the suite's `layers`), as a report names an expectations file by them.
pub const LAYER_FOLDERS: [&str; 3] = ["driver", "model", "device"];

/// A file or folder name for a device: lower case letters, digits and '-'
/// ("NVIDIA H200" is `nvidia-h200`).
pub fn device_slug(name: &str) -> String {
    let mut slug: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while slug.contains("--") {
        slug = slug.replace("--", "-");
    }
    let slug = slug.trim_matches('-').to_owned();
    if slug.is_empty() {
        "no-device".into()
    } else {
        slug
    }
}

/// The device a run used, as far as it is known.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct DeviceRecord {
    /// The device's name (`NVIDIA H200`).
    pub name: String,
    /// Its type: `discrete_gpu`, `cpu` ...
    pub device_type: String,
    /// Driver name and info (`NVIDIA 580.159.04`, `llvmpipe Mesa 22.3.6 (LLVM 15.0.6)`).
    pub driver: String,
    /// `driverVersion`, decoded as its vendor encodes it (`580.159.4`).
    pub driver_version: String,
    /// The Vulkan version the device supports.
    pub api_version: String,
    /// `vendorID` and `deviceID`.
    pub vendor_id: u32,
    /// The device's `deviceID`.
    pub device_id: u32,
    /// The optional features and extensions the runtime enabled because the
    /// device has them (`VK_EXT_external_memory_host`, `shaderInt64` ...).
    pub extensions: Vec<String>,
}

/// One case's result: its own status (in `outcome`, flattened: `status`,
/// `message`, ...) and the verdict against the expectations.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CaseRecord {
    /// The case's name, `basic::round_trip_2d`.
    pub name: String,
    /// The case file.
    pub path: String,
    /// The status judged against the expectations and the re-runs.
    pub verdict: Verdict,
    /// How many times the case ran: 1, more with `--retries` after a failure.
    pub attempts: u32,
    /// The expectation entry's reason, when the case is listed (known failure or flake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectation: Option<String>,
    /// The expectations file that entry is in: of layered files, the layer that won.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_by: Option<String>,
    /// The case's `tags:`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The attempt the status comes from: the first failing one, else the last.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The version of the report format that [`Report`] writes. Reports without
/// `schema_version` are version 1 (one `status` per case, verdicts included).
pub const SCHEMA_VERSION: u32 = 2;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn version_1() -> u32 {
    1
}

/// A whole run: `results.json`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    #[serde(default = "version_1")]
    /// The report format's version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    #[serde(default)]
    /// The tool that wrote the report.
    pub tool: ToolRecord,
    /// The device the run used.
    pub device: DeviceRecord,
    /// The device's own memory table; None without a device.
    #[serde(default)]
    pub memory: Option<MemoryRecord>,
    /// The memory-type selection policy of the run.
    pub policy: String,
    /// The recorded memory table presented to the allocator, if any (`--simulate-memory`);
    /// placements then refer to its types.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(default)]
    pub simulated_memory: Option<String>,
    /// Whether the Khronos validation layer was on (`VKCOPY_VALIDATION=1`).
    #[serde(default)]
    pub validation: bool,
    /// Which cases the run chose, as `Selection::describe` says it ("matches
    /// 'basic::*' and is in shard 1/2"); empty when it chose every case.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selection: String,
    /// The expectation files the verdicts were read against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<String>,
    /// The machine's host name.
    #[serde(default)]
    pub host: String,
    /// When the run started, UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    #[serde(default)]
    pub started: String,
    /// How long the whole run took (for a resumed run: this part, plus the
    /// cases' own times of the part before).
    #[serde(default)]
    pub seconds: f64,
    /// Cases carried over from the interrupted run that `run --resume` finished.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resumed: usize,
    /// Every case run, in the order run.
    pub cases: Vec<CaseRecord>,
}

/// Counts of a run, by verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Passes.
    pub passed: usize,
    /// Failures, unexpected passes included.
    pub failed: usize,
    /// Skips.
    pub skipped: usize,
    /// Failures listed in the expectations.
    pub expected_failures: usize,
    /// Cases that failed, then passed on a re-run.
    pub flakes: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )?;
        if self.flakes > 0 {
            write!(f, ", {} flaky", self.flakes)?;
        }
        Ok(())
    }
}

impl Report {
    /// The counts of the run, by verdict.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for c in &self.cases {
            match c.verdict {
                Verdict::Pass => s.passed += 1,
                Verdict::Fail | Verdict::UnexpectedPass => s.failed += 1,
                Verdict::Skip => s.skipped += 1,
                Verdict::ExpectedFail => s.expected_failures += 1,
                Verdict::Flake => s.flakes += 1,
            }
        }
        s
    }

    /// A folder name for the device: lower case, letters, digits and '-'.
    pub fn device_slug(&self) -> String {
        match &self.simulated_memory {
            None => device_slug(&self.device.name),
            Some(t) => format!(
                "{}-simulating-{}",
                device_slug(&self.device.name),
                device_slug(t)
            ),
        }
    }

    /// JUnit XML, one test case per case, for CI viewers ([`junit::xml`]).
    pub fn junit(&self) -> String {
        junit::xml(self, &junit::Options::default())
    }

    /// A new folder for this run's report, `dir/<device>/<start time>/` (then
    /// `-<policy or runtime>` when not vkcopy's own; `-2`, `-3` ... when another
    /// run took that name).
    pub fn create_folder(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let name = folder::stamp_name(&self.started);
        let mut name = if name.is_empty() {
            "run".to_owned()
        } else {
            name
        };
        // Runs of other runtimes or policies on the device are told apart by name.
        if self.policy != vkcopy::Policy::default().to_string() {
            name = format!("{name}-{}", device_slug(&self.policy));
        }
        folder::create_new(&dir.join(self.device_slug()), &name)
    }

    /// Writes every report file, and `more` (name, bytes: a chart), into the
    /// run's folder `dir` ([`Report::create_folder`]), `results.json` last.
    pub fn write_into(&self, dir: &Path, more: Vec<(&str, Vec<u8>)>) -> std::io::Result<()> {
        let mut json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        json.push('\n');
        let mut files = vec![
            (folder::RESULTS, json.into_bytes()),
            ("results.csv", csv::results(self)),
            ("failures.csv", csv::failures(self)),
            ("junit.xml", self.junit().into_bytes()),
            ("summary.md", self.markdown().into_bytes()),
        ];
        files.extend(more);
        folder::fill(dir, &files)
    }
}
