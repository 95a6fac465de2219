//! Submission: one command pool with a few command buffers and fences (lanes),
//! recorded and reused for every submission under one lock. Creating them per
//! copy (as Halide does) costs more than a small copy itself. A plain submission
//! uses lane 0 and waits for it; a pipelined copy keeps several lanes in flight.

use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;

use crate::error::{Result, VkContext};
use crate::vk::device::DeviceShared;

/// Command buffers (with a fence each) of a submitter.
pub(crate) const LANES: usize = 3;

/// How long a wait polls its fence before it blocks.
const SPIN: std::time::Duration = std::time::Duration::from_micros(200);

struct Lane {
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    /// Submitted and not yet waited for.
    pending: bool,
}

struct Commands {
    queue: vk::Queue,
    pool: vk::CommandPool,
    lanes: Vec<Lane>,
    /// Two timestamps around the recorded work, when the queue has timestamps.
    queries: Option<vk::QueryPool>,
}

pub(crate) struct Submitter {
    device: Arc<DeviceShared>,
    inner: Mutex<Commands>,
    timestamp_period: f32,
}

/// Frees what `new` made so far when it fails half-way.
struct Partial<'a> {
    device: &'a ash::Device,
    pool: vk::CommandPool,
    fences: Vec<vk::Fence>,
}

impl Drop for Partial<'_> {
    fn drop(&mut self) {
        // SAFETY: nothing was submitted; freeing the pool frees its command buffers.
        unsafe {
            for &f in &self.fences {
                self.device.destroy_fence(f, None);
            }
            self.device.destroy_command_pool(self.pool, None);
        }
    }
}

impl Submitter {
    /// Commands for the device's queue; timestamps when its family has them.
    pub(crate) fn new(shared: &Arc<DeviceShared>) -> Result<Self> {
        let device = &shared.raw;
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(shared.info.queue_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create info; destroyed in drop (or by Partial on failure).
        let pool =
            unsafe { device.create_command_pool(&pool_info, None) }.vk("vkCreateCommandPool")?;
        let mut partial = Partial {
            device,
            pool,
            fences: Vec::new(),
        };
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(LANES as u32);
        // SAFETY: the pool is alive and owned by this device.
        let cmds =
            unsafe { device.allocate_command_buffers(&alloc) }.vk("vkAllocateCommandBuffers")?;
        for _ in 0..LANES {
            // SAFETY: plain fence creation.
            let f = unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) }
                .vk("vkCreateFence")?;
            partial.fences.push(f);
        }
        let timestamp_period = shared.timestamps.then_some(shared.info.timestamp_period);
        let queries = match timestamp_period {
            None => None,
            Some(_) => {
                let info = vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(2);
                // SAFETY: valid create info; destroyed in drop.
                Some(unsafe { device.create_query_pool(&info, None) }.vk("vkCreateQueryPool")?)
            }
        };
        let fences = std::mem::take(&mut partial.fences);
        std::mem::forget(partial);
        let stats = &shared.stats;
        stats.command_pool_created();
        for _ in 0..LANES {
            stats.command_buffer_created();
            stats.fence_created();
        }
        stats.commands_kept(LANES as u64);
        Ok(Submitter {
            device: shared.clone(),
            inner: Mutex::new(Commands {
                queue: shared.queue,
                pool,
                lanes: cmds
                    .into_iter()
                    .zip(fences)
                    .map(|(cmd, fence)| Lane {
                        cmd,
                        fence,
                        pending: false,
                    })
                    .collect(),
                queries,
            }),
            timestamp_period: timestamp_period.unwrap_or(0.0),
        })
    }

    /// Records with `record`, submits, and waits for the fence. Submissions are
    /// serialised: the queue and the command buffers are used by one thread at a time.
    pub(crate) fn run(&self, record: impl FnOnce(vk::CommandBuffer)) -> Result<()> {
        self.run_timed(false, record).map(|_| ())
    }

    /// As [`Submitter::run`]; with `timed`, also returns the GPU time of the recorded
    /// work in nanoseconds, from two timestamp queries.
    pub(crate) fn run_timed(
        &self,
        timed: bool,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<Option<u64>> {
        let mut lanes = self.lanes(timed);
        lanes.submit(0, true, record)?;
        lanes.finish()
    }

    /// The lanes, for several submissions in flight; held until dropped.
    pub(crate) fn lanes(&self, timed: bool) -> Lanes<'_> {
        let c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let queries = c.queries.filter(|_| timed);
        Lanes {
            submitter: self,
            c,
            queries,
            started: false,
        }
    }
}

/// The submitter's lanes, locked. Every lane is waited for before they are
/// released, so nothing recorded here is pending afterwards.
pub(crate) struct Lanes<'a> {
    submitter: &'a Submitter,
    c: MutexGuard<'a, Commands>,
    /// Timestamps from the first submission to the last.
    queries: Option<vk::QueryPool>,
    started: bool,
}

impl Lanes<'_> {
    /// Records with `record` on lane `i` (waiting for its earlier work first) and
    /// submits it. `last` says that no later submission belongs to this timing.
    pub(crate) fn submit(
        &mut self,
        i: usize,
        last: bool,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<()> {
        self.wait(i)?;
        let device = &self.submitter.device.raw;
        let cmd = self.c.lanes[i].cmd;
        let begin = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the lane's command buffer is not pending: it was waited for above.
        unsafe {
            device
                .reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                .vk("vkResetCommandBuffer")?;
            device
                .begin_command_buffer(cmd, &begin)
                .vk("vkBeginCommandBuffer")?;
        }
        // Every submission first waits for earlier transfer and compute writes (a
        // fence wait orders the host, not later device work), and ends by making its
        // own writes visible to the host.
        let before = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE | vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(
                vk::AccessFlags::TRANSFER_READ
                    | vk::AccessFlags::TRANSFER_WRITE
                    | vk::AccessFlags::SHADER_READ
                    | vk::AccessFlags::SHADER_WRITE,
            )];
        let after = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE | vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ)];
        let device_stages =
            vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER;
        // SAFETY: the command buffer is recording.
        unsafe {
            device.cmd_pipeline_barrier(
                cmd,
                device_stages,
                device_stages,
                vk::DependencyFlags::empty(),
                &before,
                &[],
                &[],
            );
        }
        if let (Some(q), false) = (self.queries, self.started) {
            // SAFETY: recording; the pool has two queries, reset before being written;
            // no earlier submission using them is pending (all lanes were waited for
            // before the lock was last released).
            unsafe {
                device.cmd_reset_query_pool(cmd, q, 0, 2);
                device.cmd_write_timestamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, q, 0);
            }
        }
        self.started = true;
        record(cmd);
        if let (Some(q), true) = (self.queries, last) {
            // SAFETY: recording; query 1 was reset by the first submission of this timing.
            unsafe {
                device.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, q, 1)
            };
        }
        // SAFETY: as above.
        unsafe {
            device.cmd_pipeline_barrier(
                cmd,
                device_stages,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &after,
                &[],
                &[],
            );
        }
        let cmds = [cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        let queue = self.c.queue;
        let lane = &mut self.c.lanes[i];
        // SAFETY: recording is complete; the queue is used under this lock only; the
        // fence is unsignalled (reset after each wait).
        unsafe {
            device.end_command_buffer(cmd).vk("vkEndCommandBuffer")?;
            device
                .queue_submit(queue, &submit, lane.fence)
                .vk("vkQueueSubmit")?;
        }
        lane.pending = true;
        Ok(())
    }

    /// Waits until lane `i`'s work is done (at once if nothing is pending there).
    pub(crate) fn wait(&mut self, i: usize) -> Result<()> {
        let device = &self.submitter.device.raw;
        let lane = &mut self.c.lanes[i];
        if !lane.pending {
            return Ok(());
        }
        lane.pending = false;
        let fence = lane.fence;
        // A blocking wait costs a wake-up (tens of microseconds on some drivers),
        // more than a small copy takes: poll the fence briefly first, as CUDA's
        // default synchronisation spins before it yields.
        let spin_until = std::time::Instant::now() + SPIN;
        // SAFETY: the fence belongs to this device and was submitted with the lane.
        let mut signalled = unsafe { device.get_fence_status(fence) }.vk("vkGetFenceStatus")?;
        while !signalled && std::time::Instant::now() < spin_until {
            std::hint::spin_loop();
            // SAFETY: as above.
            signalled = unsafe { device.get_fence_status(fence) }.vk("vkGetFenceStatus")?;
        }
        // SAFETY: as above.
        unsafe {
            let waited = match signalled {
                true => Ok(()),
                false => device.wait_for_fences(&[fence], true, u64::MAX),
            };
            device.reset_fences(&[fence]).vk("vkResetFences")?;
            waited.vk("vkWaitForFences")
        }
    }

    /// Lanes there are.
    pub(crate) fn count(&self) -> usize {
        self.c.lanes.len()
    }

    /// Waits for every lane; the GPU time from the first submission to the last in
    /// nanoseconds, when timed.
    pub(crate) fn finish(mut self) -> Result<Option<u64>> {
        for i in 0..self.count() {
            self.wait(i)?;
        }
        let Some(q) = self.queries.filter(|_| self.started) else {
            return Ok(None);
        };
        let device = &self.submitter.device.raw;
        let mut ticks = [0u64; 2];
        // SAFETY: both queries were written by submissions that were waited for.
        unsafe {
            device
                .get_query_pool_results(q, 0, &mut ticks, vk::QueryResultFlags::TYPE_64)
                .vk("vkGetQueryPoolResults")?;
        }
        let period = self.submitter.timestamp_period as f64;
        Ok(Some(
            (ticks[1].saturating_sub(ticks[0]) as f64 * period) as u64,
        ))
    }
}

impl Drop for Lanes<'_> {
    fn drop(&mut self) {
        // After an error nothing may stay pending when the lock is released.
        for i in 0..self.c.lanes.len() {
            let _ = self.wait(i);
        }
    }
}

impl Drop for Submitter {
    fn drop(&mut self) {
        let device = &self.device.raw;
        let c = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        // SAFETY: every lane was waited for before its lock was released, and nothing
        // records into the command buffers any more.
        unsafe {
            if let Some(q) = c.queries {
                device.destroy_query_pool(q, None);
            }
            for lane in &c.lanes {
                device.destroy_fence(lane.fence, None);
            }
            device.destroy_command_pool(c.pool, None);
        }
        let stats = &self.device.stats;
        stats.command_pool_destroyed();
        for _ in 0..LANES {
            stats.command_buffer_destroyed();
            stats.fence_destroyed();
        }
        stats.commands_kept(0);
    }
}
