//! Which queue takes a blocking copy by the GPU (an upload, a readback or a
//! device-to-device copy), without Vulkan calls. A copy of up to a few MiB is
//! bounded by the driver's submission and wake-up, which differ between queue
//! families by microseconds: on some devices a transfer-only family answers
//! sooner than the compute queue, on others later, and transfer families
//! differ among themselves. So the first copy of each path and size class is
//! made on every queue and timed, and the fastest queue is kept for the class,
//! unless [`SmallCopyQueue`] names the queue. Larger copies, whose time is the
//! GPU's, stay on the compute queue.

use crate::runtime::calibrations::{Calibrations, Measured};
use crate::runtime::copy_choice::class_min_bytes;
use crate::runtime::options::SmallCopyQueue;
use crate::types::CopyPath;

/// Timed copies on each queue in the measurement; the best of each counts.
pub(crate) const ROUNDS: usize = 3;

/// Copies of this many bytes or more stay on the compute queue: every family
/// moves them at the bus's speed, and measuring them on each queue would cost
/// more than a choice could save.
pub(crate) const MAX_BYTES: u64 = 16 << 20;

/// One queue's time in a measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueTime {
    /// The queue's family.
    pub family: u32,
    /// The whole copy as its caller waits for it (staging and submission to
    /// the end of the wait), best of the rounds (host clock).
    pub seconds: f64,
}

/// What the first copy of a path and size class measured on each queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueCalibration {
    /// The measured copy's path.
    pub path: CopyPath,
    /// The class: copies of `min_bytes` up to 4 × `min_bytes` bytes.
    pub min_bytes: u64,
    /// Bytes of the copy that was measured.
    pub bytes: u64,
    /// The compute queue's time first, then each copy queue's in order.
    pub times: Vec<QueueTime>,
    /// The index in `times` of the queue the class's copies take.
    pub chosen: usize,
}

impl QueueCalibration {
    /// The chosen queue's family.
    pub fn family(&self) -> u32 {
        self.times[self.chosen].family
    }

    /// The fastest of `times` (the first of equals: the compute queue before
    /// any other).
    pub(crate) fn fastest(times: &[QueueTime]) -> usize {
        let mut best = 0;
        for (i, t) in times.iter().enumerate() {
            if t.seconds < times[best].seconds {
                best = i;
            }
        }
        best
    }
}

impl Measured for QueueCalibration {
    type Class = (CopyPath, u64);
    fn class(&self) -> (CopyPath, u64) {
        (self.path, self.min_bytes)
    }
}

/// Where the next copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    Compute,
    /// The copy queue of this index.
    Queue(usize),
    /// Every queue, timed; the fastest is kept for the class.
    Calibrate,
}

/// The context's mode, and what `Auto` measured.
#[derive(Debug, Default)]
pub(crate) struct CopyQueue {
    mode: SmallCopyQueue,
    calibrations: Calibrations<QueueCalibration>,
}

impl CopyQueue {
    pub(crate) fn new(mode: SmallCopyQueue) -> Self {
        CopyQueue {
            mode,
            ..Default::default()
        }
    }

    /// The queue of a copy of `bytes` on `path`.
    pub(crate) fn choice(&self, path: CopyPath, bytes: u64) -> Choice {
        if bytes >= MAX_BYTES {
            return Choice::Compute;
        }
        match self.mode {
            SmallCopyQueue::Compute => Choice::Compute,
            SmallCopyQueue::Other => Choice::Queue(0),
            SmallCopyQueue::Auto => {
                let class = (path, class_min_bytes(bytes));
                self.calibrations
                    .with(|list| match list.iter().find(|c| c.class() == class) {
                        Some(c) if c.chosen == 0 => Choice::Compute,
                        Some(c) => Choice::Queue(c.chosen - 1),
                        None => Choice::Calibrate,
                    })
            }
        }
    }

    pub(crate) fn learn(&self, c: QueueCalibration) {
        self.calibrations.learn(c);
    }

    /// The measurements so far, by path and then class.
    pub(crate) fn calibrations(&self) -> Vec<QueueCalibration> {
        self.calibrations.all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibration(path: CopyPath, bytes: u64, seconds: [f64; 3]) -> QueueCalibration {
        let times: Vec<_> = [0, 1, 3]
            .into_iter()
            .zip(seconds)
            .map(|(family, seconds)| QueueTime { family, seconds })
            .collect();
        QueueCalibration {
            path,
            min_bytes: class_min_bytes(bytes),
            bytes,
            chosen: QueueCalibration::fastest(&times),
            times,
        }
    }

    #[test]
    fn fixed_modes_measure_nothing() {
        let q = CopyQueue::new(SmallCopyQueue::Other);
        assert_eq!(q.choice(CopyPath::DeviceToHost, 4096), Choice::Queue(0));
        assert_eq!(q.choice(CopyPath::HostToDevice, MAX_BYTES), Choice::Compute);
        let q = CopyQueue::new(SmallCopyQueue::Compute);
        assert_eq!(q.choice(CopyPath::DeviceToDevice, 1), Choice::Compute);
    }

    #[test]
    fn each_path_and_class_is_measured_once_and_takes_its_fastest_queue() {
        let q = CopyQueue::new(SmallCopyQueue::Auto);
        let readback = CopyPath::DeviceToHost;
        assert_eq!(q.choice(readback, 4096), Choice::Calibrate);
        assert_eq!(q.choice(readback, MAX_BYTES), Choice::Compute);
        // Family 3, the second copy queue, is fastest at 4 KiB.
        q.learn(calibration(readback, 4096, [3.0, 2.0, 1.0]));
        assert_eq!(q.choice(readback, 4096), Choice::Queue(1));
        assert_eq!(q.choice(readback, 16383), Choice::Queue(1));
        // Another class, and another path of the same class, are measured apart.
        assert_eq!(q.choice(readback, 16384), Choice::Calibrate);
        assert_eq!(q.choice(CopyPath::HostToDevice, 4096), Choice::Calibrate);
        q.learn(calibration(readback, 1 << 20, [1.0, 2.0, 1.0]));
        assert_eq!(
            q.choice(readback, 1 << 20),
            Choice::Compute,
            "equals keep compute"
        );
        q.learn(calibration(readback, 8192, [3.0, 1.0, 2.0]));
        assert_eq!(
            q.choice(readback, 4096),
            Choice::Queue(0),
            "a class measured again"
        );
        let all = q.calibrations();
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].min_bytes, all[0].family()), (4096, 1));
        assert_eq!((all[1].min_bytes, all[1].family()), (1 << 20, 0));
    }
}
