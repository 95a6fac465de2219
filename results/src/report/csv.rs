//! `results.csv` and `failures.csv` in deqp-runner's shape, so that tools made
//! for Mesa's CTS runs read them: no header, one case a line; `results.csv` is
//! `name,status,seconds`, `failures.csv` is `name,status` for every case that
//! did not pass or skip (deqp-runner's baseline format). Statuses are
//! deqp-runner's names (`Pass`, `Fail`, `Crash`, `ExpectedFail` ...).

use super::{CaseRecord, Report};
use crate::outcome::{Status, Verdict};

/// deqp-runner's name for the case's result: the verdict, and for a failure
/// how it failed (deqp-runner has no device-lost status: a lost device is a
/// crash of the driver; a resource error is a failure).
pub fn deqp_status(c: &CaseRecord) -> &'static str {
    match c.verdict {
        Verdict::Pass => "Pass",
        Verdict::Skip => "Skip",
        Verdict::ExpectedFail => "ExpectedFail",
        Verdict::UnexpectedPass => "UnexpectedPass",
        Verdict::Flake => "Flake",
        Verdict::Fail => match c.outcome.status {
            Status::Crash | Status::DeviceLost => "Crash",
            Status::Timeout => "Timeout",
            _ => "Fail",
        },
    }
}

/// Whether the case goes into `failures.csv`.
fn listed_as_failure(c: &CaseRecord) -> bool {
    !matches!(deqp_status(c), "Pass" | "Skip")
}

fn write(rows: impl Iterator<Item = Vec<String>>) -> Vec<u8> {
    let mut w = ::csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    for row in rows {
        // Writing into memory cannot fail.
        let _ = w.write_record(&row);
    }
    w.into_inner().unwrap_or_default()
}

/// `results.csv`: every case.
pub fn results(report: &Report) -> Vec<u8> {
    write(report.cases.iter().map(|c| {
        vec![
            c.name.clone(),
            deqp_status(c).to_owned(),
            format!("{:.6}", c.outcome.seconds),
        ]
    }))
}

/// `failures.csv`: the cases that neither passed nor skipped.
pub fn failures(report: &Report) -> Vec<u8> {
    write(
        report
            .cases
            .iter()
            .filter(|c| listed_as_failure(c))
            .map(|c| vec![c.name.clone(), deqp_status(c).to_owned()]),
    )
}
