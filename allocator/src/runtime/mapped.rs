//! Copies the CPU makes straight into or out of host-visible device memory, as
//! NVIDIA's GDRCopy does for CUDA: no staging copy, no submission, no wait. A
//! small copy by the GPU costs at least the driver's submission and wake-up
//! however few its bytes; the CPU's costs its own writes (an upload, at PCIe
//! speed) or streaming loads (a readback, `stream_load.rs`: a PCIe round trip
//! per few lines, so it wins only below a few KiB on a discrete GPU and loses
//! badly above, which is the seed's bug). So the route is never assumed: under
//! [`MappedCopy::Auto`] the first copy of each size class is made both ways and
//! timed, and the faster way is kept for the class (`mapped_choice.rs`). Only
//! buffers placed for it take the route
//! ([`Role::DeviceMapped`](crate::Role::DeviceMapped)).
//!
//! Only host-coherent memory takes it: nothing needs flushing or invalidating,
//! and a flush, which writes back whole atoms, could land over the device's
//! writes to neighbouring bytes. Host writes before a `vkQueueSubmit` are
//! visible to the work it submits (Vulkan spec, "Host Write Ordering
//! Guarantees"). Every earlier blocking use of the buffer has been waited for
//! (after a timed-out wait, the device is first let go idle), and an async copy
//! holds its buffer until it is done. The CPU reads, and writes over, only what
//! the device has made available to the host: copies into such memory end
//! without a barrier to the host (it costs microseconds) and mark the memory
//! (`Context::device_writes_into`); marked memory goes by the GPU, whose
//! readback clears the mark. Kernels end with that barrier.

use std::sync::atomic::{fence, Ordering};
use std::time::Instant;

use crate::error::Result;
use crate::runtime::context::Context;
use crate::runtime::copy_choice::class_min_bytes;
use crate::runtime::mapped_choice::{MappedCalibration, MappedChoices, ROUNDS};
use crate::runtime::options::MappedCopy;
use crate::runtime::plan::CopyPlan;
use crate::runtime::stream_load;
use crate::runtime::transfer::HostMem;
use crate::types::CopyPath;
use crate::vk::region::Region;

/// Measuring stops once the CPU took this many times the GPU's time: the class
/// is the GPU's, and more rounds would only cost time.
const CLEARLY_SLOWER: f64 = 4.0;

impl Context {
    /// How uploads into host-visible device memory are made in this context: as
    /// [`ContextOptions::mapped_upload`](crate::ContextOptions::mapped_upload)
    /// says, or `Never` where the context has no such route (Halide's copies,
    /// see [`CopyModel`](crate::runtime::options::CopyModel), or no host-visible
    /// device memory off a small BAR heap).
    pub fn mapped_upload(&self) -> MappedCopy {
        self.mapped_mode(CopyPath::HostToDevice)
    }

    /// How readbacks from host-visible device memory are made in this context:
    /// as [`ContextOptions::mapped_readback`](crate::ContextOptions::mapped_readback)
    /// says, or `Never` where the context has no such memory for its buffers
    /// (see [`Context::mapped_upload`]).
    pub fn mapped_readback(&self) -> MappedCopy {
        self.mapped_mode(CopyPath::DeviceToHost)
    }

    /// The measurements of uploads that `Auto` made so far, one per size
    /// class, smallest first.
    pub fn upload_calibrations(&self) -> Vec<MappedCalibration> {
        self.mapped_choices(CopyPath::HostToDevice).calibrations()
    }

    /// The measurements of readbacks that `Auto` made so far, one per size
    /// class, smallest first.
    pub fn readback_calibrations(&self) -> Vec<MappedCalibration> {
        self.mapped_choices(CopyPath::DeviceToHost).calibrations()
    }

    fn mapped_mode(&self, path: CopyPath) -> MappedCopy {
        match self.inner.host_routes.mapped {
            true => self.mapped_choices(path).mode,
            false => MappedCopy::Never,
        }
    }

    /// The mode and measurements of uploads (`HostToDevice`) or readbacks.
    pub(crate) fn mapped_choices(&self, path: CopyPath) -> &MappedChoices {
        match path {
            CopyPath::HostToDevice => &self.inner.mapped_uploads,
            _ => &self.inner.mapped_readbacks,
        }
    }

    /// Whether `region`'s memory takes copies by the CPU: this context has the
    /// route, and the memory is device-local, host-coherent and mapped.
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

    /// Copies `plan` between host memory (its view's bytes from `offset`) and
    /// `region` at byte `at` with the CPU, the way `mem` says. The caller
    /// checked that the plan lies inside both, and for a readback that the
    /// device's writes to the region are available to the host.
    pub(crate) fn cpu_copy(
        &self,
        plan: &CopyPlan,
        mem: HostMem<'_>,
        offset: usize,
        (region, at): (&Region, u64),
    ) -> Result<()> {
        // Work left running by a wait that timed out may still write here; the
        // GPU's copy would queue behind it, the CPU's does not.
        self.inner.device.settle();
        let base = region.host_ptr()?;
        let chunk = plan.chunk as usize;
        match mem {
            HostMem::Upload(host) => {
                let host = &host[offset..];
                plan.for_each_chunk(|s, d| {
                    // SAFETY: the source chunk lies inside `host` and the destination
                    // chunk inside the region's mapping (both checked by the caller);
                    // the caller's host memory and device memory do not overlap. Raw
                    // pointers, not slices: views of the same region may be written
                    // by other copies, which the caller orders.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            host.as_ptr().add(s as usize),
                            base.as_ptr().add((at + d) as usize),
                            chunk,
                        );
                    }
                });
                // Write-combined stores drain before anything that follows, the
                // submission that reads them included.
                fence(Ordering::SeqCst);
            }
            HostMem::Readback(host) => {
                let out = host[offset..].as_mut_ptr();
                plan.for_each_chunk(|s, d| {
                    // SAFETY: the source chunk lies inside the region's mapping and
                    // the destination chunk inside the host memory (both checked by
                    // the caller); the mapping is whole pages, so the 16-byte blocks
                    // around the chunk are mapped; device memory and the caller's
                    // host memory do not overlap.
                    unsafe {
                        stream_load::copy(
                            base.as_ptr().add((at + s) as usize),
                            out.add(d as usize),
                            chunk,
                        )
                    }
                });
            }
        }
        Ok(())
    }

    /// Makes the first copy of a size class both ways, the CPU's (`cpu`) and
    /// the GPU's (`gpu`), into the same memory: each once untimed (first
    /// touches: an import, staging, page faults, the queue's choice), then up
    /// to [`ROUNDS`] times each, the CPU first, and keeps the faster for the
    /// class. The GPU's copy is the last to write, so a wrong copy shows.
    /// Returns whether the class goes by the CPU, and `gpu`'s last result.
    pub(crate) fn measure_mapped<T>(
        &self,
        path: CopyPath,
        plan: &CopyPlan,
        mem: &mut HostMem<'_>,
        mut cpu: impl FnMut(HostMem<'_>) -> Result<()>,
        mut gpu: impl FnMut(HostMem<'_>) -> Result<T>,
    ) -> Result<(bool, T)> {
        let (mut best_gpu, mut best_cpu) = (f64::INFINITY, f64::INFINITY);
        cpu(mem.reborrow())?;
        let mut last = gpu(mem.reborrow())?;
        for _ in 0..ROUNDS {
            let t = Instant::now();
            cpu(mem.reborrow())?;
            best_cpu = best_cpu.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            last = gpu(mem.reborrow())?;
            best_gpu = best_gpu.min(t.elapsed().as_secs_f64());
            if best_cpu > CLEARLY_SLOWER * best_gpu {
                break;
            }
        }
        let mapped = best_cpu < best_gpu;
        self.mapped_choices(path).learn(MappedCalibration {
            min_bytes: class_min_bytes(plan.bytes()),
            bytes: plan.bytes(),
            mapped_seconds: best_cpu,
            copy_seconds: best_gpu,
            mapped,
        });
        Ok((mapped, last))
    }
}
