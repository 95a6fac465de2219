//! Copy profiling: per direction, the number of copies, bytes, host time and
//! GPU time from timestamp queries. Halide's `device_buffer_copies_with_profile`
//! runs with profiling off and on; counts are kept either way, GPU timestamps
//! only when profiling is on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::types::CopyPath;

/// Totals of one copy path.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CopyStats {
    /// Copies made.
    pub copies: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Wall time of the whole copy on the host, staging included, in seconds.
    pub host_seconds: f64,
    /// Time between the timestamps around the copy commands, in seconds; 0 when
    /// profiling was off or the queue has no timestamps.
    pub gpu_seconds: f64,
}

impl CopyStats {
    /// GB/s (1e9 bytes per second) over host time.
    pub fn host_gbps(&self) -> f64 {
        if self.host_seconds > 0.0 {
            self.bytes as f64 / self.host_seconds / 1e9
        } else {
            0.0
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Profile {
    enabled: AtomicBool,
    copies: [AtomicU64; 4],
    bytes: [AtomicU64; 4],
    host_ns: [AtomicU64; 4],
    gpu_ns: [AtomicU64; 4],
}

impl Profile {
    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub(crate) fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub(crate) fn record(&self, d: CopyPath, bytes: u64, host_ns: u64, gpu_ns: Option<u64>) {
        let i = d as usize;
        self.copies[i].fetch_add(1, Ordering::Relaxed);
        self.bytes[i].fetch_add(bytes, Ordering::Relaxed);
        self.host_ns[i].fetch_add(host_ns, Ordering::Relaxed);
        if let Some(g) = gpu_ns {
            self.gpu_ns[i].fetch_add(g, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self, d: CopyPath) -> CopyStats {
        let i = d as usize;
        CopyStats {
            copies: self.copies[i].load(Ordering::Relaxed),
            bytes: self.bytes[i].load(Ordering::Relaxed),
            host_seconds: self.host_ns[i].load(Ordering::Relaxed) as f64 * 1e-9,
            gpu_seconds: self.gpu_ns[i].load(Ordering::Relaxed) as f64 * 1e-9,
        }
    }
}

/// Where the host time of one blocking submission went, in nanoseconds, from
/// [`crate::Context::set_step_trace`]. The steps follow each other: waiting for
/// the submitter's lock, recording (reset, begin, barriers, the copy commands,
/// end), `vkQueueSubmit`, and the wait until the host sees the work done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubmitSteps {
    /// Until the submitter's command buffers were this thread's.
    pub lock_ns: u64,
    /// Recording the command buffer.
    pub record_ns: u64,
    /// The `vkQueueSubmit` call.
    pub submit_ns: u64,
    /// From the submission until the host saw the timeline value reached.
    pub wait_ns: u64,
    /// The GPU's time between the timestamps at the start and the end of the
    /// recorded work, when profiling is on and the queue has timestamps.
    pub gpu_ns: Option<u64>,
}

/// Submission steps of a context while tracing is on.
#[derive(Debug, Default)]
pub(crate) struct StepTrace {
    enabled: AtomicBool,
    samples: std::sync::Mutex<Vec<SubmitSteps>>,
}

impl StepTrace {
    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub(crate) fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub(crate) fn push(&self, s: SubmitSteps) {
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(s);
    }

    pub(crate) fn take(&self) -> Vec<SubmitSteps> {
        std::mem::take(&mut *self.samples.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
