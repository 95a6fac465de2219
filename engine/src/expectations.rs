//! Known failures and known flakes per driver (or per policy):
//! `reports/expectations/*.yaml`.
//!
//! ```yaml
//! # Why this list exists, in a comment.
//! expected_failures:
//!   - { case: "perf::readback_64mib", reason: "the old policy stages readback in BAR-mapped VRAM" }
//!   - { case: "regressions::seed_readback::*", reason: "..." }   # globs allowed
//!   - { case: "basic::x", reason: "driver bug", status: [crash] }  # only these statuses
//! known_flakes:
//!   - { case: "perf::*", reason: "timing on a shared machine" }
//! ```
//! A listed case that fails is an expected failure; one that passes is an
//! unexpected pass and fails the run until the entry is removed, as in Mesa's
//! deqp-runner baselines. A known flake that fails is a flake.

use std::path::Path;

use serde::Deserialize;

use crate::discover::name_matches;
use crate::requires::DeviceReq;
use crate::rt::DeviceType;
use vkcopy_results::outcome::{Status, Verdict};
use vkcopy_results::report::{CaseRecord, Report};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    // Options, so that a key with nothing under it reads as an empty list.
    #[serde(default)]
    expected_failures: Option<Vec<Entry>>,
    #[serde(default)]
    known_flakes: Option<Vec<Entry>>,
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
    /// The failing statuses expected (`fail`, `crash`, `timeout`, `device_lost`,
    /// `resource_error`); any failing status when left out.
    #[serde(default)]
    status: Vec<Status>,
    /// The file the entry was read from.
    #[serde(skip)]
    from: String,
}

impl Entry {
    fn matches(&self, name: &str) -> bool {
        self.case == name || name_matches(&self.case, name)
    }
}

/// A loaded expectations file.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    entries: Vec<Entry>,
    flakes: Vec<Entry>,
}

/// A case's attempts judged against the expectations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    /// The verdict.
    pub verdict: Verdict,
    /// The matching entry's reason, if any.
    pub reason: Option<String>,
    /// What to add to the case's message (why this verdict), empty when nothing.
    pub note: String,
    /// The file of the matching entry: with layered files, the layer that won.
    pub from: Option<String>,
}

impl Expectations {
    /// Reads a file; errors name the file, line and column.
    pub fn load(path: &Path) -> Result<Self, String> {
        let src = crate::files::read_text(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if crate::files::blank(&src) {
            return Ok(Expectations::default());
        }
        let file: File = serde_saphyr::from_str(&src)
            .map_err(|e| crate::error::CaseError::from_yaml(path, &src, &e).to_string())?;
        let mut entries = file.expected_failures.unwrap_or_default();
        let mut flakes = file.known_flakes.unwrap_or_default();
        let all = || entries.iter().chain(&flakes);
        if let Some(e) = all().find(|e| e.reason.trim().is_empty()) {
            return Err(format!("{}: {} has no reason", path.display(), e.case));
        }
        if let Some(e) = all().find(|e| e.status.iter().any(|s| !s.is_failure())) {
            return Err(format!(
                "{}: {}: status lists only failing statuses (fail, crash, timeout, device_lost, resource_error)",
                path.display(),
                e.case
            ));
        }
        for e in all() {
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
        let from = crate::files::shown(path);
        for e in entries.iter_mut().chain(&mut flakes) {
            e.from.clone_from(&from);
        }
        Ok(Expectations { entries, flakes })
    }

    /// The entries of both lists; those of `other` after these.
    pub fn merged(mut self, other: Expectations) -> Self {
        self.entries.extend(other.entries);
        self.flakes.extend(other.flakes);
        self
    }

    /// The entries that apply to a device of type `t`.
    pub fn for_device(mut self, t: DeviceType) -> Self {
        let applies = |e: &Entry| {
            e.device_types.is_empty()
                || e.device_types
                    .iter()
                    .filter_map(|d| DeviceReq::parse(d))
                    .any(|r| r.accepts(t))
        };
        self.entries.retain(applies);
        self.flakes.retain(applies);
        self
    }

    /// Why `name` is expected to fail, if it is.
    pub fn reason(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.matches(name))
            .map(|e| e.reason.as_str())
    }

    /// Why `name` is a known flake, if it is.
    pub fn flake_reason(&self, name: &str) -> Option<&str> {
        self.flake(name).map(|e| e.reason.as_str())
    }

    fn flake(&self, name: &str) -> Option<&Entry> {
        self.flakes.iter().find(|e| e.matches(name))
    }

    /// Entries that match none of `names`: stale, or misspelt.
    pub fn unmatched<'a>(&'a self, names: &[String]) -> Vec<&'a str> {
        self.entries
            .iter()
            .chain(&self.flakes)
            .filter(|e| !names.iter().any(|n| e.matches(n)))
            .map(|e| e.case.as_str())
            .collect()
    }

    /// The verdict on the statuses of a case's attempts, in order: a failure that
    /// passes on a re-run is a flake; a failure listed with its status is an
    /// expected failure; a failure of a known flake is a flake.
    pub fn judge(&self, name: &str, attempts: &[Status]) -> Judgement {
        let judged = |verdict, by: Option<&Entry>, note: String| Judgement {
            verdict,
            reason: by.map(|e| e.reason.clone()),
            note,
            from: by.map(|e| e.from.clone()),
        };
        let first = attempts.first().copied().unwrap_or(Status::Skip);
        let entry = self.entries.iter().find(|e| e.matches(name));
        match first {
            Status::Skip => judged(Verdict::Skip, None, String::new()),
            Status::Pass => match entry {
                Some(e) => judged(
                    Verdict::UnexpectedPass,
                    entry,
                    format!(
                        "listed as an expected failure ({}) but passed: remove it from {}",
                        e.reason, e.from
                    ),
                ),
                None => judged(Verdict::Pass, None, String::new()),
            },
            failed => {
                if let Some(n) = attempts.iter().position(|s| *s == Status::Pass) {
                    let note = format!("flake: {failed}, then passed on attempt {}", n + 1);
                    return judged(Verdict::Flake, self.flake(name), note);
                }
                if let Some(e) = entry {
                    if e.status.is_empty() || e.status.contains(&failed) {
                        let note = format!("expected failure ({})", e.reason);
                        return judged(Verdict::ExpectedFail, entry, note);
                    }
                    let want: Vec<&str> = e.status.iter().map(|s| s.name()).collect();
                    let note = format!(
                        "listed as an expected {} ({}) but the status is {failed}",
                        want.join(" or "),
                        e.reason
                    );
                    return judged(Verdict::Fail, entry, note);
                }
                if let Some(e) = self.flake(name) {
                    let note = format!("known flake ({})", e.reason);
                    return judged(Verdict::Flake, Some(e), note);
                }
                judged(Verdict::Fail, None, String::new())
            }
        }
    }
}

/// The expectations file `old` (its text, if there is one) brought up to date
/// with `report`: an entry whose cases all passed is removed, a failure that no
/// entry covers is added with its status (reason: the status and message), a
/// flake no known flake covers is added to `known_flakes`. Entries for cases
/// the run did not have are kept; so are the comment lines at the top. A case
/// another file (`expected_by`, another layer) expects is left to that file:
/// `path` is this file.
pub fn updated(old: Option<&str>, report: &Report, path: &Path) -> Result<String, String> {
    let path = crate::files::shown(path);
    let file: File = match old {
        Some(src) if !crate::files::blank(src) => {
            serde_saphyr::from_str(src).map_err(|e| e.to_string())?
        }
        _ => File {
            expected_failures: None,
            known_flakes: None,
        },
    };
    let failing = |c: &CaseRecord| matches!(c.verdict, Verdict::Fail | Verdict::ExpectedFail);
    let mut expected: Vec<Entry> = file
        .expected_failures
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            let mut cases = report.cases.iter().filter(|c| e.matches(&c.name));
            let ran: Vec<&CaseRecord> = cases.by_ref().collect();
            ran.is_empty() || ran.iter().any(|c| failing(c))
        })
        .collect();
    let mut flakes = file.known_flakes.unwrap_or_default();
    let elsewhere = |c: &CaseRecord| c.expected_by.as_deref().is_some_and(|f| *f != path);
    for c in report.cases.iter().filter(|c| !elsewhere(c)) {
        let first: String = c
            .outcome
            .message
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .chars()
            .take(120)
            .collect();
        if failing(c) && !expected.iter().any(|e| e.matches(&c.name)) {
            expected.push(Entry {
                case: c.name.clone(),
                reason: format!("{} on {}: {first}", c.outcome.status, report.device.name),
                device_types: Vec::new(),
                status: vec![c.outcome.status],
                from: String::new(),
            });
        }
        if c.verdict == Verdict::Flake && !flakes.iter().any(|e| e.matches(&c.name)) {
            flakes.push(Entry {
                case: c.name.clone(),
                reason: format!(
                    "{} on {}, then passed on a re-run",
                    c.outcome.status, report.device.name
                ),
                device_types: Vec::new(),
                status: Vec::new(),
                from: String::new(),
            });
        }
    }
    let mut text: String = old
        .unwrap_or("")
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    if text.is_empty() {
        text = format!(
            "# Known failures and flakes on {} under the {} policy, written by\n# `vkcopy-suite run --update-expectations`; give each a real reason.\n",
            report.device.name, report.policy
        );
    }
    for (key, list) in [("expected_failures", &expected), ("known_flakes", &flakes)] {
        if list.is_empty() {
            text.push_str(&format!("{key}: []\n"));
            continue;
        }
        text.push_str(&format!("{key}:\n"));
        for e in list {
            text.push_str(&format!("  - case: {}\n", quoted(&e.case)));
            text.push_str(&format!("    reason: {}\n", quoted(&e.reason)));
            if !e.device_types.is_empty() {
                text.push_str(&format!(
                    "    device_types: [{}]\n",
                    e.device_types.join(", ")
                ));
            }
            if !e.status.is_empty() {
                let names: Vec<&str> = e.status.iter().map(|s| s.name()).collect();
                text.push_str(&format!("    status: [{}]\n", names.join(", ")));
            }
        }
    }
    Ok(text)
}

/// A YAML double-quoted string (JSON's escapes are YAML's).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Expectations, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("all.yaml");
        std::fs::write(&path, text).unwrap();
        Expectations::load(&path).map_err(|e| e.replace(&path.display().to_string(), "F"))
    }

    #[test]
    fn empty_files_and_keys_hold_no_entries() {
        for text in [
            "",
            "# only a comment\n",
            "expected_failures:\nknown_flakes:\n",
        ] {
            let e = load(text).unwrap();
            assert_eq!((e.entries.len(), e.flakes.len()), (0, 0), "{text:?}");
        }
        let e = load("expected_failures:\n  - { case: \"a::*\", reason: \"r\" }\n").unwrap();
        assert_eq!(e.reason("a::b"), Some("r"));
    }

    #[test]
    fn errors_are_located_once() {
        let e = load("expected_failures: 3\n").err().unwrap();
        assert!(e.starts_with("F:1:"), "{e}");
        assert!(!e.contains("error:") && !e.contains("line 1 column"), "{e}");
        let e = load("expected_failures:\n  - { case: a }\n").err().unwrap();
        assert!(e.starts_with("F:2:") && e.contains("reason"), "{e}");
    }
}
