//! Run reports: one JSON file and one Markdown summary per run and device,
//! written below `reports/out/<device>/`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::outcome::{Outcome, Verdict};

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
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DeviceRecord {
    pub name: String,
    pub device_type: String,
    pub driver: String,
    pub api_version: String,
}

/// One case's result: its own status (in `outcome`, flattened: `status`,
/// `message`, ...) and the verdict against the expectations.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseRecord {
    pub name: String,
    pub path: String,
    pub verdict: Verdict,
    /// How many times the case ran: 1, more with `--retries` after a failure.
    pub attempts: u32,
    /// The expectation entry's reason, when the case is listed (known failure or flake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectation: Option<String>,
    /// The case's `tags:`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The attempt the status comes from: the first failing one, else the last.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// A whole run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub device: DeviceRecord,
    pub policy: String,
    /// The recorded memory table presented to the allocator, if any (`--simulate-memory`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(default)]
    pub simulated_memory: Option<String>,
    pub cases: Vec<CaseRecord>,
}

/// Counts of a run, by verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub passed: usize,
    /// Failures, unexpected passes included.
    pub failed: usize,
    pub skipped: usize,
    pub expected_failures: usize,
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

    /// The Markdown summary: counts, then a table of failures and skips.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# vkcopy-suite on {}{}\n\nDriver: {}, Vulkan {}, policy `{}`.\n\n**{}**\n\n",
            self.device.name,
            self.simulated_memory
                .as_deref()
                .map(|t| format!(", simulating {t}"))
                .unwrap_or_default(),
            self.device.driver,
            self.device.api_version,
            self.policy,
            self.summary()
        );
        let measured: Vec<String> = self
            .cases
            .iter()
            .flat_map(|c| {
                c.outcome
                    .measurements
                    .iter()
                    .map(move |m| format!("| {} | {} |\n", c.name, m.table_row()))
            })
            .collect();
        if !measured.is_empty() {
            out.push_str(
                "## Throughput (GB/s = 1e9 bytes/s, host clock; GPU: timestamps)\n\n\
                 | case | copy | bytes | best GB/s | median GB/s | best us | GPU best us | ratio |\n\
                 |---|---|---|---|---|---|---|---|\n",
            );
            out.extend(measured);
            out.push('\n');
        }
        out.push_str("| case | status | verdict | seconds | message |\n|---|---|---|---|---|\n");
        for c in &self.cases {
            let msg = c
                .outcome
                .message
                .lines()
                .next()
                .unwrap_or("")
                .replace('|', "\\|");
            out.push_str(&format!(
                "| {} | {} | {} | {:.3} | {} |\n",
                c.name, c.outcome.status, c.verdict, c.outcome.seconds, msg
            ));
        }
        out
    }

    /// JUnit XML, one test case per case, for CI viewers.
    pub fn junit(&self) -> String {
        use quick_junit::{NonSuccessKind, Report as JReport, TestCase, TestCaseStatus, TestSuite};
        let mut suite = TestSuite::new(format!("vkcopy-suite on {}", self.device.name));
        for c in &self.cases {
            let status = match c.verdict {
                Verdict::Pass | Verdict::Flake => TestCaseStatus::success(),
                Verdict::Skip | Verdict::ExpectedFail => {
                    let mut s = TestCaseStatus::skipped();
                    s.set_message(c.outcome.message.clone());
                    s
                }
                Verdict::Fail | Verdict::UnexpectedPass => {
                    let kind = match c.outcome.status {
                        crate::outcome::Status::Fail | crate::outcome::Status::Pass => {
                            NonSuccessKind::Failure
                        }
                        _ => NonSuccessKind::Error,
                    };
                    let mut s = TestCaseStatus::non_success(kind);
                    s.set_message(c.outcome.message.lines().next().unwrap_or("").to_owned());
                    s.set_description(c.outcome.message.clone());
                    s
                }
            };
            let mut case = TestCase::new(c.name.clone(), status);
            case.set_classname(c.name.rsplit_once("::").map_or("", |(a, _)| a).to_owned());
            case.set_time(std::time::Duration::from_secs_f64(c.outcome.seconds));
            suite.add_test_case(case);
        }
        let mut report = JReport::new("vkcopy-suite");
        report.add_test_suite(suite);
        report.to_string().unwrap_or_default()
    }

    /// Writes `results.json`, `junit.xml`, `summary.md` and (when the run measured
    /// copies) `throughput.svg` into `dir/<device>/`; returns that folder.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let out = dir.join(self.device_slug());
        std::fs::create_dir_all(&out)?;
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(out.join("results.json"), json)?;
        std::fs::write(out.join("summary.md"), self.markdown())?;
        std::fs::write(out.join("junit.xml"), self.junit())?;
        let json = serde_json::to_value(self).map_err(std::io::Error::other)?;
        let bars = crate::plot::bars_from_report(&json, "");
        if !bars.is_empty() {
            let title = format!(
                "vkcopy-suite on {}, policy {}",
                self.device.name, self.policy
            );
            crate::plot::throughput_svg(&bars, &title, &out.join("throughput.svg"))
                .map_err(std::io::Error::other)?;
        }
        Ok(out)
    }
}
