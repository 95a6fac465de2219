//! How a copy between host memory and host-visible device memory is made,
//! without Vulkan calls: by the CPU (its writes for an upload, its streaming
//! loads for a readback) or by the GPU's copy, as the mode says, or as measured
//! per size class under [`MappedCopy::Auto`]. Uploads and readbacks are chosen
//! apart. The CPU's cost grows with the bytes faster than the GPU's, so a class
//! where the GPU won decides every larger class too, and one where the CPU won
//! every smaller class; inside a measured class, the CPU's time is scaled to
//! the copy's bytes (a streaming read of BAR memory runs at under 1 GB/s, so
//! the crossover can fall inside a class).

use crate::runtime::calibrations::{Calibrations, Measured};
use crate::runtime::copy_choice::class_min_bytes;
use crate::runtime::options::MappedCopy;
use crate::runtime::route::Via;

pub(crate) use crate::memory::policy::MAPPED_MAX_BYTES;

/// Timed copies of each way per calibration; the best of each counts (near
/// the crossover the two differ by a few microseconds).
pub(crate) const ROUNDS: usize = 3;

/// What the first upload or readback of a size class measured under
/// [`MappedCopy::Auto`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MappedCalibration {
    /// The class: copies of `min_bytes` up to 4 × `min_bytes` bytes.
    pub min_bytes: u64,
    /// Bytes of the copy that was measured.
    pub bytes: u64,
    /// The CPU's copy, best of the rounds (host clock).
    pub mapped_seconds: f64,
    /// The GPU's copy with its staging, submission and wait, best of the rounds.
    pub copy_seconds: f64,
    /// Whether the class is copied by the CPU.
    pub mapped: bool,
}

impl MappedCalibration {
    /// Whether the CPU makes a copy of `bytes` in this class. A class spans a
    /// factor of 4, and the CPU's time grows with the bytes where the GPU's
    /// barely moves (its submission dominates), so the CPU's measured time is
    /// scaled to the copy: a crossover inside the class is not taken on the
    /// wrong side.
    fn cpu_wins(&self, bytes: u64) -> bool {
        let cpu = self.mapped_seconds * bytes as f64 / self.bytes.max(1) as f64;
        cpu < self.copy_seconds
    }
}

/// The mode, and what `Auto` measured.
#[derive(Debug, Default)]
pub(crate) struct MappedChoices {
    pub(crate) mode: MappedCopy,
    calibrations: Calibrations<MappedCalibration>,
}

impl MappedChoices {
    pub(crate) fn new(mode: MappedCopy) -> Self {
        MappedChoices {
            mode,
            ..Default::default()
        }
    }

    /// The route of a copy of `bytes` between host memory and host-visible
    /// device memory: [`Via::Mapped`] (the CPU's), `gpu`, or None where its
    /// size class is not measured yet.
    pub(crate) fn route(&self, bytes: u64, gpu: Via) -> Option<Via> {
        let cpu = match self.mode {
            MappedCopy::Never => false,
            MappedCopy::Always => true,
            MappedCopy::Auto if bytes >= MAPPED_MAX_BYTES => false,
            MappedCopy::Auto => {
                let min = class_min_bytes(bytes);
                self.calibrations.with(|list| {
                    if list.iter().any(|c| !c.mapped && c.min_bytes < min) {
                        Some(false)
                    } else if list.iter().any(|c| c.mapped && c.min_bytes > min) {
                        Some(true)
                    } else {
                        let class = list.iter().find(|c| c.min_bytes == min);
                        class.map(|c| c.cpu_wins(bytes))
                    }
                })?
            }
        };
        Some(if cpu { Via::Mapped } else { gpu })
    }

    pub(crate) fn learn(&self, c: MappedCalibration) {
        self.calibrations.learn(c);
    }

    pub(crate) fn calibrations(&self) -> Vec<MappedCalibration> {
        self.calibrations.all()
    }
}

impl Measured for MappedCalibration {
    type Class = u64;
    fn class(&self) -> u64 {
        self.min_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU's route, and the GPU's that the tests offer.
    const CPU: Option<Via> = Some(Via::Mapped);
    const GPU: Option<Via> = Some(Via::Ring);

    /// A class measured at its smallest size, where the CPU took a fifth of
    /// the GPU's time (won) or twice it (lost).
    fn calibration(min_bytes: u64, mapped: bool) -> MappedCalibration {
        MappedCalibration {
            min_bytes,
            bytes: min_bytes,
            mapped_seconds: if mapped { 0.2 } else { 2.0 },
            copy_seconds: 1.0,
            mapped,
        }
    }

    #[test]
    fn fixed_modes_ignore_size() {
        assert_eq!(
            MappedChoices::new(MappedCopy::Never).route(4, Via::Ring),
            GPU
        );
        let on = MappedChoices::new(MappedCopy::Always);
        assert_eq!(on.route(4, Via::Ring), CPU);
        assert_eq!(on.route(1 << 30, Via::Ring), CPU);
    }

    #[test]
    fn auto_measures_each_class_once_up_to_the_limit() {
        let m = MappedChoices::new(MappedCopy::Auto);
        assert_eq!(m.route(4096, Via::Ring), None);
        assert_eq!(m.route(MAPPED_MAX_BYTES, Via::Ring), GPU);
        assert_eq!(m.route(MAPPED_MAX_BYTES - 1, Via::Ring), None);
        m.learn(calibration(4096, true));
        assert_eq!(m.route(4096, Via::Ring), CPU);
        assert_eq!(m.route(16383, Via::Ring), CPU);
        assert_eq!(m.route(16384, Via::Ring), None);
    }

    /// The 4 KiB class measured at `bytes`: the CPU took `cpu` seconds, the GPU `gpu`.
    fn class_4k(bytes: u64, cpu: f64, gpu: f64) -> MappedCalibration {
        MappedCalibration {
            min_bytes: 4096,
            bytes,
            mapped_seconds: cpu,
            copy_seconds: gpu,
            mapped: cpu < gpu,
        }
    }

    #[test]
    fn a_crossover_inside_a_class_is_taken_where_the_cpu_scales_past_the_gpu() {
        // As measured on an H100: the CPU's streaming read of 4 KiB 5 us, the
        // GPU's readback 14 us; the CPU's time grows with the bytes.
        let m = MappedChoices::new(MappedCopy::Auto);
        m.learn(class_4k(4096, 5e-6, 14e-6));
        assert_eq!(m.route(4096, Via::Ring), CPU);
        assert_eq!(m.route(11_000, Via::Ring), CPU);
        // 12 KiB would take the CPU 15 us.
        assert_eq!(m.route(12 << 10, Via::Ring), GPU);
        assert_eq!(m.route(16383, Via::Ring), GPU);
        // Smaller classes than a CPU win are the CPU's without measuring.
        assert_eq!(m.route(1000, Via::Ring), CPU);
        // A class measured where the GPU won, but at its largest size: the
        // smaller copies of the class are still the CPU's where it scales under.
        let m = MappedChoices::new(MappedCopy::Auto);
        m.learn(class_4k(16000, 20e-6, 14e-6));
        assert_eq!(m.route(4096, Via::Ring), CPU);
        assert_eq!(m.route(16000, Via::Ring), GPU);
        assert_eq!(m.route(1 << 20, Via::Ring), GPU);
    }

    #[test]
    fn a_class_decides_the_classes_its_winner_wins_more_clearly() {
        let m = MappedChoices::new(MappedCopy::Auto);
        m.learn(calibration(1 << 16, true));
        m.learn(calibration(1 << 20, false));
        // Smaller than a CPU win: the CPU; larger than a GPU win: the GPU.
        assert_eq!(m.route(1 << 10, Via::Ring), CPU);
        assert_eq!(m.route(2 << 20, Via::Ring), GPU);
        // Between the two: measured.
        assert_eq!(m.route(1 << 18, Via::Ring), None);
        // A class measured again replaces its old result.
        m.learn(calibration(1 << 16, false));
        assert_eq!(m.calibrations().len(), 2);
        assert_eq!(m.route(1 << 10, Via::Ring), None);
        assert_eq!(m.route(1 << 17, Via::Ring), GPU);
    }
}
