//! How an upload into host-visible device memory is made, without Vulkan
//! calls: by the CPU's write or the GPU's copy, as the mode says, or as measured
//! per size class under [`MappedUpload::Auto`]. The CPU's cost grows with the
//! bytes faster than the GPU's, so a class where the GPU won decides every
//! larger class too, and one where the CPU won every smaller class.

use crate::runtime::calibrations::{Calibrations, Measured};
use crate::runtime::copy_choice::class_min_bytes;
use crate::runtime::options::MappedUpload;

pub(crate) use crate::memory::policy::MAPPED_MAX_BYTES;

/// Timed uploads of each way per calibration; the best of each counts. Near
/// the crossover the two differ by a few microseconds, so one more than the
/// device copy's calibration takes.
pub(crate) const ROUNDS: usize = 3;

/// How one upload into host-visible device memory goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The CPU writes it.
    Mapped,
    /// The GPU copies it from staging or imported memory.
    Copy,
    /// Both, timed; the faster is kept for the size class.
    Calibrate,
}

/// What the first upload of a size class measured under [`MappedUpload::Auto`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UploadCalibration {
    /// The class: uploads of `min_bytes` up to 4 × `min_bytes` bytes.
    pub min_bytes: u64,
    /// Bytes of the upload that was measured.
    pub bytes: u64,
    /// The CPU's write into device memory, best of the rounds (host clock).
    pub mapped_seconds: f64,
    /// The GPU's copy with its staging, submission and wait, best of the rounds.
    pub copy_seconds: f64,
    /// Whether the class is written by the CPU.
    pub mapped: bool,
}

/// The mode, and what `Auto` measured.
#[derive(Debug, Default)]
pub(crate) struct MappedUploads {
    pub(crate) mode: MappedUpload,
    calibrations: Calibrations<UploadCalibration>,
}

impl MappedUploads {
    pub(crate) fn new(mode: MappedUpload) -> Self {
        MappedUploads {
            mode,
            ..Default::default()
        }
    }

    /// How an upload of `bytes` into host-visible device memory goes.
    pub(crate) fn choice(&self, bytes: u64) -> Choice {
        match self.mode {
            MappedUpload::Never => Choice::Copy,
            MappedUpload::Always => Choice::Mapped,
            MappedUpload::Auto if bytes >= MAPPED_MAX_BYTES => Choice::Copy,
            MappedUpload::Auto => {
                let min = class_min_bytes(bytes);
                self.calibrations.with(|list| {
                    if list.iter().any(|c| !c.mapped && c.min_bytes <= min) {
                        Choice::Copy
                    } else if list.iter().any(|c| c.mapped && c.min_bytes >= min) {
                        Choice::Mapped
                    } else {
                        Choice::Calibrate
                    }
                })
            }
        }
    }

    pub(crate) fn learn(&self, c: UploadCalibration) {
        self.calibrations.learn(c);
    }

    pub(crate) fn calibrations(&self) -> Vec<UploadCalibration> {
        self.calibrations.all()
    }
}

impl Measured for UploadCalibration {
    type Class = u64;
    fn class(&self) -> u64 {
        self.min_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibration(min_bytes: u64, mapped: bool) -> UploadCalibration {
        UploadCalibration {
            min_bytes,
            bytes: min_bytes,
            mapped_seconds: 1.0,
            copy_seconds: 1.0,
            mapped,
        }
    }

    #[test]
    fn fixed_modes_ignore_size() {
        assert_eq!(
            MappedUploads::new(MappedUpload::Never).choice(4),
            Choice::Copy
        );
        let on = MappedUploads::new(MappedUpload::Always);
        assert_eq!(on.choice(4), Choice::Mapped);
        assert_eq!(on.choice(1 << 30), Choice::Mapped);
    }

    #[test]
    fn auto_measures_each_class_once_up_to_the_limit() {
        let m = MappedUploads::new(MappedUpload::Auto);
        assert_eq!(m.choice(4096), Choice::Calibrate);
        assert_eq!(m.choice(MAPPED_MAX_BYTES), Choice::Copy);
        assert_eq!(m.choice(MAPPED_MAX_BYTES - 1), Choice::Calibrate);
        m.learn(calibration(4096, true));
        assert_eq!(m.choice(4096), Choice::Mapped);
        assert_eq!(m.choice(16383), Choice::Mapped);
        assert_eq!(m.choice(16384), Choice::Calibrate);
    }

    #[test]
    fn a_class_decides_the_classes_its_winner_wins_more_clearly() {
        let m = MappedUploads::new(MappedUpload::Auto);
        m.learn(calibration(1 << 16, true));
        m.learn(calibration(1 << 20, false));
        // Smaller than a CPU win: the CPU; larger than a GPU win: the GPU.
        assert_eq!(m.choice(1 << 10), Choice::Mapped);
        assert_eq!(m.choice(2 << 20), Choice::Copy);
        // Between the two: measured.
        assert_eq!(m.choice(1 << 18), Choice::Calibrate);
        // A class measured again replaces its old result.
        m.learn(calibration(1 << 16, false));
        assert_eq!(m.calibrations().len(), 2);
        assert_eq!(m.choice(1 << 10), Choice::Calibrate);
        assert_eq!(m.choice(1 << 17), Choice::Copy);
    }
}
