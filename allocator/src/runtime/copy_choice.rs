//! How a device-to-device copy is made, without Vulkan calls: whether the copy
//! kernel can do a plan and with which parameters, and the measured choice
//! between the kernel and `vkCmdCopyBuffer` per size class.
//!
//! The kernel copies 16-byte words where every row starts at a 16-byte boundary
//! on both sides (a row's last 4, 8 or 12 bytes as 4-byte words), and 4-byte
//! words otherwise. Plans with offsets, chunk or strides that are not multiples
//! of 4 bytes, more than two outer dimensions, or a side longer than
//! `maxStorageBufferRange` are left to `vkCmdCopyBuffer`, which has no alignment
//! rules and no range limit.

use crate::runtime::calibrations::{Calibrations, Measured};
use crate::runtime::options::DeviceCopy;
use crate::runtime::plan::CopyPlan;
use crate::runtime::route::Via;
use crate::vk::copy_kernel::{GROUP_SIZE, PARAM_WORDS};

/// Under [`DeviceCopy::Auto`], smaller copies use `vkCmdCopyBuffer`: they are
/// bounded by submission latency, where neither path wins.
pub(crate) const SHADER_MIN_BYTES: u64 = 1 << 20;

/// Workgroups per dispatch at most (the least `maxComputeWorkGroupCount[0]` a
/// device may have); the kernel's grid-stride loop covers larger copies.
pub(crate) const MAX_GROUPS: u64 = 65535;

/// Copies of each path per calibration; the best time of each counts.
pub(crate) const CALIBRATION_ROUNDS: usize = 3;

/// The device limits a kernel plan must respect.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `minStorageBufferOffsetAlignment`.
    pub(crate) min_align: u64,
    /// `maxStorageBufferRange`.
    pub(crate) max_range: u64,
    /// Workgroups per dispatch at most.
    pub(crate) max_groups: u64,
}

/// The bound bytes of one side: `offset..offset + range` of its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) offset: u64,
    pub(crate) range: u64,
}

/// One dispatch of the copy kernel for a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelPlan {
    pub(crate) src: Span,
    pub(crate) dst: Span,
    /// The kernel's push constants (`Params` in copy.wgsl).
    pub(crate) params: [u32; PARAM_WORDS],
    pub(crate) groups: u32,
    /// Whether rows are copied as 16-byte words.
    pub(crate) wide: bool,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The range bound for bytes `start..end`: from the highest offset at or below
/// `start` that is a multiple of both the device's alignment and 16 (so wide word
/// indices stay whole). None when it is longer than a binding may be.
fn span(start: u64, end: u64, limits: &Limits) -> Option<Span> {
    let a = limits.min_align.max(1);
    let align = a / gcd(a, 16) * 16;
    let offset = start / align * align;
    let range = end - offset;
    (range <= limits.max_range).then_some(Span { offset, range })
}

/// The kernel dispatch that copies `plan` from byte `src_off` of one buffer to byte
/// `dst_off` of another, or None where the kernel does not apply (see the module
/// documentation).
pub(crate) fn kernel_plan(
    plan: &CopyPlan,
    src_off: u64,
    dst_off: u64,
    limits: &Limits,
) -> Option<KernelPlan> {
    if plan.chunks() == 0 || plan.dims.len() > 2 {
        return None;
    }
    let s0 = src_off + plan.src_begin;
    let d0 = dst_off + plan.dst_begin;
    let strides = plan.dims.iter().flat_map(|d| [d.src_stride, d.dst_stride]);
    if [s0, d0, plan.chunk]
        .into_iter()
        .chain(strides.clone())
        .any(|x| x % 4 != 0)
    {
        return None;
    }
    let wide_rows = [s0, d0].into_iter().chain(strides).all(|x| x % 16 == 0);
    let (wide, narrow) = if wide_rows {
        (plan.chunk / 16, plan.chunk % 16 / 4)
    } else {
        (0, plan.chunk / 4)
    };
    let src = span(s0, src_off + plan.src_end(), limits)?;
    let dst = span(d0, dst_off + plan.dst_end(), limits)?;
    let (rs, rd) = (s0 - src.offset, d0 - dst.offset);
    let dim = |i: usize| {
        plan.dims.get(i).map_or((1, 0, 0), |d| {
            (d.extent, d.src_stride / 4, d.dst_stride / 4)
        })
    };
    let (rows, src_row, dst_row) = dim(0);
    let (planes, src_plane, dst_plane) = dim(1);
    // The loop index must not overflow 32 bits on its last step.
    let step = limits.max_groups * GROUP_SIZE;
    let total = wide.max(narrow) * rows * planes;
    if total > u64::from(u32::MAX) - step {
        return None;
    }
    let words = [
        rs / 16,
        rd / 16,
        wide,
        (rs + wide * 16) / 4,
        (rd + wide * 16) / 4,
        narrow,
        rows,
        planes,
        src_row,
        dst_row,
        src_plane,
        dst_plane,
    ];
    let mut params = [0u32; PARAM_WORDS];
    for (p, w) in params.iter_mut().zip(words) {
        *p = u32::try_from(w).ok()?;
    }
    let groups = total.div_ceil(GROUP_SIZE).clamp(1, limits.max_groups) as u32;
    Some(KernelPlan {
        src,
        dst,
        params,
        groups,
        wide: wide_rows && wide > 0,
    })
}

/// One measurement of both paths on a copy, and the choice it made for the copy's
/// size class: copies of `min_bytes` up to 4 x `min_bytes`, contiguous or not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CopyCalibration {
    /// Smallest size of the class, a power of 4.
    pub min_bytes: u64,
    /// Whether the class is of copies in one contiguous run.
    pub contiguous: bool,
    /// Bytes of the copy that was measured.
    pub bytes: u64,
    /// Best time of `vkCmdCopyBuffer` on the queue such copies take, the whole
    /// copy as its caller waits for it (host clock), in seconds.
    pub transfer_seconds: f64,
    /// Best time of the copy shader (on the compute queue), the same way.
    pub shader_seconds: f64,
    /// [`DeviceCopy::Transfer`] or [`DeviceCopy::Shader`].
    pub chosen: DeviceCopy,
}

/// The smallest size of the class of a copy of `bytes` (at least 1).
pub(crate) fn class_min_bytes(bytes: u64) -> u64 {
    1 << (bytes.max(1).ilog2() / 2 * 2)
}

/// A context's device-copy mode and its measurements.
#[derive(Debug, Default)]
pub(crate) struct DeviceCopies {
    mode: DeviceCopy,
    calibrations: Calibrations<CopyCalibration>,
}

impl DeviceCopies {
    pub(crate) fn new(mode: DeviceCopy) -> Self {
        DeviceCopies {
            mode,
            ..Default::default()
        }
    }

    pub(crate) fn mode(&self) -> DeviceCopy {
        self.mode
    }

    /// The route of a copy of `bytes` ([`Via::Transfer`] or [`Via::Shader`]),
    /// before the kernel's own conditions; None where its size class is not
    /// measured yet.
    pub(crate) fn route(&self, bytes: u64, contiguous: bool) -> Option<Via> {
        match self.mode {
            DeviceCopy::Transfer => Some(Via::Transfer),
            DeviceCopy::Shader => Some(Via::Shader),
            DeviceCopy::Auto if bytes < SHADER_MIN_BYTES => Some(Via::Transfer),
            DeviceCopy::Auto => {
                let min = class_min_bytes(bytes);
                self.calibrations.with(|list| {
                    let class = list.iter().find(|c| c.class() == (min, contiguous));
                    class.map(|c| match c.chosen {
                        DeviceCopy::Shader => Via::Shader,
                        _ => Via::Transfer,
                    })
                })
            }
        }
    }

    /// Keeps a measurement; a later one of the same class replaces it.
    pub(crate) fn learn(&self, c: CopyCalibration) {
        self.calibrations.learn(c);
    }

    pub(crate) fn calibrations(&self) -> Vec<CopyCalibration> {
        self.calibrations.all()
    }
}

impl Measured for CopyCalibration {
    type Class = (u64, bool);
    fn class(&self) -> (u64, bool) {
        (self.min_bytes, self.contiguous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::plan::PlanDim;

    const LIMITS: Limits = Limits {
        min_align: 64,
        max_range: 1 << 30,
        max_groups: MAX_GROUPS,
    };

    fn contiguous(bytes: u64) -> CopyPlan {
        CopyPlan {
            chunk: bytes,
            dims: Vec::new(),
            src_begin: 0,
            dst_begin: 0,
        }
    }

    #[test]
    fn aligned_contiguous_copy_is_wide_with_a_tail() {
        let k = kernel_plan(&contiguous(1000), 128, 256, &LIMITS).unwrap();
        assert!(k.wide);
        assert_eq!(
            k.src,
            Span {
                offset: 128,
                range: 1000
            }
        );
        assert_eq!(
            k.dst,
            Span {
                offset: 256,
                range: 1000
            }
        );
        // 62 wide words, then 2 narrow words at u32 index 248.
        assert_eq!(&k.params[..8], &[0, 0, 62, 248, 248, 2, 1, 1]);
        assert_eq!(k.groups, 1);
    }

    #[test]
    fn offsets_below_the_alignment_are_indices_in_the_range() {
        // Source at byte 80: bound from 64, first wide word 1.
        let k = kernel_plan(&contiguous(4096), 80, 0, &LIMITS).unwrap();
        assert_eq!(
            k.src,
            Span {
                offset: 64,
                range: 4112
            }
        );
        assert_eq!(&k.params[..6], &[1, 0, 256, 1028, 1024, 0]);
    }

    #[test]
    fn four_byte_offsets_copy_narrow_words() {
        let k = kernel_plan(&contiguous(4096), 4, 0, &LIMITS).unwrap();
        assert!(!k.wide);
        assert_eq!(&k.params[..6], &[0, 0, 0, 1, 0, 1024]);
        // An alignment of 4 still binds from a multiple of 16.
        let four = Limits {
            min_align: 4,
            ..LIMITS
        };
        let k = kernel_plan(&contiguous(64), 40, 0, &four).unwrap();
        assert_eq!(k.src.offset, 32);
        assert!(!k.wide);
    }

    #[test]
    fn unaligned_or_deep_plans_are_left_to_transfer() {
        assert!(kernel_plan(&contiguous(1002), 0, 0, &LIMITS).is_none());
        assert!(kernel_plan(&contiguous(1000), 2, 0, &LIMITS).is_none());
        let d = |extent, s, t| PlanDim {
            extent,
            src_stride: s,
            dst_stride: t,
        };
        let mut deep = contiguous(16);
        deep.dims = vec![d(2, 32, 16), d(2, 64, 32), d(2, 128, 64)];
        assert!(kernel_plan(&deep, 0, 0, &LIMITS).is_none());
        let small = Limits {
            max_range: 1024,
            ..LIMITS
        };
        assert!(kernel_plan(&contiguous(2048), 0, 0, &small).is_none());
    }

    #[test]
    fn rows_and_planes_carry_word_strides() {
        // A 64x64 i32 crop at (32, 32) of 128x128, in 4 planes.
        let plan = CopyPlan {
            chunk: 256,
            dims: vec![
                PlanDim {
                    extent: 64,
                    src_stride: 512,
                    dst_stride: 256,
                },
                PlanDim {
                    extent: 4,
                    src_stride: 65536,
                    dst_stride: 16384,
                },
            ],
            src_begin: (32 + 32 * 128) * 4,
            dst_begin: 0,
        };
        let k = kernel_plan(&plan, 0, 0, &LIMITS).unwrap();
        assert!(k.wide);
        assert_eq!(k.src.offset, 16512);
        assert_eq!(&k.params[6..], &[64, 4, 128, 64, 16384, 4096]);
        assert_eq!(k.groups, 16);
    }

    #[test]
    fn size_classes_are_powers_of_four() {
        assert_eq!(class_min_bytes(1 << 20), 1 << 20);
        assert_eq!(class_min_bytes((1 << 22) - 1), 1 << 20);
        assert_eq!(class_min_bytes(3 << 23), 1 << 24);
    }

    #[test]
    fn auto_calibrates_once_per_class() {
        let d = DeviceCopies::new(DeviceCopy::Auto);
        assert_eq!(d.route(4096, true), Some(Via::Transfer));
        assert_eq!(d.route(1 << 26, true), None);
        d.learn(CopyCalibration {
            min_bytes: 1 << 26,
            contiguous: true,
            bytes: 1 << 26,
            transfer_seconds: 2.0,
            shader_seconds: 1.0,
            chosen: DeviceCopy::Shader,
        });
        assert_eq!(d.route(1 << 27, true), Some(Via::Shader));
        assert_eq!(d.route(1 << 27, false), None);
        assert_eq!(d.route(1 << 28, true), None);
        let forced = DeviceCopies::new(DeviceCopy::Shader);
        assert_eq!(forced.route(16, false), Some(Via::Shader));
    }
}
