//! `vkcopy-suite flakes REPORT...`: each case's history across runs, per
//! configuration (device, simulated table, policy: [`Loaded::label`]), and the
//! cases that both passed and failed there, with their flake rate. `--retries`
//! sees one run; this sees them all, as Mesa's flake reports and nextest's
//! recordings do. The case's own `status` is counted, not its verdict, so a
//! listed known failure that sometimes passes is found too.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::report::read::Loaded;

/// One case on one configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct History {
    /// The case's name.
    pub case: String,
    /// The configuration ([`Loaded::label`]).
    pub config: String,
    /// Runs of the case there, skips left out.
    pub runs: usize,
    /// Runs whose attempts all passed.
    pub passed: usize,
    /// Runs that failed (any status but pass and skip).
    pub failed: usize,
    /// Runs that failed, then passed on a re-run (verdict `flake`).
    pub flaky: usize,
    /// (failed + flaky) / runs.
    pub rate: f64,
    /// When the last run with a failure started.
    pub last_failure: String,
    /// Each run's outcome in start order: `p` passed, `F` failed, `f` flaky.
    pub history: String,
}

/// The flaky cases of `runs` (one [`Loaded`] per results.json): those with a
/// pass and a failure (or an in-run flake) on one configuration, the highest
/// rate first.
pub fn flakes(runs: &[Loaded]) -> Vec<History> {
    let mut order: Vec<&Loaded> = runs.iter().collect();
    order.sort_by(|a, b| a.started.cmp(&b.started));
    let mut by: BTreeMap<(String, String), History> = BTreeMap::new();
    for run in order {
        for c in &run.cases {
            let mark = match (c.status.as_str(), c.verdict.as_str()) {
                ("skip" | "", _) => continue,
                (_, "flake") => 'f',
                ("pass", _) => 'p',
                _ => 'F',
            };
            let h = by
                .entry((run.label(), c.name.clone()))
                .or_insert_with(|| History {
                    case: c.name.clone(),
                    config: run.label(),
                    runs: 0,
                    passed: 0,
                    failed: 0,
                    flaky: 0,
                    rate: 0.0,
                    last_failure: String::new(),
                    history: String::new(),
                });
            h.runs += 1;
            h.history.push(mark);
            match mark {
                'p' => h.passed += 1,
                'f' => h.flaky += 1,
                _ => h.failed += 1,
            }
            if mark != 'p' {
                h.last_failure = run.started.clone();
            }
        }
    }
    let mut out: Vec<History> = by
        .into_values()
        .filter(|h| h.flaky > 0 || (h.passed > 0 && h.failed > 0))
        .map(|mut h| {
            h.rate = (h.failed + h.flaky) as f64 / h.runs as f64;
            h
        })
        .collect();
    out.sort_by(|a, b| b.rate.total_cmp(&a.rate).then(a.case.cmp(&b.case)));
    out
}

/// The flaky cases as a Markdown table, after a line of what was read.
pub fn markdown(found: &[History], runs: usize) -> String {
    let mut md = format!(
        "# Flaky cases\n\nResults read: {runs} (each shard's counts as one); cases that both passed and failed, or flaked: {}.\n",
        found.len()
    );
    if found.is_empty() {
        return md;
    }
    md.push_str("\n| case | configuration | runs | passed | failed | flaky | rate | last failure | history |\n");
    md.push_str("|---|---|---:|---:|---:|---:|---:|---|---|\n");
    for h in found {
        md.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {:.0} % | {} | `{}` |\n",
            h.case,
            h.config,
            h.runs,
            h.passed,
            h.failed,
            h.flaky,
            h.rate * 100.0,
            h.last_failure,
            h.history
        ));
    }
    md.push_str("\nHistory, oldest first: `p` passed, `F` failed, `f` flaked within a run (failed, then passed on a re-run).\n");
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::read::CaseResult;

    fn run(device: &str, started: &str, cases: &[(&str, &str, &str)]) -> Loaded {
        Loaded {
            device: device.into(),
            policy: "vkcopy".into(),
            started: started.into(),
            cases: cases
                .iter()
                .map(|(name, status, verdict)| CaseResult {
                    name: (*name).into(),
                    status: (*status).into(),
                    verdict: (*verdict).into(),
                    ..CaseResult::default()
                })
                .collect(),
            ..Loaded::default()
        }
    }

    #[test]
    fn a_case_that_passed_and_failed_is_flaky_per_device() {
        let runs = [
            run(
                "GPU A",
                "2026-12-02T00:00:00Z",
                &[
                    ("x", "fail", "fail"),
                    ("y", "pass", "pass"),
                    ("z", "fail", "fail"),
                ],
            ),
            run(
                "GPU A",
                "2026-12-01T00:00:00Z",
                &[
                    ("x", "pass", "pass"),
                    ("y", "fail", "flake"),
                    ("z", "fail", "fail"),
                ],
            ),
            run(
                "GPU A",
                "2026-12-03T00:00:00Z",
                &[
                    ("x", "pass", "pass"),
                    ("y", "pass", "pass"),
                    ("z", "skip", "skip"),
                ],
            ),
            // On another GPU x always passes: not flaky there.
            run("GPU B", "2026-12-01T00:00:00Z", &[("x", "pass", "pass")]),
            run("GPU B", "2026-12-02T00:00:00Z", &[("x", "pass", "pass")]),
        ];
        let found = flakes(&runs);
        // z always fails (a failure, not a flake); x flakes on GPU A only.
        let names: Vec<(&str, &str)> = found
            .iter()
            .map(|h| (h.case.as_str(), h.config.as_str()))
            .collect();
        assert_eq!(names, [("x", "gpu-a"), ("y", "gpu-a")]);
        let x = &found[0];
        assert_eq!((x.runs, x.passed, x.failed, x.flaky), (3, 2, 1, 0));
        assert_eq!(x.history, "pFp");
        assert_eq!(x.last_failure, "2026-12-02T00:00:00Z");
        assert!((x.rate - 1.0 / 3.0).abs() < 1e-9);
        let y = &found[1];
        assert_eq!((y.flaky, y.history.as_str()), (1, "fpp"));
        let md = markdown(&found, runs.len());
        assert!(md.contains("Results read: 5 (each shard's counts as one); cases that both passed and failed, or flaked: 2."), "{md}");
        assert!(
            md.contains("| `x` | gpu-a | 3 | 2 | 1 | 0 | 33 % | 2026-12-02T00:00:00Z | `pFp` |"),
            "{md}"
        );
    }
}
