//! The driver's floor under a copy: the same `vkCmdCopyBuffer` with nothing
//! of vkcopy's (no planning, staging, dirty bits or barriers but the one a
//! readback needs), recorded once and submitted again, on every queue family
//! that copies. It runs on a device of its own on the context's GPU, since
//! the context's device has queues on some families only. `bench` reports
//! vkcopy's time over it; the example `submit_latency` takes it apart.

use std::time::{Duration, Instant};

use ash::vk;

use crate::error::{Error, Result, VkContext};
use crate::runtime::context::Context;
use crate::types::CopyPath;
use crate::vk::gate::Guarded;
use crate::vk::instance::lifecycle;

/// Untimed submissions before the timed ones.
const WARMUP: u32 = 2;

/// One queue family's times for a copy: host time from `vkQueueSubmit` until
/// the host sees its fence signalled.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyTime {
    /// The queue family's index.
    pub family: u32,
    /// Its flags (`TRANSFER` alone: a copy engine of its own).
    pub flags: vk::QueueFlags,
    /// The best of the timed runs.
    pub best: Duration,
    /// Their median.
    pub median: Duration,
    /// Every timed run, fastest first.
    pub runs: Vec<Duration>,
}

/// The fastest family of `times` by best time.
pub fn fastest(times: &[FamilyTime]) -> Option<&FamilyTime> {
    times.iter().min_by_key(|t| t.best)
}

/// A device of its own on a context's GPU, with one queue on every family
/// that copies.
pub struct Floor {
    /// Keeps the instance alive; dropped after the device.
    _ctx: Context,
    device: ash::Device,
    families: Vec<(u32, vk::QueueFlags)>,
    memory: vk::PhysicalDeviceMemoryProperties,
    layered: bool,
}

/// A buffer and its memory on the floor's device.
#[derive(Clone, Copy)]
struct Bound {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

impl Floor {
    /// Opens the device on `ctx`'s GPU.
    pub fn new(ctx: &Context) -> Result<Floor> {
        let shared = &ctx.inner.device;
        let physical = ctx.raw_physical_device();
        let instance = shared.instance.raw();
        // SAFETY: a physical device of this live instance.
        let all = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        let families: Vec<(u32, vk::QueueFlags)> = all
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.queue_count > 0
                    && f.queue_flags.intersects(
                        vk::QueueFlags::TRANSFER
                            | vk::QueueFlags::COMPUTE
                            | vk::QueueFlags::GRAPHICS,
                    )
            })
            .map(|(i, f)| (i as u32, f.queue_flags))
            .collect();
        let priorities = [1.0f32];
        let queues: Vec<_> = families
            .iter()
            .map(|&(f, _)| {
                vk::DeviceQueueCreateInfo::default()
                    .queue_family_index(f)
                    .queue_priorities(&priorities)
            })
            .collect();
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        // SAFETY: as above.
        let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
        let device = {
            let _order = lifecycle();
            // SAFETY: `info` refers to live locals; no other thread creates or
            // destroys a device meanwhile (the gate is held exclusive).
            unsafe { instance.create_device(physical, &info, None) }.vk("vkCreateDevice")?
        };
        Ok(Floor {
            _ctx: ctx.clone(),
            device,
            families,
            memory,
            layered: shared.instance.layered,
        })
    }

    /// The families it copies on, with their flags.
    pub fn families(&self) -> &[(u32, vk::QueueFlags)] {
        &self.families
    }

    /// Times `runs` copies of `bytes` along `path` on every family, each
    /// recorded once. Host memory is host-visible coherent memory apart from
    /// the device where there is such (cached for a readback's destination).
    pub fn measure(&self, path: CopyPath, bytes: u64, runs: u32) -> Result<Vec<FamilyTime>> {
        if bytes == 0 || runs == 0 {
            return Err(Error::BadDimensions("a floor of 0 bytes or 0 runs".into()));
        }
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
        let (from, to) = match path {
            CopyPath::HostToDevice => (host, local),
            CopyPath::DeviceToHost => (local, host | vk::MemoryPropertyFlags::HOST_CACHED),
            CopyPath::DeviceToDevice => (local, local),
            CopyPath::HostToHost => {
                return Err(Error::BadDimensions(
                    "a floor goes through the device; host to host is a memcpy".into(),
                ))
            }
        };
        let device = self.raw();
        let mut made = Vec::new();
        let result = (|| {
            let src = self.bind(bytes, vk::BufferUsageFlags::TRANSFER_SRC, from)?;
            made.push(src);
            let dst = self.bind(bytes, vk::BufferUsageFlags::TRANSFER_DST, to)?;
            made.push(dst);
            self.families
                .iter()
                .map(|&(family, flags)| {
                    let host_reads = path == CopyPath::DeviceToHost;
                    let runs = self.time(family, src, dst, bytes, host_reads, runs)?;
                    Ok(FamilyTime {
                        family,
                        flags,
                        best: runs[0],
                        median: runs[runs.len() / 2],
                        runs,
                    })
                })
                .collect::<Result<Vec<_>>>()
        })();
        for b in made {
            // SAFETY: every submission that used them was waited for.
            unsafe {
                device.destroy_buffer(b.buffer, None);
                device.free_memory(b.memory, None);
            }
        }
        result
    }

    /// `runs` submissions of one copy on `family`, timed, fastest first.
    fn time(
        &self,
        family: u32,
        src: Bound,
        dst: Bound,
        bytes: u64,
        host_reads: bool,
        runs: u32,
    ) -> Result<Vec<Duration>> {
        let device = self.raw();
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(family);
        // SAFETY: a family this device has a queue on.
        let pool =
            unsafe { device.create_command_pool(&pool_info, None) }.vk("vkCreateCommandPool")?;
        // SAFETY: default create info.
        let fence = match unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) } {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: the pool was just made and holds nothing in use.
                unsafe { device.destroy_command_pool(pool, None) };
                return Err(Error::Vulkan {
                    call: "vkCreateFence",
                    result: e,
                });
            }
        };
        let timed = (|| {
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1);
            // SAFETY: a live pool of this device.
            let cmd = unsafe { device.allocate_command_buffers(&alloc) }
                .vk("vkAllocateCommandBuffers")?[0];
            let region = [vk::BufferCopy::default().size(bytes)];
            // SAFETY: a fresh command buffer; both buffers hold `bytes` bytes and
            // live until every submission is waited for.
            unsafe {
                device
                    .begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
                    .vk("vkBeginCommandBuffer")?;
                device.cmd_copy_buffer(cmd, src.buffer, dst.buffer, &region);
                if host_reads {
                    // The host reads what the copy wrote, as after any readback.
                    let b = [vk::MemoryBarrier::default()
                        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                        .dst_access_mask(vk::AccessFlags::HOST_READ)];
                    device.cmd_pipeline_barrier(
                        cmd,
                        vk::PipelineStageFlags::TRANSFER,
                        vk::PipelineStageFlags::HOST,
                        vk::DependencyFlags::empty(),
                        &b,
                        &[],
                        &[],
                    );
                }
                device.end_command_buffer(cmd).vk("vkEndCommandBuffer")?;
            }
            // SAFETY: the family was asked for with one queue.
            let queue = unsafe { device.get_device_queue(family, 0) };
            let cmds = [cmd];
            let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
            let mut times = Vec::with_capacity(runs as usize);
            for i in 0..WARMUP + runs {
                // SAFETY: the fence's last submission was waited for; the queue is
                // this thread's alone, and so is the command buffer.
                let took = unsafe {
                    device.reset_fences(&[fence]).vk("vkResetFences")?;
                    let start = Instant::now();
                    device
                        .queue_submit(queue, &submit, fence)
                        .vk("vkQueueSubmit")?;
                    // Polled, as vkcopy polls before it blocks: the floor is
                    // the soonest the host can see the copy done.
                    while !device.get_fence_status(fence).vk("vkGetFenceStatus")? {
                        std::hint::spin_loop();
                    }
                    let took = start.elapsed();
                    // Signalled already: tells the validation layer the host waited.
                    device
                        .wait_for_fences(&[fence], true, 0)
                        .vk("vkWaitForFences")?;
                    took
                };
                if i >= WARMUP {
                    times.push(took);
                }
            }
            times.sort();
            Ok(times)
        })();
        // SAFETY: every submission was waited for (or none was made).
        unsafe {
            if timed.is_err() {
                let _ = device.device_wait_idle();
            }
            device.destroy_fence(fence, None);
            device.destroy_command_pool(pool, None);
        }
        timed
    }

    /// A buffer of `bytes` in memory with `flags`, bound.
    fn bind(
        &self,
        bytes: u64,
        usage: vk::BufferUsageFlags,
        flags: vk::MemoryPropertyFlags,
    ) -> Result<Bound> {
        let device = self.raw();
        let info = vk::BufferCreateInfo::default()
            .size(bytes)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info.
        let buffer = unsafe { device.create_buffer(&info, None) }.vk("vkCreateBuffer")?;
        // SAFETY: a live buffer.
        let req = unsafe { device.get_buffer_memory_requirements(buffer) };
        let types = &self.memory.memory_types[..self.memory.memory_type_count as usize];
        let fits = |i: usize, t: &vk::MemoryType| {
            req.memory_type_bits & (1 << i) != 0 && t.property_flags.contains(flags)
        };
        // Host memory apart from the device where the device has it, as
        // vkcopy's staging; a device of one type (lavapipe) takes that one.
        let apart = |t: &vk::MemoryType| {
            flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
                || !t
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        };
        let cached = vk::MemoryPropertyFlags::HOST_CACHED;
        let loose = flags & !cached;
        let index = (0..types.len())
            .find(|&i| fits(i, &types[i]) && apart(&types[i]))
            .or_else(|| (0..types.len()).find(|&i| fits(i, &types[i])))
            .or_else(|| {
                (0..types.len()).find(|&i| {
                    req.memory_type_bits & (1 << i) != 0 && types[i].property_flags.contains(loose)
                })
            });
        let Some(index) = index else {
            // SAFETY: bound to nothing, used by nothing.
            unsafe { device.destroy_buffer(buffer, None) };
            return Err(Error::DeviceMallocFailed(format!(
                "the floor's memory: no memory type of the device has {flags:?}"
            )));
        };
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(index as u32);
        // SAFETY: valid allocate info of a type the buffer allows.
        let memory = match unsafe { device.allocate_memory(&alloc, None) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: bound to nothing, used by nothing.
                unsafe { device.destroy_buffer(buffer, None) };
                return Err(Error::Vulkan {
                    call: "vkAllocateMemory",
                    result: e,
                });
            }
        };
        // SAFETY: a fresh buffer and memory of a type it allows, at offset 0.
        if let Err(e) = unsafe { device.bind_buffer_memory(buffer, memory, 0) } {
            // SAFETY: neither is in use.
            unsafe {
                device.destroy_buffer(buffer, None);
                device.free_memory(memory, None);
            }
            return Err(Error::Vulkan {
                call: "vkBindBufferMemory",
                result: e,
            });
        }
        Ok(Bound { buffer, memory })
    }

    /// The device's table, the layer gate held shared while it is in use.
    fn raw(&self) -> Guarded<'_, ash::Device> {
        Guarded::new(&self.device, self.layered)
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _order = lifecycle();
        // SAFETY: every submission was waited for before `measure` returned;
        // the context (and so the instance) outlives this.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
        }
    }
}
