//! Which queue takes small blocking copies by the GPU (uploads, readbacks and
//! device-to-device copies), without Vulkan calls. Such a copy is bounded by the
//! driver's submission and wake-up, which differ between queue families: on
//! some devices a transfer-only family's queue answers microseconds sooner
//! than the compute queue, on others later. So the first small copy is made
//! on both and timed, and the faster queue is kept for every later one, unless
//! [`SmallCopyQueue`] names the queue.

use std::sync::Mutex;

use crate::runtime::copy_choice::SHADER_MIN_BYTES;
use crate::runtime::options::SmallCopyQueue;
use crate::types::CopyPath;

/// Timed copies on each queue in the measurement; the best of each counts.
pub(crate) const ROUNDS: usize = 3;

/// What the first small device-to-device copy measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueCalibration {
    /// The copy that was measured: the first small one by the GPU.
    pub path: CopyPath,
    /// Bytes of the copy that was measured.
    pub bytes: u64,
    /// The copy on the compute queue, submission to the end of the wait, best
    /// of the rounds (host clock).
    pub compute_seconds: f64,
    /// The same on the other queue (of the transfer family where there is one).
    pub other_seconds: f64,
    /// Whether small copies go to the other queue.
    pub other: bool,
}

/// Where the next small copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    Compute,
    Other,
    /// Both, timed; the faster is kept.
    Calibrate,
}

/// The context's mode, and what `Auto` measured.
#[derive(Debug, Default)]
pub(crate) struct CopyQueue {
    mode: SmallCopyQueue,
    measured: Mutex<Option<QueueCalibration>>,
}

impl CopyQueue {
    pub(crate) fn new(mode: SmallCopyQueue) -> Self {
        CopyQueue {
            mode,
            ..Default::default()
        }
    }

    /// The queue of a copy of `bytes`; larger copies, whose time is the GPU's,
    /// stay on the compute queue.
    pub(crate) fn choice(&self, bytes: u64) -> Choice {
        if bytes >= SHADER_MIN_BYTES {
            return Choice::Compute;
        }
        match self.mode {
            SmallCopyQueue::Compute => Choice::Compute,
            SmallCopyQueue::Other => Choice::Other,
            SmallCopyQueue::Auto => match self.calibration() {
                Some(c) if c.other => Choice::Other,
                Some(_) => Choice::Compute,
                None => Choice::Calibrate,
            },
        }
    }

    pub(crate) fn learn(&self, c: QueueCalibration) {
        *self.measured.lock().unwrap_or_else(|p| p.into_inner()) = Some(c);
    }

    pub(crate) fn calibration(&self) -> Option<QueueCalibration> {
        *self.measured.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibration(other: bool) -> QueueCalibration {
        QueueCalibration {
            path: CopyPath::DeviceToDevice,
            bytes: 4096,
            compute_seconds: 1.0,
            other_seconds: 1.0,
            other,
        }
    }

    #[test]
    fn fixed_modes_measure_nothing() {
        let q = CopyQueue::new(SmallCopyQueue::Other);
        assert_eq!(q.choice(4096), Choice::Other);
        assert_eq!(q.choice(SHADER_MIN_BYTES), Choice::Compute);
        assert_eq!(
            CopyQueue::new(SmallCopyQueue::Compute).choice(1),
            Choice::Compute
        );
    }

    #[test]
    fn small_copies_are_measured_once_and_large_ones_never() {
        let q = CopyQueue::new(SmallCopyQueue::Auto);
        assert_eq!(q.choice(4096), Choice::Calibrate);
        assert_eq!(q.choice(SHADER_MIN_BYTES), Choice::Compute);
        q.learn(calibration(true));
        assert_eq!(q.choice(1), Choice::Other);
        assert_eq!(q.choice(SHADER_MIN_BYTES - 1), Choice::Other);
        assert_eq!(q.choice(SHADER_MIN_BYTES), Choice::Compute);
        q.learn(calibration(false));
        assert_eq!(q.choice(4096), Choice::Compute);
        assert_eq!(q.calibration(), Some(calibration(false)));
    }
}
