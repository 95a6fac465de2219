//! The driver's floor under a small copy, with plain `ash` and no vkcopy code:
//! how long one submission takes from `vkQueueSubmit` until the host sees it
//! done, for an empty command buffer and for a 4 KiB `vkCmdCopyBuffer` (bare, and
//! with the barriers vkcopy records before and after a submission), waited for by
//! polling a timeline semaphore or a fence, on every queue family that copies.
//! What vkcopy's own code adds on top is `vkcopy-suite bench --breakdown`.
//!
//! `cargo run --release --example submit_latency -- [SUBMISSIONS]` (default 500);
//! prints the median and the 10th percentile of each, in microseconds.

use std::time::Instant;

use ash::vk;

const BYTES: u64 = 4096;

/// How one variant records and waits.
#[derive(Clone, Copy)]
struct Variant {
    name: &'static str,
    copy: bool,
    /// The barrier before the work: earlier transfer writes to later transfers.
    before: bool,
    /// The barrier after the work: its writes to the host.
    after: bool,
    fence: bool,
}

const fn variant(
    name: &'static str,
    copy: bool,
    before: bool,
    after: bool,
    fence: bool,
) -> Variant {
    Variant {
        name,
        copy,
        before,
        after,
        fence,
    }
}

const VARIANTS: [Variant; 7] = [
    variant("empty, timeline", false, false, false, false),
    variant("empty, fence", false, false, false, true),
    variant("copy, timeline", true, false, false, false),
    variant("before+copy, timeline", true, true, false, false),
    variant("copy+after, timeline", true, false, true, false),
    variant("before+copy+after, timeline", true, true, true, false),
    variant("before+copy+after, fence", true, true, true, true),
];

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p) as usize]
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(500, |a| a.parse().expect("a number"));
    // SAFETY: loads the system loader; it stays loaded for the process.
    let entry = unsafe { ash::Entry::load() }.expect("loader");
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: `info` refers to live locals.
    let instance = unsafe { entry.create_instance(&info, None) }.expect("vkCreateInstance");
    // SAFETY: a live instance.
    let physical = unsafe { instance.enumerate_physical_devices() }.expect("devices")[0];
    // SAFETY: as above.
    let props = unsafe { instance.get_physical_device_properties(physical) };
    // SAFETY: as above.
    let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
    let name = props
        .device_name_as_c_str()
        .unwrap_or(c"?")
        .to_string_lossy();
    println!("{name}; {n} submissions each; microseconds: median (10th percentile)");
    let priorities = [1.0f32];
    let copying: Vec<u32> = (0..families.len() as u32)
        .filter(|&f| {
            let flags = families[f as usize].queue_flags;
            flags.intersects(
                vk::QueueFlags::TRANSFER | vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS,
            )
        })
        .collect();
    let queues: Vec<_> = copying
        .iter()
        .map(|&f| {
            vk::DeviceQueueCreateInfo::default()
                .queue_family_index(f)
                .queue_priorities(&priorities)
        })
        .collect();
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
    let info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .push_next(&mut v12);
    // SAFETY: a physical device of `instance`; `info` refers to live locals.
    let device = unsafe { instance.create_device(physical, &info, None) }.expect("vkCreateDevice");
    // SAFETY: as above.
    let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
    let buffer = |usage| {
        let info = vk::BufferCreateInfo::default()
            .size(BYTES)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info; the buffer lives until the process ends.
        let b = unsafe { device.create_buffer(&info, None) }.expect("vkCreateBuffer");
        // SAFETY: a live buffer.
        let req = unsafe { device.get_buffer_memory_requirements(b) };
        let index = (0..memory.memory_type_count)
            .find(|&i| {
                req.memory_type_bits & (1 << i) != 0
                    && memory.memory_types[i as usize]
                        .property_flags
                        .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
            })
            .expect("a device-local type");
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(index);
        // SAFETY: valid allocate info; bound once below.
        let m = unsafe { device.allocate_memory(&alloc, None) }.expect("vkAllocateMemory");
        // SAFETY: fresh buffer and memory of a type it allows.
        unsafe { device.bind_buffer_memory(b, m, 0) }.expect("vkBindBufferMemory");
        b
    };
    let src = buffer(vk::BufferUsageFlags::TRANSFER_SRC);
    let dst = buffer(vk::BufferUsageFlags::TRANSFER_DST);
    for &family in &copying {
        // SAFETY: the family was requested with one queue.
        let queue = unsafe { device.get_device_queue(family, 0) };
        let flags = families[family as usize].queue_flags;
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create info.
        let pool = unsafe { device.create_command_pool(&pool_info, None) }.expect("pool");
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .command_buffer_count(1);
        // SAFETY: a live pool.
        let cmd = unsafe { device.allocate_command_buffers(&alloc) }.expect("cmd")[0];
        let mut timeline =
            vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
        let sem_info = vk::SemaphoreCreateInfo::default().push_next(&mut timeline);
        // SAFETY: timeline semaphores are enabled.
        let semaphore = unsafe { device.create_semaphore(&sem_info, None) }.expect("semaphore");
        // SAFETY: valid create info.
        let fence =
            unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) }.expect("fence");
        let compute = flags.intersects(vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS);
        println!("family {family} ({flags:?})");
        let mut value = 0u64;
        for v in VARIANTS {
            let (mut total, mut submit) = (Vec::new(), Vec::new());
            for i in 0..n + 20 {
                // SAFETY: the command buffer's last submission was waited for.
                unsafe {
                    device
                        .reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                        .expect("reset");
                    device
                        .begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
                        .expect("begin");
                }
                let stages = match compute {
                    true => {
                        vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER
                    }
                    false => vk::PipelineStageFlags::TRANSFER,
                };
                let barrier = |src_access, dst_access, dst_stage| {
                    let b = [vk::MemoryBarrier::default()
                        .src_access_mask(src_access)
                        .dst_access_mask(dst_access)];
                    // SAFETY: recording.
                    unsafe {
                        device.cmd_pipeline_barrier(
                            cmd,
                            stages,
                            dst_stage,
                            vk::DependencyFlags::empty(),
                            &b,
                            &[],
                            &[],
                        )
                    };
                };
                if v.before {
                    let w = vk::AccessFlags::TRANSFER_WRITE;
                    barrier(w, w | vk::AccessFlags::TRANSFER_READ, stages);
                }
                if v.copy {
                    let region = [vk::BufferCopy {
                        src_offset: 0,
                        dst_offset: 0,
                        size: BYTES,
                    }];
                    // SAFETY: recording; both buffers hold BYTES.
                    unsafe { device.cmd_copy_buffer(cmd, src, dst, &region) };
                }
                if v.after {
                    let w = vk::AccessFlags::TRANSFER_WRITE;
                    barrier(w, vk::AccessFlags::HOST_READ, vk::PipelineStageFlags::HOST);
                }
                // SAFETY: recording.
                unsafe { device.end_command_buffer(cmd) }.expect("end");
                value += 1;
                let values = [value];
                let sems = [semaphore];
                let mut t =
                    vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
                let cmds = [cmd];
                let mut info = vk::SubmitInfo::default().command_buffers(&cmds);
                if !v.fence {
                    info = info.signal_semaphores(&sems).push_next(&mut t);
                }
                let submitted = Instant::now();
                let f = if v.fence { fence } else { vk::Fence::null() };
                // SAFETY: recording is complete; one thread uses the queue.
                unsafe { device.queue_submit(queue, &[info], f) }.expect("submit");
                let after_submit = Instant::now();
                loop {
                    // SAFETY: live objects of this device.
                    let done = unsafe {
                        if v.fence {
                            device.get_fence_status(fence).expect("fence status")
                        } else {
                            device
                                .get_semaphore_counter_value(semaphore)
                                .expect("value")
                                >= value
                        }
                    };
                    if done {
                        break;
                    }
                    std::hint::spin_loop();
                }
                let end = Instant::now();
                if v.fence {
                    // SAFETY: the fence is signalled and no longer in use.
                    unsafe { device.reset_fences(&[fence]) }.expect("reset fence");
                }
                if i >= 20 {
                    total.push((end - submitted).as_secs_f64() * 1e6);
                    submit.push((after_submit - submitted).as_secs_f64() * 1e6);
                }
            }
            println!(
                "  {:<26} submit to done {:>6.1} ({:>5.1})   vkQueueSubmit {:>5.1}",
                v.name,
                percentile(&mut total.clone(), 0.5),
                percentile(&mut total, 0.1),
                percentile(&mut submit, 0.5)
            );
        }
        // SAFETY: every submission was waited for.
        unsafe {
            device.destroy_fence(fence, None);
            device.destroy_semaphore(semaphore, None);
            device.destroy_command_pool(pool, None);
        }
    }
    // The buffers and their memory go with the process.
}
