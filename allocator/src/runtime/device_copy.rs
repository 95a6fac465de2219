//! Device-to-device copies by the copy kernel (`shaders/copy.wgsl`): a
//! grid-stride compute shader with 16-byte loads, which reaches more of the
//! memory bandwidth than `vkCmdCopyBuffer` on some devices and less on others.
//! [`DeviceCopy`] says which path is taken; under `Auto` the first copy of each
//! size class is made both ways and timed, and the faster path is kept for the
//! class (see [`CopyCalibration`]).
//!
//! The kernel runs in the context's one submission per copy, between the
//! submitter's barriers: every earlier transfer or shader write is visible to it,
//! and its writes are visible to every later transfer, shader or host access.
//! Copies within one region go through a temporary as on the transfer path, with
//! a shader-write barrier between the two dispatches.

use ash::vk;

use crate::error::Result;
use crate::memory::policy::Role;
use crate::runtime::context::Context;
use crate::runtime::copy_choice::{
    class_min_bytes, kernel_plan, CopyCalibration, KernelPlan, Limits, CALIBRATION_ROUNDS,
    MAX_GROUPS,
};
use crate::runtime::copy_queue::QueueCalibration;
use crate::runtime::options::DeviceCopy;
use crate::runtime::plan::CopyPlan;
use crate::runtime::route::Via;
use crate::vk::copy_kernel::{shader_write_barrier, Bound, Leg};
use crate::vk::region::Region;
use crate::vk::submit::{HostAccess, Submitter};

fn leg(k: &KernelPlan, src: vk::Buffer, dst: vk::Buffer) -> Leg {
    Leg {
        src: Bound {
            buffer: src,
            offset: k.src.offset,
            range: k.src.range,
        },
        dst: Bound {
            buffer: dst,
            offset: k.dst.offset,
            range: k.dst.range,
        },
        params: k.params,
        groups: k.groups,
    }
}

impl Context {
    /// How device-to-device copies are made in this context: as
    /// [`ContextOptions::device_copy`](crate::ContextOptions::device_copy) says,
    /// except that `Auto` is `Transfer` under the Halide policies and emulated bugs.
    pub fn device_copy(&self) -> DeviceCopy {
        self.inner.device_copies.mode()
    }

    /// The measurements `Auto` made so far, one per size class, smallest first.
    pub fn device_copy_calibrations(&self) -> Vec<CopyCalibration> {
        self.inner.device_copies.calibrations()
    }

    /// What the first copy of each path and size class by the GPU measured on
    /// each queue, and the queue it chose: none before such a copy, or where
    /// there is no queue but the compute one for it.
    pub fn copy_queue_calibrations(&self) -> Vec<QueueCalibration> {
        self.inner.copy_queue.calibrations()
    }

    fn copy_limits(&self) -> Limits {
        let info = self.info();
        Limits {
            min_align: info.min_storage_buffer_offset_alignment,
            max_range: u64::from(info.max_storage_buffer_range),
            max_groups: u64::from(info.max_compute_work_group_count[0]).clamp(1, MAX_GROUPS),
        }
    }

    /// Copies `plan` from byte `src.1` of one region to byte `dst.1` of another (or
    /// the same) with the copy kernel, where the context's choice and the plan allow.
    /// `transfer` makes the same copy with `vkCmdCopyBuffer` on the queue such
    /// copies take, for calibration; it is used only between distinct regions.
    /// Returns None when the copy is left to the caller's `vkCmdCopyBuffer`
    /// path, else whether it is done with, when profiling, its GPU time in ns
    /// (none for a copy that calibrated, timed by the host). The caller has marked `dst`'s region
    /// (`device_writes_into`): the copy ends without a barrier to the host.
    pub(crate) fn device_copy_by_shader(
        &self,
        sub: &Submitter,
        plan: &CopyPlan,
        src: (&Region, u64),
        dst: (&Region, u64),
        transfer: &dyn Fn() -> Result<()>,
    ) -> Result<Option<(Via, Option<u64>)>> {
        let choices = &self.inner.device_copies;
        let route = choices.route(plan.bytes(), plan.chunks() == 1);
        if route == Some(Via::Transfer) || !sub.queue().compute {
            return Ok(None);
        }
        let limits = self.copy_limits();
        let (sb, db) = (src.0.vk_buffer(), dst.0.vk_buffer());
        if !std::ptr::eq(src.0, dst.0) {
            let Some(k) = kernel_plan(plan, src.1, dst.1, &limits) else {
                return Ok(None);
            };
            let legs = [leg(&k, sb, db)];
            if route.is_none() {
                return self.calibrate(sub, plan, &legs, transfer).map(Some);
            }
            let gpu = self.run_legs(sub, &legs, self.profiling())?;
            return Ok(Some((Via::Shader, gpu)));
        }
        // One region: the boxes may overlap, so the copy cannot be repeated to
        // calibrate; such copies follow the class's choice once it is known.
        if route.is_none() {
            return Ok(None);
        }
        let (into, out_of) = (plan.with_dense_dst(), plan.with_dense_src());
        let (Some(a), Some(b)) = (
            kernel_plan(&into, src.1, 0, &limits),
            kernel_plan(&out_of, 0, dst.1, &limits),
        ) else {
            return Ok(None);
        };
        let temp = self.allocate_region(Role::Device, plan.bytes())?;
        let tb = temp.vk_buffer();
        let legs = [leg(&a, sb, tb), leg(&b, tb, db)];
        let gpu = self.run_legs(sub, &legs, self.profiling())?;
        Ok(Some((Via::Shader, gpu)))
    }

    /// Runs the legs in one submission, a shader-write barrier between them; with
    /// `timed`, returns the GPU time (host time where the queue has no timestamps).
    fn run_legs(&self, sub: &Submitter, legs: &[Leg], timed: bool) -> Result<Option<u64>> {
        let s = &*self.inner;
        let (device, stats) = (&s.device.raw(), &s.device.stats);
        // Held until the fence wait: the kernel is not destroyed under the copy.
        let mut cache = s.pipelines.lock();
        let kernel = cache.copy_kernel(&s.device)?;
        let sets = kernel.sets(device, stats, legs)?;
        let key = kernel.key(&sets, legs);
        let start = std::time::Instant::now();
        let gpu = sub.run_kept(key, timed, HostAccess::No, |cmd| {
            for (i, l) in legs.iter().enumerate() {
                if i > 0 {
                    shader_write_barrier(device, cmd);
                }
                kernel.record(device, cmd, &sets, i, l);
            }
        });
        // The descriptor sets go when this returns, pending or not.
        let gpu = s.device.settle_on_timeout(gpu)?;
        let host = start.elapsed().as_nanos() as u64;
        drop(sets);
        drop(cache);
        Ok(if timed {
            Some(gpu.unwrap_or(host))
        } else {
            None
        })
    }

    /// Makes the copy both ways, each once untimed and then timed by the host
    /// as the caller waits for it, each way on the queue it takes, and keeps the
    /// faster path for the copy's size class: under a few MiB the queue's
    /// answer outweighs the GPU's time. Each way's copies run one after
    /// another, as a class's repeated copies do (see `on_copy_queue`). Both
    /// ways write the same bytes.
    fn calibrate(
        &self,
        sub: &Submitter,
        plan: &CopyPlan,
        legs: &[Leg],
        transfer: &dyn Fn() -> Result<()>,
    ) -> Result<(Via, Option<u64>)> {
        let best = |way: &dyn Fn() -> Result<()>| -> Result<u64> {
            way()?;
            let mut best = u64::MAX;
            for _ in 0..CALIBRATION_ROUNDS {
                let start = std::time::Instant::now();
                way()?;
                best = best.min(start.elapsed().as_nanos() as u64);
            }
            Ok(best)
        };
        let t = best(transfer)?;
        let k = best(&|| self.run_legs(sub, legs, false).map(|_| ()))?;
        let chosen = if k < t {
            DeviceCopy::Shader
        } else {
            DeviceCopy::Transfer
        };
        let choices = &self.inner.device_copies;
        choices.learn(CopyCalibration {
            min_bytes: class_min_bytes(plan.bytes()),
            contiguous: plan.chunks() == 1,
            bytes: plan.bytes(),
            transfer_seconds: t as f64 * 1e-9,
            shader_seconds: k as f64 * 1e-9,
            chosen,
        });
        let via = match chosen {
            DeviceCopy::Shader => Via::Shader,
            _ => Via::Transfer,
        };
        Ok((via, None))
    }
}
