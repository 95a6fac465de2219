//! Submission: one command pool, command buffer and fence, recorded and reused
//! for every submission under one lock. Creating them per copy (as Halide does)
//! costs more than a small copy itself.

use std::sync::Mutex;

use ash::vk;

use std::sync::Arc;

use crate::error::{Result, VkContext};
use crate::vk::device::DeviceShared;

struct Commands {
    queue: vk::Queue,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    /// Two timestamps around the recorded work, when the queue has timestamps.
    queries: Option<vk::QueryPool>,
}

pub(crate) struct Submitter {
    device: Arc<DeviceShared>,
    inner: Mutex<Commands>,
    timestamp_period: f32,
}

impl Submitter {
    /// Commands for the device's queue; timestamps when its family has them.
    pub(crate) fn new(shared: &Arc<DeviceShared>) -> Result<Self> {
        let device = &shared.raw;
        let queue = shared.queue;
        let queue_family = shared.info.queue_family;
        let timestamp_period = shared.timestamps.then_some(shared.info.timestamp_period);
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(queue_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create info; destroyed in `destroy`.
        let pool =
            unsafe { device.create_command_pool(&pool_info, None) }.vk("vkCreateCommandPool")?;
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: the pool is alive and owned by this device.
        let cmd = match unsafe { device.allocate_command_buffers(&alloc) } {
            Ok(v) => v[0],
            Err(e) => {
                // SAFETY: the pool has no buffers.
                unsafe { device.destroy_command_pool(pool, None) };
                return Err(e).vk("vkAllocateCommandBuffers");
            }
        };
        // SAFETY: plain fence creation.
        let fence = match unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) } {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: freeing the pool frees its command buffer.
                unsafe { device.destroy_command_pool(pool, None) };
                return Err(e).vk("vkCreateFence");
            }
        };
        let queries = match timestamp_period {
            None => None,
            Some(_) => {
                let info = vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(2);
                // SAFETY: valid create info; destroyed in `destroy`.
                match unsafe { device.create_query_pool(&info, None) } {
                    Ok(q) => Some(q),
                    Err(e) => {
                        // SAFETY: nothing uses the fence or the pool yet.
                        unsafe {
                            device.destroy_fence(fence, None);
                            device.destroy_command_pool(pool, None);
                        }
                        return Err(e).vk("vkCreateQueryPool");
                    }
                }
            }
        };
        shared.stats.command_pool_created();
        shared.stats.command_buffer_created();
        shared.stats.fence_created();
        Ok(Submitter {
            device: shared.clone(),
            inner: Mutex::new(Commands {
                queue,
                pool,
                cmd,
                fence,
                queries,
            }),
            timestamp_period: timestamp_period.unwrap_or(0.0),
        })
    }

    /// Records with `record`, submits, and waits for the fence. Submissions are
    /// serialised: the queue and the command buffer are used by one thread at a time.
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
        let device = &self.device.raw;
        let c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let begin = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the command buffer is not pending: every submission below waits for
        // its fence before the lock is released.
        unsafe {
            device
                .reset_command_buffer(c.cmd, vk::CommandBufferResetFlags::empty())
                .vk("vkResetCommandBuffer")?;
            device
                .begin_command_buffer(c.cmd, &begin)
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
                c.cmd,
                device_stages,
                device_stages,
                vk::DependencyFlags::empty(),
                &before,
                &[],
                &[],
            );
        }
        let queries = c.queries.filter(|_| timed);
        if let Some(q) = queries {
            // SAFETY: recording; the pool has two queries, reset before being written.
            unsafe {
                device.cmd_reset_query_pool(c.cmd, q, 0, 2);
                device.cmd_write_timestamp(c.cmd, vk::PipelineStageFlags::TOP_OF_PIPE, q, 0);
            }
        }
        record(c.cmd);
        if let Some(q) = queries {
            // SAFETY: as above.
            unsafe {
                device.cmd_write_timestamp(c.cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, q, 1);
            }
        }
        // SAFETY: as above.
        unsafe {
            device.cmd_pipeline_barrier(
                c.cmd,
                device_stages,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &after,
                &[],
                &[],
            );
        }
        let cmds = [c.cmd];
        let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
        // SAFETY: recording is complete; the queue is used under this lock only;
        // the fence is unsignalled (reset after each wait).
        unsafe {
            device.end_command_buffer(c.cmd).vk("vkEndCommandBuffer")?;
            device
                .queue_submit(c.queue, &submit, c.fence)
                .vk("vkQueueSubmit")?;
            let waited = device.wait_for_fences(&[c.fence], true, u64::MAX);
            device.reset_fences(&[c.fence]).vk("vkResetFences")?;
            waited.vk("vkWaitForFences")?;
        }
        let Some(q) = queries else { return Ok(None) };
        let mut ticks = [0u64; 2];
        // SAFETY: both queries were written by the submission the fence waited for.
        unsafe {
            device
                .get_query_pool_results(q, 0, &mut ticks, vk::QueryResultFlags::TYPE_64)
                .vk("vkGetQueryPoolResults")?;
        }
        let ns = ticks[1].saturating_sub(ticks[0]) as f64 * self.timestamp_period as f64;
        Ok(Some(ns as u64))
    }
}

impl Drop for Submitter {
    fn drop(&mut self) {
        let device = &self.device.raw;
        let c = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        // SAFETY: every submission was waited for before its lock was released, and
        // nothing records into the command buffer any more.
        unsafe {
            if let Some(q) = c.queries {
                device.destroy_query_pool(q, None);
            }
            device.destroy_fence(c.fence, None);
            device.destroy_command_pool(c.pool, None);
        }
        let stats = &self.device.stats;
        stats.command_pool_destroyed();
        stats.command_buffer_destroyed();
        stats.fence_destroyed();
    }
}
