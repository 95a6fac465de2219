//! One command pool, command buffer and fence, recorded and reused for every
//! submission, under one lock.
//!
//! Halide creates a command pool and buffer per copy and waits with
//! `vkQueueWaitIdle`; on the lab H200 that costs about 0.56 ms per 4 KiB copy
//! against 42 us reused (see `reports/README.md`).

use std::sync::Mutex;

use ash::vk;

use crate::error::{Result, VkContext};

struct Commands {
    queue: vk::Queue,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
}

pub(crate) struct Submitter {
    inner: Mutex<Commands>,
}

impl Submitter {
    pub(crate) fn new(device: &ash::Device, queue: vk::Queue, queue_family: u32) -> Result<Self> {
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
        Ok(Submitter {
            inner: Mutex::new(Commands {
                queue,
                pool,
                cmd,
                fence,
            }),
        })
    }

    /// Records with `record`, submits, and waits for the fence. Submissions are
    /// serialised: the queue and the command buffer are used by one thread at a time.
    pub(crate) fn run(
        &self,
        device: &ash::Device,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<()> {
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
        record(c.cmd);
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
        Ok(())
    }

    /// Destroys the pool, its command buffer and the fence.
    ///
    /// # Safety
    /// The device must be idle and the submitter not used again.
    pub(crate) unsafe fn destroy(&self, device: &ash::Device) {
        let c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the caller guarantees the device is idle.
        unsafe {
            device.destroy_fence(c.fence, None);
            device.destroy_command_pool(c.pool, None);
        }
    }
}
