//! Run reports: one JSON file and one Markdown summary per run and device,
//! written below `reports/out/<device>/`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::exec::{Outcome, Status};

/// The device a run used, as far as it is known.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceRecord {
    pub name: String,
    pub device_type: String,
    pub driver: String,
    pub api_version: String,
}

/// One case's result.
#[derive(Clone, Debug, Serialize)]
pub struct CaseRecord {
    pub name: String,
    pub path: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub device: DeviceRecord,
    pub policy: String,
    pub cases: Vec<CaseRecord>,
}

/// Counts of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

impl Report {
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for c in &self.cases {
            match c.outcome.status {
                Status::Pass => s.passed += 1,
                Status::Fail => s.failed += 1,
                Status::Skip => s.skipped += 1,
            }
        }
        s
    }

    /// A folder name for the device: lower case, letters, digits and '-'.
    pub fn device_slug(&self) -> String {
        let mut slug: String = self
            .device
            .name
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

    /// The Markdown summary: counts, then a table of failures and skips.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# vkcopy-suite on {}\n\nDriver: {}, Vulkan {}, policy `{}`.\n\n**{}**\n\n",
            self.device.name,
            self.device.driver,
            self.device.api_version,
            self.policy,
            self.summary()
        );
        out.push_str("| case | status | seconds | message |\n|---|---|---|---|\n");
        for c in &self.cases {
            let msg = c
                .outcome
                .message
                .lines()
                .next()
                .unwrap_or("")
                .replace('|', "\\|");
            out.push_str(&format!(
                "| {} | {:?} | {:.3} | {} |\n",
                c.name, c.outcome.status, c.outcome.seconds, msg
            ));
        }
        out
    }

    /// Writes `results.json` and `summary.md` into `dir/<device>/`; returns that folder.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let out = dir.join(self.device_slug());
        std::fs::create_dir_all(&out)?;
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(out.join("results.json"), json)?;
        std::fs::write(out.join("summary.md"), self.markdown())?;
        Ok(out)
    }
}
