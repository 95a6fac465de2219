//! `summary.md`, fit for a GitHub job summary: the headline counts, the cases
//! that did not pass, the throughput table, then every case folded away.
//! Statuses are written as `results.json` writes them (`expected_fail`).

use super::{CaseRecord, Report};
use crate::outcome::Verdict;

fn first_line(c: &CaseRecord) -> String {
    c.outcome
        .message
        .lines()
        .next()
        .unwrap_or("")
        .replace('|', "\\|")
}

/// An expectations file as a table names it: its layer folder and name
/// (`driver/mesa-llvmpipe.yaml`), the whole path being in the header.
fn tail(path: &str) -> &str {
    let mut cut = path.rsplitn(3, '/');
    let (name, layer) = (cut.next().unwrap_or(path), cut.next());
    match layer {
        Some(l) if super::LAYER_FOLDERS.contains(&l) => {
            &path[path.len() - name.len() - l.len() - 1..]
        }
        _ => name,
    }
}

impl Report {
    /// The Markdown summary.
    pub fn markdown(&self) -> String {
        let s = self.summary();
        let commit = if self.tool.commit.is_empty() {
            String::new()
        } else {
            format!(" ({})", &self.tool.commit[..self.tool.commit.len().min(12)])
        };
        let mut out = format!(
            "# vkcopy-suite on {}{}\n\n**{s}, {} expected failures, {} flaky** in {:.1} s\n\n\
             Driver {} ({}), Vulkan {}, policy `{}`, validation {}; {} {}{}, started {} on {}.\n\n",
            self.device.name,
            self.simulated_memory
                .as_deref()
                .map(|t| format!(", simulating {t}"))
                .unwrap_or_default(),
            s.expected_failures,
            s.flakes,
            self.seconds,
            self.device.driver,
            self.device.driver_version,
            self.device.api_version,
            self.policy,
            if self.validation { "on" } else { "off" },
            self.tool.name,
            self.tool.version,
            commit,
            self.started,
            self.host,
        );
        // Halide's runtimes are recorded as a policy of their own name.
        let runtime = match self.policy.strip_prefix("halide-runtime-") {
            Some(name) => format!("Halide's Vulkan runtime `{name}` (its own memory types)"),
            None => format!("vkcopy, policy `{}`", self.policy),
        };
        let table = match (&self.simulated_memory, &self.memory) {
            (Some(t), _) => format!("`{t}`, recorded, presented on the device"),
            (None, Some(m)) => format!(
                "the device's own ({} heaps, {} types)",
                m.heaps.len(),
                m.types.len()
            ),
            (None, None) => "none (no device)".to_owned(),
        };
        out += &format!("Runtime: {runtime}. Memory table: {table}.\n\n");
        out += &format!(
            "Cases: {}. Expectations: {}.\n\n",
            match self.selection.as_str() {
                "" => "all",
                s => s,
            },
            match self.expectations.as_slice() {
                [] => "none".to_owned(),
                files => files
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        );
        if self.resumed > 0 {
            out += &format!(
                "Resumed with `run --resume`: {} of the {} cases were run before the interruption.\n\n",
                self.resumed,
                self.cases.len()
            );
        }
        let not_passed: Vec<&CaseRecord> = self
            .cases
            .iter()
            .filter(|c| c.verdict != Verdict::Pass)
            .collect();
        if !not_passed.is_empty() {
            out += "## Not passed\n\n| case | verdict | status | attempts | listed in | message |\n|---|---|---|---|---|---|\n";
            for c in not_passed {
                out += &format!(
                    "| {} | {} | {} | {} | {} | {} |\n",
                    c.name,
                    c.verdict,
                    c.outcome.status,
                    c.attempts,
                    c.expected_by.as_deref().map_or("", tail),
                    first_line(c)
                );
            }
            out.push('\n');
        }
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
        out += &format!(
            "<details><summary>All {} cases</summary>\n\n| case | verdict | status | seconds | message |\n|---|---|---|---|---|\n",
            self.cases.len()
        );
        for c in &self.cases {
            out += &format!(
                "| {} | {} | {} | {:.3} | {} |\n",
                c.name,
                c.verdict,
                c.outcome.status,
                c.outcome.seconds,
                first_line(c)
            );
        }
        out += "\n</details>\n";
        out
    }
}
