//! Known failures per driver (or per policy): `reports/expectations/*.yaml`.
//!
//! ```yaml
//! # Why this list exists, in a comment.
//! expected_failures:
//!   - { case: "perf::readback_64mib", reason: "the old policy stages readback in BAR-mapped VRAM" }
//!   - { case: "regressions::seed_readback::*", reason: "..." }   # globs allowed
//! ```
//! A listed case that fails is an expected failure; one that passes is an
//! unexpected pass and fails the run until the entry is removed, as in Mesa's
//! deqp-runner baselines.

use std::path::Path;

use serde::Deserialize;

use crate::discover::name_matches;
use crate::outcome::{Outcome, Status};
use crate::requires::DeviceReq;
use crate::rt::DeviceType;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    expected_failures: Vec<Entry>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// A case name or a glob of names.
    case: String,
    reason: String,
    /// Device types the entry applies to (`discrete-gpu`, `cpu`, `gpu`, ...); all
    /// when left out.
    #[serde(default)]
    device_types: Vec<String>,
}

/// A loaded expectations file.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    entries: Vec<Entry>,
}

impl Expectations {
    /// Reads a file; errors name the file, line and column.
    pub fn load(path: &Path) -> Result<Self, String> {
        let src = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file: File = serde_saphyr::from_str(&src).map_err(|e| {
            let (l, c) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            let first = e.to_string().lines().next().unwrap_or("").to_owned();
            format!("{}:{l}:{c}: {first}", path.display())
        })?;
        if let Some(e) = file
            .expected_failures
            .iter()
            .find(|e| e.reason.trim().is_empty())
        {
            return Err(format!("{}: {} has no reason", path.display(), e.case));
        }
        for e in &file.expected_failures {
            if let Some(t) = e
                .device_types
                .iter()
                .find(|t| DeviceReq::parse(t).is_none())
            {
                return Err(format!(
                    "{}: {}: unknown device type '{t}'",
                    path.display(),
                    e.case
                ));
            }
        }
        Ok(Expectations {
            entries: file.expected_failures,
        })
    }

    /// The entries that apply to a device of type `t`.
    pub fn for_device(mut self, t: DeviceType) -> Self {
        self.entries.retain(|e| {
            e.device_types.is_empty()
                || e.device_types
                    .iter()
                    .filter_map(|d| DeviceReq::parse(d))
                    .any(|r| r.accepts(t))
        });
        self
    }

    /// Why `name` is expected to fail, if it is.
    pub fn reason(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.case == name || name_matches(&e.case, name))
            .map(|e| e.reason.as_str())
    }

    /// Entries that match none of `names`: stale, or misspelt.
    pub fn unmatched<'a>(&'a self, names: &[String]) -> Vec<&'a str> {
        self.entries
            .iter()
            .filter(|e| {
                !names
                    .iter()
                    .any(|n| e.case == *n || name_matches(&e.case, n))
            })
            .map(|e| e.case.as_str())
            .collect()
    }

    /// Applies the list to an outcome.
    pub fn apply(&self, name: &str, mut out: Outcome) -> Outcome {
        let Some(reason) = self.reason(name) else {
            return out;
        };
        match out.status {
            Status::Fail => {
                out.status = Status::ExpectedFail;
                out.message = format!("expected failure ({reason}): {}", out.message);
            }
            Status::Pass => {
                out.status = Status::UnexpectedPass;
                out.message = format!("listed as an expected failure ({reason}) but passed: remove it from the expectations");
            }
            _ => {}
        }
        out
    }
}
