//! Readbacks the CPU reads straight out of host-visible device memory with
//! streaming loads (`stream_load.rs`), as GDRCopy reads small CUDA buffers: no
//! staging copy, no submission, no wait. A small readback by the GPU costs at
//! least the driver's submission and wake-up; the CPU's read costs a PCIe round
//! trip per few lines, so it wins only below a few KiB on a discrete GPU, and
//! loses badly above. That is the seed's bug, so the route is never assumed:
//! under [`MappedCopy::Auto`] the first readback of each size class is made both
//! ways and timed, and the faster way is kept for the class (`mapped_choice.rs`),
//! only for buffers placed in such memory (under 4 MiB).
//!
//! The CPU reads only what the device has finished writing and made available
//! to the host: memory whose last device writes ended with a barrier to the
//! host (kernels, readbacks) and were waited for. Copies into such memory end
//! without that barrier and mark it (`Context::device_writes_into`); marked
//! memory is read back by the GPU, whose readback clears the mark. Only
//! host-coherent memory takes the route, so nothing needs invalidating.

use std::time::Instant;

use crate::error::Result;
use crate::runtime::context::Context;
use crate::runtime::copy_choice::class_min_bytes;
use crate::runtime::mapped_choice::{MappedCalibration, ROUNDS};
use crate::runtime::options::MappedCopy;
use crate::runtime::plan::CopyPlan;
use crate::runtime::stream_load;
use crate::vk::region::Region;

/// Calibration stops once the CPU's read took this many times the GPU's: the
/// class is the GPU's, and more rounds would only cost time.
const CLEARLY_SLOWER: f64 = 4.0;

impl Context {
    /// How readbacks from host-visible device memory are made in this context:
    /// as [`ContextOptions::mapped_readback`](crate::ContextOptions::mapped_readback)
    /// says, or `Never` where the context has no such memory for its buffers
    /// (see [`Context::mapped_upload`]).
    pub fn mapped_readback(&self) -> MappedCopy {
        if self.inner.host_routes.mapped {
            self.inner.mapped_readbacks.mode
        } else {
            MappedCopy::Never
        }
    }

    /// The measurements of readbacks that `Auto` made so far, one per size
    /// class, smallest first.
    pub fn readback_calibrations(&self) -> Vec<MappedCalibration> {
        self.inner.mapped_readbacks.calibrations()
    }

    /// Reads `plan` from `region` at byte `src_off` into `host` with the CPU.
    /// The caller checked that the plan lies inside both, and that the device's
    /// writes to the region are available to the host.
    pub(crate) fn read_mapped(
        &self,
        plan: &CopyPlan,
        region: &Region,
        src_off: u64,
        host: &mut [u8],
    ) -> Result<()> {
        // Work left running by a wait that timed out may still write here.
        self.inner.device.settle();
        let base = region.host_ptr()?;
        let chunk = plan.chunk as usize;
        let out = host.as_mut_ptr();
        plan.for_each_chunk(|s, d| {
            // SAFETY: the source chunk lies inside the region's mapping and the
            // destination chunk inside `host` (both checked by the caller); the
            // mapping is whole pages, so the 16-byte blocks around the chunk are
            // mapped; device memory and the caller's host memory do not overlap.
            unsafe {
                stream_load::copy(
                    base.as_ptr().add((src_off + s) as usize),
                    out.add(d as usize),
                    chunk,
                )
            }
        });
        Ok(())
    }

    /// Makes the first readback of a size class both ways, `copy` and the CPU's
    /// read, into the host memory `mem` (the view's bytes start at `offset`):
    /// each once untimed (first touches: the queue's choice, staging, page
    /// faults), then up to [`ROUNDS`] times each, the CPU first, and keeps the
    /// faster for the class. The GPU's copy is the last to write the host
    /// memory, so a wrong copy shows. Returns whether the class is mapped, and
    /// `copy`'s last result.
    pub(crate) fn calibrate_readback<T>(
        &self,
        plan: &CopyPlan,
        (region, src_off): (&Region, u64),
        (mem, offset): (&mut [u8], usize),
        mut copy: impl FnMut(&mut [u8]) -> Result<T>,
    ) -> Result<(bool, T)> {
        let (mut best_copy, mut best_mapped) = (f64::INFINITY, f64::INFINITY);
        // The first reads of a mapping fault its pages in: untimed.
        self.read_mapped(plan, region, src_off, &mut mem[offset..])?;
        let mut last = copy(mem)?;
        for _ in 0..ROUNDS {
            let t = Instant::now();
            self.read_mapped(plan, region, src_off, &mut mem[offset..])?;
            best_mapped = best_mapped.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            last = copy(mem)?;
            best_copy = best_copy.min(t.elapsed().as_secs_f64());
            if best_mapped > CLEARLY_SLOWER * best_copy {
                break;
            }
        }
        let mapped = best_mapped < best_copy;
        self.inner.mapped_readbacks.learn(MappedCalibration {
            min_bytes: class_min_bytes(plan.bytes()),
            bytes: plan.bytes(),
            mapped_seconds: best_mapped,
            copy_seconds: best_copy,
            mapped,
        });
        Ok((mapped, last))
    }
}
