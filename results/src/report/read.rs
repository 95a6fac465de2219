//! The one reader of `results.json`, for `diff`, `merge`, `plot`, `run
//! --rerun-failed` and the run's own chart: any version of the file (version 1,
//! before `schema_version`, wrote one `status` per case with the verdict folded
//! in), and folders of them (the shards of one run).

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One case of a loaded report.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CaseResult {
    /// The case's name, `basic::round_trip_2d`.
    pub name: String,
    /// The case's own outcome: `pass`, `fail`, `crash` ...
    pub status: String,
    /// Against the expectations: `pass`, `fail`, `expected_fail`, `flake` ...
    pub verdict: String,
    /// Why it failed or was skipped; empty on a pass.
    pub message: String,
    /// How long the case ran.
    pub seconds: f64,
    /// Its timed copies.
    pub measurements: Vec<Measured>,
}

impl CaseResult {
    /// Whether the verdict fails a run (`fail`, `unexpected_pass`).
    pub fn is_failure(&self) -> bool {
        matches!(self.verdict.as_str(), "fail" | "unexpected_pass")
    }

    /// Whether `run --rerun-failed` runs the case again: it failed (expected
    /// or not), or its verdict failed the run (an unexpected pass, a flake).
    pub fn needs_rerun(&self) -> bool {
        !matches!(self.status.as_str(), "pass" | "skip" | "")
            || matches!(self.verdict.as_str(), "fail" | "unexpected_pass" | "flake")
    }
}

/// One timed copy of a loaded report.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Measured {
    /// The copy timed: `copy_to_host`, `copy_to_device`, `device_to_device`.
    pub what: String,
    /// The measurement's own name, when the case gave it one.
    pub name: Option<String>,
    /// Bytes per copy.
    pub bytes: u64,
    /// The fastest run.
    pub best_seconds: f64,
    /// The median run; reports before it was written have none.
    pub median_seconds: Option<f64>,
    /// Best GB/s.
    pub gbps: f64,
}

impl Measured {
    /// What identifies the copy within its case: `copy_to_host g, 4096 bytes`.
    pub fn key(&self) -> String {
        match &self.name {
            Some(n) => format!("{} ({n}), {} bytes", self.what, self.bytes),
            None => format!("{}, {} bytes", self.what, self.bytes),
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct DeviceFields {
    name: String,
    driver: String,
    api_version: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct ReportFields {
    schema_version: Option<u32>,
    device: DeviceFields,
    policy: String,
    simulated_memory: Option<String>,
    started: String,
    selection: String,
    // Required: without it the file is some other JSON.
    cases: Option<Vec<CaseResult>>,
}

/// A report (or the union of several, for the shards of one run).
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// The files it was read from.
    pub files: Vec<PathBuf>,
    /// The device's name.
    pub device: String,
    /// Its driver's name and info.
    pub driver: String,
    /// The Vulkan version it supports.
    pub api_version: String,
    /// The memory-type selection policy of the run.
    pub policy: String,
    /// The recorded memory table the run simulated, if any.
    pub simulated_memory: Option<String>,
    /// The earliest start time.
    pub started: String,
    /// The shards (K, N) it joins, from each file's `selection`; empty for
    /// runs of a whole selection.
    pub shards: Vec<(u32, u32)>,
    /// Each once; in the file's order from [`load_file`], by name from
    /// [`load_all`].
    pub cases: Vec<CaseResult>,
}

impl Loaded {
    /// What tells this run's configuration apart in a table: the device's
    /// folder name, the simulated table and the policy when not `vkcopy`
    /// (`nvidia-h200`, `nvidia-h200-simulating-lavapipe`, `nvidia-h200-halide-legacy`).
    pub fn label(&self) -> String {
        let mut label = super::device_slug(&self.device);
        if let Some(t) = &self.simulated_memory {
            label += &format!("-simulating-{}", super::device_slug(t));
        }
        if !self.policy.is_empty() && self.policy != "vkcopy" {
            label += &format!("-{}", super::device_slug(&self.policy));
        }
        label
    }

    /// The case called `name`.
    pub fn case(&self, name: &str) -> Option<&CaseResult> {
        self.cases.iter().find(|c| c.name == name)
    }

    /// Adds `other`'s cases; a case in both keeps the later run's result.
    pub fn absorb(&mut self, other: Loaded) {
        let later = other.started > self.started;
        if self.files.is_empty() {
            *self = other;
            return;
        }
        if other.started < self.started {
            self.started = other.started.clone();
        }
        self.files.extend(other.files);
        for s in other.shards {
            if !self.shards.contains(&s) {
                self.shards.push(s);
            }
        }
        self.shards.sort();
        for c in other.cases {
            match self.cases.iter_mut().find(|m| m.name == c.name) {
                Some(mine) if later => *mine = c,
                Some(_) => {}
                None => self.cases.push(c),
            }
        }
        self.cases.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

/// Why a report could not be read; each names its file or folder.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON of a report.
    #[error("{}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// The file is JSON, but not a report this binary reads.
    #[error("{}{why}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    NotResults {
        /// The file, when the report came from one.
        path: Option<PathBuf>,
        /// What is wrong with it.
        why: String,
    },
    /// No report where one was named, or reports of several configurations
    /// where one was asked for.
    #[error("{}: {why}", path.display())]
    NotOne {
        /// The file or folder named.
        path: PathBuf,
        /// What is there.
        why: String,
    },
}

/// Reads one `results.json`, of any version; its cases in the file's order.
pub fn load_file(path: &Path) -> Result<Loaded, ReportError> {
    let path_buf = || path.to_owned();
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path_buf(),
        source,
    })?;
    let fields = serde_json::from_str(&text).map_err(|source| ReportError::Json {
        path: path_buf(),
        source,
    })?;
    let mut loaded = from_fields(fields).map_err(|why| ReportError::NotResults {
        path: Some(path_buf()),
        why,
    })?;
    loaded.files = vec![path.to_owned()];
    Ok(loaded)
}

/// A report in memory, read as [`load_file`] reads the file it would write.
pub fn from_report(report: &super::Report) -> Result<Loaded, ReportError> {
    let not = |why: String| ReportError::NotResults { path: None, why };
    let json = serde_json::to_value(report).expect("a report serializes");
    from_fields(serde_json::from_value(json).map_err(|e| not(e.to_string()))?).map_err(not)
}

fn from_fields(fields: ReportFields) -> Result<Loaded, String> {
    let Some(mut cases) = fields.cases else {
        return Err("no `cases` list: not a vkcopy-suite results.json".into());
    };
    if cases.iter().any(|c| c.name.is_empty()) {
        return Err("a case without a name: not a vkcopy-suite results.json".into());
    }
    let version = fields.schema_version.unwrap_or(1);
    if version > super::SCHEMA_VERSION {
        return Err(format!(
            "schema_version {version} is newer than this vkcopy-suite reads ({})",
            super::SCHEMA_VERSION
        ));
    }
    for c in &mut cases {
        upgrade_case(c, version);
    }
    Ok(Loaded {
        files: Vec::new(),
        device: fields.device.name,
        driver: fields.device.driver,
        api_version: fields.device.api_version,
        policy: fields.policy,
        simulated_memory: fields.simulated_memory,
        started: fields.started,
        shards: shard_of(&fields.selection).into_iter().collect(),
        cases,
    })
}

/// The shard `K/N` a selection names (`is in shard 2/3`), if any.
fn shard_of(selection: &str) -> Option<(u32, u32)> {
    let (_, rest) = selection.split_once("shard ")?;
    let spec = rest
        .split(|c: char| !(c.is_ascii_digit() || c == '/'))
        .next()?;
    let (k, n) = spec.split_once('/')?;
    Some((k.parse().ok()?, n.parse().ok()?))
}

impl Loaded {
    /// The shards of its runs that it lacks (`2/3`), when it joins shards.
    pub fn missing_shards(&self) -> Vec<String> {
        let mut missing = Vec::new();
        let counts: Vec<u32> = self.shards.iter().map(|s| s.1).collect();
        for &n in counts.iter().collect::<std::collections::BTreeSet<_>>() {
            for k in 1..=n {
                if !self.shards.contains(&(k, n)) {
                    missing.push(format!("{k}/{n}"));
                }
            }
        }
        missing
    }
}

/// A version 1 case has the verdict in `status`: split it into both.
fn upgrade_case(c: &mut CaseResult, version: u32) {
    if version >= 2 && !c.verdict.is_empty() {
        return;
    }
    c.verdict = c.status.clone();
    c.status = match c.status.as_str() {
        "expected_fail" => "fail".into(),
        "unexpected_pass" => "pass".into(),
        other => other.into(),
    };
}

/// Every `results.json` of `path`: the file itself, or those below a folder.
pub fn report_files(path: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let not_one = |why: String| ReportError::NotOne {
        path: path.to_owned(),
        why,
    };
    if path.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    if !path.is_dir() {
        return Err(not_one("no such file or folder".into()));
    }
    let pattern = path.join("**").join("results.json");
    let mut files: Vec<PathBuf> = glob::glob(&pattern.to_string_lossy())
        .map_err(|e| not_one(e.to_string()))?
        .filter_map(Result::ok)
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(not_one("no results.json in this folder".into()));
    }
    Ok(files)
}

/// The reports of `paths`, one per configuration ([`Loaded::label`]): the
/// shards and re-runs of one configuration are joined, cases by name.
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<Loaded>, ReportError> {
    let mut out: Vec<Loaded> = Vec::new();
    for p in paths {
        for file in report_files(p)? {
            let mut one = load_file(&file)?;
            one.cases.sort_by(|a, b| a.name.cmp(&b.name));
            one.shards.sort();
            match out.iter_mut().find(|l| l.label() == one.label()) {
                Some(l) => l.absorb(one),
                None => out.push(one),
            }
        }
    }
    Ok(out)
}

/// One report from `path` (a file, or a folder whose reports are all of one
/// configuration).
pub fn load_one(path: &Path) -> Result<Loaded, ReportError> {
    let mut all = load_all(&[path.to_owned()])?;
    match all.len() {
        1 => Ok(all.remove(0)),
        _ => Err(ReportError::NotOne {
            path: path.to_owned(),
            why: format!(
                "reports of {} configurations ({}); name one",
                all.len(),
                all.iter().map(Loaded::label).collect::<Vec<_>>().join(", ")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, selection: &str) {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let json = format!(
            r#"{{"schema_version": 2, "device": {{"name": "GPU X"}}, "policy": "vkcopy", "started": "{name}", "selection": "{selection}", "cases": [{{"name": "c{name}", "status": "pass", "verdict": "pass"}}]}}"#
        );
        std::fs::write(d.join("results.json"), json).unwrap();
    }

    #[test]
    fn shards_joined_say_which_are_missing() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "1", "matches 'basic::*', is in shard 1/3");
        write(dir.path(), "3", "is in shard 3/3");
        let all = load_all(&[dir.path().to_owned()]).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].shards, [(1, 3), (3, 3)]);
        assert_eq!(all[0].missing_shards(), ["2/3"]);
        assert_eq!(all[0].cases.len(), 2);
        write(dir.path(), "2", "is in shard 2/3");
        let all = load_all(&[dir.path().to_owned()]).unwrap();
        assert!(all[0].missing_shards().is_empty());
        // A whole run has no shards, and none missing.
        let whole = tempfile::tempdir().unwrap();
        write(whole.path(), "w", "all");
        let all = load_all(&[whole.path().to_owned()]).unwrap();
        assert!(all[0].shards.is_empty() && all[0].missing_shards().is_empty());
    }
}
