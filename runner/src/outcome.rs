//! What running a case gives: its verdict, message, placements and timed copies.

use std::time::Duration;

use crate::rt::Placement;

/// The verdict of one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    Skip,
    /// Failed, and listed in the expectations file as a known failure (CTS "xfail").
    ExpectedFail,
    /// Passed, but listed as a known failure: the list is out of date, which fails the
    /// run until it is updated (deqp-runner's "UnexpectedImprovement").
    UnexpectedPass,
}

/// What running a case gave.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Outcome {
    pub status: Status,
    /// Why it failed or was skipped; empty on a pass.
    pub message: String,
    pub seconds: f64,
    /// Where the case's allocations landed.
    pub placements: Vec<PlacementRecord>,
    /// Timed copies.
    pub measurements: Vec<Measurement>,
}

/// One `measure` step's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measurement {
    /// `copy_to_host g`, `copy_to_device g`, `device_to_device a -> b`.
    pub what: String,
    pub bytes: u64,
    pub repeat: u32,
    /// Fastest run, host clock, seconds.
    pub best_seconds: f64,
    /// bytes / best_seconds / 1e9.
    pub gbps: f64,
    /// Memory types of the staging used, if any (`readback` / `upload` roles).
    pub staging_type: Option<u32>,
}

/// A placement as it goes into reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PlacementRecord {
    pub role: String,
    pub memory_type: u32,
    pub flags: String,
    pub heap: u32,
    pub bytes: u64,
    pub fallbacks: u32,
}

impl From<&Placement> for PlacementRecord {
    fn from(p: &Placement) -> Self {
        PlacementRecord {
            role: p.role.to_string(),
            memory_type: p.memory_type,
            flags: p.flags_name(),
            heap: p.heap,
            bytes: p.size,
            fallbacks: p.fallbacks,
        }
    }
}

impl Outcome {
    /// A failure before the case could run (it does not load, or there is no device).
    pub fn failed(message: String) -> Self {
        Outcome::new(Status::Fail, message, Duration::ZERO)
    }

    pub fn new(status: Status, message: String, took: Duration) -> Self {
        Outcome {
            status,
            message,
            seconds: took.as_secs_f64(),
            placements: Vec::new(),
            measurements: Vec::new(),
        }
    }
}
