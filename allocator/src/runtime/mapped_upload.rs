//! Uploads the CPU writes straight into host-visible device memory, as NVIDIA's
//! GDRCopy does for CUDA: no staging copy, no submission, no wait. A small upload
//! then costs the CPU's write alone, where the GPU path pays the driver's
//! submission and wake-up however few its bytes.
//!
//! The CPU writes such memory at PCIe speed, but reads it very slowly (the
//! seed's readback bug: plain loads; streaming loads, `mapped_readback.rs`, win
//! only for a few KiB). Uploads take this route only into buffers placed for it
//! ([`Role::DeviceMapped`](crate::Role::DeviceMapped)). Under
//! [`MappedCopy::Auto`] the first upload of each size class is made both ways
//! and timed; the faster way is kept for the class (`mapped_choice.rs`).
//!
//! Host writes before a `vkQueueSubmit` are visible to the work it submits
//! (Vulkan spec, "Host Write Ordering Guarantees"). Only host-coherent memory
//! takes the route: a flush writes back whole atoms, which could land over the
//! device's writes to neighbouring bytes. Every earlier blocking use of the
//! buffer has been waited for (after a timed-out wait, the device is first let
//! go idle), and an async copy holds its buffer until it is done. No device
//! write may land after the CPU's: copies into such memory end without a
//! barrier to the host (it costs microseconds) and mark the memory, which the
//! CPU then writes only after a readback from it has made them available
//! (`Context::device_writes_into`); kernels end with that barrier.

use std::sync::atomic::{fence, Ordering};
use std::time::Instant;

use crate::error::Result;
use crate::runtime::context::Context;
use crate::runtime::copy_choice::class_min_bytes;
use crate::runtime::mapped_choice::{MappedCalibration, ROUNDS};
use crate::runtime::options::MappedCopy;
use crate::runtime::plan::CopyPlan;
use crate::vk::region::Region;

impl Context {
    /// How uploads into host-visible device memory are made in this context: as
    /// [`ContextOptions::mapped_upload`](crate::ContextOptions::mapped_upload)
    /// says, or `Never` where the context has no such route (the Halide policies,
    /// emulated bugs, or no host-visible device memory off a small BAR heap).
    pub fn mapped_upload(&self) -> MappedCopy {
        if self.inner.host_routes.mapped {
            self.inner.mapped_uploads.mode
        } else {
            MappedCopy::Never
        }
    }

    /// The measurements `Auto` made so far, one per size class, smallest first.
    pub fn upload_calibrations(&self) -> Vec<MappedCalibration> {
        self.inner.mapped_uploads.calibrations()
    }

    /// Whether `region`'s memory takes copies by the CPU (uploads here,
    /// readbacks in `mapped_readback.rs`): this context has the route, and the
    /// memory is device-local, host-coherent and mapped.
    pub(crate) fn takes_mapped_copies(&self, region: &Region) -> bool {
        use ash::vk::MemoryPropertyFlags as F;
        self.inner.host_routes.mapped
            && !region.is_wrapped()
            && region.alloc.mapped.is_some()
            && region
                .alloc
                .flags
                .contains(F::DEVICE_LOCAL | F::HOST_COHERENT)
    }

    /// Writes `plan` from `host` into `region` at byte `dst_off` with the CPU.
    /// The caller checked that the plan lies inside both.
    pub(crate) fn write_mapped(
        &self,
        plan: &CopyPlan,
        host: &[u8],
        region: &Region,
        dst_off: u64,
    ) -> Result<()> {
        // Work left running by a wait that timed out may still write here; the
        // GPU's copy would queue behind it, the CPU's write does not.
        self.inner.device.settle();
        let base = region.host_ptr()?;
        let chunk = plan.chunk as usize;
        plan.for_each_chunk(|s, d| {
            // SAFETY: the source chunk lies inside `host` and the destination chunk
            // inside the region's mapping (both checked by the caller); the two do
            // not overlap, as one is the caller's host memory and the other device
            // memory. Raw pointers, not slices: views of the same region may be
            // written by other copies, which the caller orders.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    host.as_ptr().add(s as usize),
                    base.as_ptr().add((dst_off + d) as usize),
                    chunk,
                );
            }
        });
        // Write-combined stores drain before anything that follows, the
        // submission that reads them included; the memory is coherent, so
        // nothing needs flushing.
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// Makes the first upload of a size class both ways, `copy` and the CPU's
    /// write, once untimed (first touches: an import, a staging chunk, page
    /// faults) and then [`ROUNDS`] times each, interleaved, and keeps the
    /// faster for the class. Both write the same bytes, so the result is the
    /// upload either way. Returns whether the class is mapped, and `copy`'s last
    /// result.
    pub(crate) fn calibrate_upload<T>(
        &self,
        plan: &CopyPlan,
        host: &[u8],
        region: &Region,
        dst_off: u64,
        mut copy: impl FnMut() -> Result<T>,
    ) -> Result<(bool, T)> {
        let (mut best_copy, mut best_mapped) = (f64::INFINITY, f64::INFINITY);
        copy()?;
        self.write_mapped(plan, host, region, dst_off)?;
        let mut last = None;
        for _ in 0..ROUNDS {
            let t = Instant::now();
            last = Some(copy()?);
            best_copy = best_copy.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            self.write_mapped(plan, host, region, dst_off)?;
            best_mapped = best_mapped.min(t.elapsed().as_secs_f64());
        }
        let mapped = best_mapped < best_copy;
        self.inner.mapped_uploads.learn(MappedCalibration {
            min_bytes: class_min_bytes(plan.bytes()),
            bytes: plan.bytes(),
            mapped_seconds: best_mapped,
            copy_seconds: best_copy,
            mapped,
        });
        Ok((mapped, last.expect("at least one round")))
    }
}
