//! `vkcopy-suite diff A B`: what changed from run A (a baseline) to run B.

use serde::Serialize;

use crate::report::read::{CaseResult, Loaded};

/// A case whose verdict changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// The case's name.
    pub name: String,
    /// The verdict in A and in B.
    pub was: String,
    /// The verdict in B.
    pub now: String,
    /// B's message (A's for a fix).
    pub message: String,
}

/// A timed copy whose best GB/s moved by more than the threshold.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Speed {
    /// The case's name.
    pub case: String,
    /// `copy_to_host g, 4096 bytes`.
    pub copy: String,
    /// Best GB/s in A.
    pub was_gbps: f64,
    /// Best GB/s in B.
    pub now_gbps: f64,
    /// now / was.
    pub ratio: f64,
}

/// Everything `diff` reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Diff {
    /// What run A is: its label and files.
    pub a: String,
    /// What run B is: its label and files.
    pub b: String,
    /// Passed (or was expected to fail, or skipped) in A, fails the run in B.
    pub regressions: Vec<Change>,
    /// Failed the run in A, does not in B.
    pub fixes: Vec<Change>,
    /// Other verdict changes (`pass` -> `skip`, `fail` -> `expected_fail` ...).
    pub changes: Vec<Change>,
    /// Cases only in B, with B's verdict.
    pub new: Vec<Change>,
    /// Cases only in A, with A's verdict.
    pub missing: Vec<Change>,
    /// Copies at least the threshold slower in B.
    pub slower: Vec<Speed>,
    /// Copies at least the threshold faster in B.
    pub faster: Vec<Speed>,
    /// The relative change of best GB/s counted as noise (0.1 = 10 %).
    pub threshold: f64,
}

fn change(name: &str, was: &str, now: &str, message: &str) -> Change {
    Change {
        name: name.to_owned(),
        was: was.to_owned(),
        now: now.to_owned(),
        message: message.lines().next().unwrap_or("").to_owned(),
    }
}

/// Compares `a` with `b`; best GB/s changes within `threshold` (relative) are noise.
pub fn diff(a: &Loaded, b: &Loaded, threshold: f64) -> Diff {
    let mut d = Diff {
        a: describe(a),
        b: describe(b),
        threshold,
        ..Diff::default()
    };
    for old in &a.cases {
        let Some(new) = b.case(&old.name) else {
            d.missing
                .push(change(&old.name, &old.verdict, "", &old.message));
            continue;
        };
        match (old.is_failure(), new.is_failure()) {
            (false, true) => {
                d.regressions
                    .push(change(&old.name, &old.verdict, &new.verdict, &new.message))
            }
            (true, false) => {
                d.fixes
                    .push(change(&old.name, &old.verdict, &new.verdict, &old.message))
            }
            _ if old.verdict != new.verdict => {
                d.changes
                    .push(change(&old.name, &old.verdict, &new.verdict, &new.message))
            }
            _ => {}
        }
        speeds(old, new, threshold, &mut d);
    }
    for new in &b.cases {
        if a.case(&new.name).is_none() {
            d.new
                .push(change(&new.name, "", &new.verdict, &new.message));
        }
    }
    d
}

fn speeds(old: &CaseResult, new: &CaseResult, threshold: f64, d: &mut Diff) {
    for m in &new.measurements {
        let Some(was) = old.measurements.iter().find(|o| o.key() == m.key()) else {
            continue;
        };
        if was.gbps <= 0.0 || m.gbps <= 0.0 {
            continue;
        }
        let ratio = m.gbps / was.gbps;
        let s = Speed {
            case: new.name.clone(),
            copy: m.key(),
            was_gbps: was.gbps,
            now_gbps: m.gbps,
            ratio,
        };
        if ratio < 1.0 / (1.0 + threshold) {
            d.slower.push(s);
        } else if ratio > 1.0 + threshold {
            d.faster.push(s);
        }
    }
}

fn describe(l: &Loaded) -> String {
    let files: Vec<String> = l.files.iter().map(|f| f.display().to_string()).collect();
    format!("{} ({})", l.label(), files.join(", "))
}

impl Diff {
    /// Whether B regressed: a case that fails the run and did not in A.
    pub fn has_regressions(&self) -> bool {
        !self.regressions.is_empty()
    }

    /// The diff as Markdown (for a terminal and a GitHub job summary alike).
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# vkcopy-suite diff\n\nA: {}\n\nB: {}\n\n**{} regressions, {} fixes, {} other changes, {} new, {} missing; {} slower and {} faster copies (beyond {:.0} %)**\n",
            self.a,
            self.b,
            self.regressions.len(),
            self.fixes.len(),
            self.changes.len(),
            self.new.len(),
            self.missing.len(),
            self.slower.len(),
            self.faster.len(),
            self.threshold * 100.0
        );
        for (title, rows) in [
            ("Regressions", &self.regressions),
            ("Fixes", &self.fixes),
            ("Other changes", &self.changes),
            ("New cases", &self.new),
            ("Missing cases", &self.missing),
        ] {
            if rows.is_empty() {
                continue;
            }
            out += &format!("\n## {title}\n\n| case | A | B | message |\n|---|---|---|---|\n");
            for c in rows {
                out += &format!(
                    "| {} | {} | {} | {} |\n",
                    c.name,
                    dash(&c.was),
                    dash(&c.now),
                    c.message.replace('|', "\\|")
                );
            }
        }
        for (title, rows) in [
            ("Slower copies", &self.slower),
            ("Faster copies", &self.faster),
        ] {
            if rows.is_empty() {
                continue;
            }
            out += &format!(
                "\n## {title}\n\n| case | copy | A GB/s | B GB/s | B / A |\n|---|---|---|---|---|\n"
            );
            for s in rows {
                out += &format!(
                    "| {} | {} | {:.3} | {:.3} | {:.3} |\n",
                    s.case, s.copy, s.was_gbps, s.now_gbps, s.ratio
                );
            }
        }
        out
    }
}

fn dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}
