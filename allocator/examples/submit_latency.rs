//! The driver's floor under a small copy, with plain `ash` and no vkcopy code:
//! how long one submission takes from `vkQueueSubmit` until the host sees it
//! done, for an empty command buffer and for a 4 KiB `vkCmdCopyBuffer` (bare, and
//! with the barriers vkcopy records before and after a submission), waited for by
//! polling a timeline semaphore or a fence, on every queue family that copies.
//! What vkcopy's own code adds on top is `vkcopy-suite bench --breakdown`.
//!
//! Then bare copies of 4 KiB to 16 MiB recorded once, into host-coherent
//! system memory (a readback) and into device memory; last, the CPU reading
//! host-visible device memory itself, with plain loads and streaming loads.
//!
//! `cargo run --release --example submit_latency -- [SUBMISSIONS]` (default 500);
//! prints the median and the 10th percentile of each, in microseconds.

use std::time::Instant;

use ash::vk;

const BYTES: u64 = 4096;
/// The largest copy of the size variants.
const LARGEST: u64 = 16 << 20;

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
    /// Recorded once and submitted again each time.
    again: bool,
    /// After the work, a barrier and a 4-byte fill of host-coherent memory that
    /// the host polls, besides the timeline semaphore.
    flag: bool,
    /// Timeline semaphores the submission waits for, each at a value already
    /// reached: the submitter's own previous value first, then others'.
    waits: usize,
    /// Bytes copied.
    bytes: u64,
    /// Into host-coherent system memory instead of device memory.
    to_host: bool,
    /// That memory is host-cached too (as readback staging is).
    cached: bool,
}

const fn variant(name: &'static str, copy: bool, before: bool, after: bool) -> Variant {
    Variant {
        name,
        copy,
        before,
        after,
        fence: false,
        again: false,
        flag: false,
        waits: 0,
        bytes: BYTES,
        to_host: false,
        cached: false,
    }
}

/// [`sized`] into host-cached memory, with the barrier before as vkcopy records.
const fn cached(name: &'static str, bytes: u64) -> Variant {
    Variant {
        cached: true,
        before: true,
        ..sized(name, bytes, true)
    }
}

/// A bare copy of `bytes`, recorded once; into system memory (with the
/// barrier to the host a readback needs) or device memory.
const fn sized(name: &'static str, bytes: u64, to_host: bool) -> Variant {
    again(Variant {
        bytes,
        to_host,
        ..variant(name, true, false, to_host)
    })
}

const fn fenced(v: Variant) -> Variant {
    Variant { fence: true, ..v }
}

const fn again(v: Variant) -> Variant {
    Variant { again: true, ..v }
}

const fn waiting(waits: usize, v: Variant) -> Variant {
    Variant { waits, ..v }
}

const fn flagged(v: Variant) -> Variant {
    Variant { flag: true, ..v }
}

const VARIANTS: [Variant; 23] = [
    variant("empty, timeline", false, false, false),
    fenced(variant("empty, fence", false, false, false)),
    variant("copy, timeline", true, false, false),
    variant("before+copy, timeline", true, true, false),
    variant("copy+after, timeline", true, false, true),
    variant("before+copy+after, timeline", true, true, true),
    fenced(variant("before+copy+after, fence", true, true, true)),
    again(variant("copy, recorded once", true, false, false)),
    again(variant("before+copy, recorded once", true, true, false)),
    waiting(1, variant("copy, 1 wait", true, false, false)),
    waiting(4, variant("copy, 4 waits", true, false, false)),
    again(waiting(
        1,
        variant("copy, once, 1 wait", true, false, false),
    )),
    flagged(variant("copy, flag polled", true, false, false)),
    again(flagged(variant(
        "before+copy, once, flag",
        true,
        true,
        false,
    ))),
    sized("readback 64 KiB, once", 64 << 10, true),
    sized("readback 1 MiB, once", 1 << 20, true),
    sized("readback 4 KiB, once", BYTES, true),
    sized("device 64 KiB, once", 64 << 10, false),
    sized("device 1 MiB, once", 1 << 20, false),
    sized("device 16 MiB, once", LARGEST, false),
    cached("before+readback 4 KiB, cached", BYTES),
    cached("before+readback 64 KiB, cached", 64 << 10),
    cached("before+readback 1 MiB, cached", 1 << 20),
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
    let buffer = |usage, wanted: vk::MemoryPropertyFlags| {
        let info = vk::BufferCreateInfo::default()
            .size(LARGEST)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info; the buffer lives until the process ends.
        let b = unsafe { device.create_buffer(&info, None) }.expect("vkCreateBuffer");
        // SAFETY: a live buffer.
        let req = unsafe { device.get_buffer_memory_requirements(b) };
        // System memory for the host's flag where the device has it apart.
        let fits = |i: u32| {
            let flags = memory.memory_types[i as usize].property_flags;
            req.memory_type_bits & (1 << i) != 0 && flags.contains(wanted)
        };
        let apart = |i: &u32| {
            !memory.memory_types[*i as usize]
                .property_flags
                .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        };
        let index = (0..memory.memory_type_count)
            .filter(|&i| fits(i))
            .find(apart)
            .or_else(|| (0..memory.memory_type_count).find(|&i| fits(i)))
            .expect("a memory type");
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(index);
        // SAFETY: valid allocate info; bound once below.
        let m = unsafe { device.allocate_memory(&alloc, None) }.expect("vkAllocateMemory");
        // SAFETY: fresh buffer and memory of a type it allows.
        unsafe { device.bind_buffer_memory(b, m, 0) }.expect("vkBindBufferMemory");
        (b, m)
    };
    let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
    let (src, _) = buffer(vk::BufferUsageFlags::TRANSFER_SRC, local);
    let (dst, _) = buffer(vk::BufferUsageFlags::TRANSFER_DST, local);
    let coherent = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let (flag_buffer, flag_memory) = buffer(vk::BufferUsageFlags::TRANSFER_DST, coherent);
    let (host, _) = buffer(vk::BufferUsageFlags::TRANSFER_DST, coherent);
    let (host_cached, _) = buffer(
        vk::BufferUsageFlags::TRANSFER_DST,
        coherent | vk::MemoryPropertyFlags::HOST_CACHED,
    );
    // SAFETY: host-visible memory, mapped once for the process.
    let flag =
        unsafe { device.map_memory(flag_memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
            .expect("vkMapMemory") as *const u32;
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
        let met = (0..3)
            .map(|_| {
                let mut timeline = vk::SemaphoreTypeCreateInfo::default()
                    .semaphore_type(vk::SemaphoreType::TIMELINE)
                    .initial_value(1);
                let info = vk::SemaphoreCreateInfo::default().push_next(&mut timeline);
                // SAFETY: timeline semaphores are enabled.
                unsafe { device.create_semaphore(&info, None) }.expect("semaphore")
            })
            .collect();
        let sync = Sync {
            semaphore,
            fence,
            met,
            flag,
        };
        let compute = flags.intersects(vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS);
        let t = Instant::now();
        for _ in 0..1000 {
            // SAFETY: a live timeline semaphore.
            unsafe { device.get_semaphore_counter_value(semaphore) }.expect("value");
        }
        println!(
            "family {family} ({flags:?}); vkGetSemaphoreCounterValue {:.3} us",
            t.elapsed().as_secs_f64() * 1e6 / 1000.0
        );
        let mut value = 0u64;
        for v in VARIANTS {
            let (mut total, mut submit, mut seen) = (Vec::new(), Vec::new(), Vec::new());
            let mut recording = Vec::new();
            for i in 0..n + 20 {
                if v.again && i > 0 {
                    value += 1;
                    let flagged = submit_and_wait(&device, queue, cmd, &sync, value, v);
                    if i >= 20 {
                        total.push(flagged.done);
                        submit.push(flagged.submit);
                        seen.extend(flagged.flag);
                    }
                    continue;
                }
                let begun = Instant::now();
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
                        size: v.bytes,
                    }];
                    let to = match (v.to_host, v.cached) {
                        (true, true) => host_cached,
                        (true, false) => host,
                        _ => dst,
                    };
                    // SAFETY: recording; every buffer holds LARGEST bytes.
                    unsafe { device.cmd_copy_buffer(cmd, src, to, &region) };
                }
                if v.flag {
                    let w = vk::AccessFlags::TRANSFER_WRITE;
                    barrier(w, w, vk::PipelineStageFlags::TRANSFER);
                    // SAFETY: recording; the flag buffer holds BYTES.
                    unsafe { device.cmd_fill_buffer(cmd, flag_buffer, 0, 4, (value + 1) as u32) };
                }
                if v.after || v.flag {
                    let w = vk::AccessFlags::TRANSFER_WRITE;
                    barrier(w, vk::AccessFlags::HOST_READ, vk::PipelineStageFlags::HOST);
                }
                // SAFETY: recording.
                unsafe { device.end_command_buffer(cmd) }.expect("end");
                let recorded = begun.elapsed().as_secs_f64() * 1e6;
                value += 1;
                let timed = submit_and_wait(&device, queue, cmd, &sync, value, v);
                if i >= 20 {
                    recording.push(recorded);
                    total.push(timed.done);
                    submit.push(timed.submit);
                    seen.extend(timed.flag);
                }
            }
            let flag_seen = match seen.is_empty() {
                true => String::new(),
                false => format!("   flag seen {:>6.1}", percentile(&mut seen, 0.5)),
            };
            // Recorded once: the first recording is before the timed ones.
            let recorded = match recording.is_empty() {
                true => 0.0,
                false => percentile(&mut recording, 0.5),
            };
            println!(
                "  {:<28} record {recorded:>4.1}   submit to done {:>6.1} ({:>5.1})   vkQueueSubmit {:>5.1}{flag_seen}",
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
            for &s in &sync.met {
                device.destroy_semaphore(s, None);
            }
            device.destroy_command_pool(pool, None);
        }
    }
    cpu_reads(&device, &memory, n);
    // The buffers and their memory go with the process.
    println!("ok");
}

/// CPU reads of host-visible device memory (the BAR), as GDRCopy makes them,
/// beside the GPU's readbacks above: plain copies and SSE4.1 streaming loads
/// (`movntdqa`, which reads write-combined memory a line at a time), 4 KiB to
/// 1 MiB, best and median of `n`.
fn cpu_reads(device: &ash::Device, memory: &vk::PhysicalDeviceMemoryProperties, n: usize) {
    use vk::MemoryPropertyFlags as F;
    let wanted = F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT;
    let Some(index) = (0..memory.memory_type_count).find(|&i| {
        memory.memory_types[i as usize]
            .property_flags
            .contains(wanted)
    }) else {
        println!("CPU reads: no host-visible device memory");
        return;
    };
    const MOST: usize = 1 << 20;
    let alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(MOST as u64)
        .memory_type_index(index);
    // SAFETY: valid allocate info; the memory lives until the process ends.
    let m = unsafe { device.allocate_memory(&alloc, None) }.expect("vkAllocateMemory");
    // SAFETY: host-visible memory, mapped once for the process.
    let src = unsafe { device.map_memory(m, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
        .expect("vkMapMemory") as *const u8;
    // 16-byte aligned destination for the streaming loads' stores.
    let mut dst = vec![0u128; MOST / 16];
    let out = dst.as_mut_ptr() as *mut u8;
    println!(
        "CPU reads of host-visible device memory (type {index}), microseconds: best / median; GB/s at the best"
    );
    let mut size = 4096;
    while size <= MOST {
        let time = |read: &dyn Fn()| {
            let mut t: Vec<f64> = (0..n + 5)
                .map(|_| {
                    let begun = Instant::now();
                    read();
                    begun.elapsed().as_secs_f64() * 1e6
                })
                .skip(5)
                .collect();
            (percentile(&mut t, 0.0), percentile(&mut t, 0.5))
        };
        // SAFETY: both spans hold `size` bytes (MOST at most) and do not overlap.
        let plain = time(&|| unsafe { std::ptr::copy_nonoverlapping(src, out, size) });
        let streamed = streaming_available().then(|| {
            // SAFETY: as above; the CPU has SSE4.1 and `out` is 16-byte aligned.
            time(&|| unsafe { stream_copy(src, out, size) })
        });
        let gbps = |us: f64| size as f64 / us / 1e3;
        let line = |(best, median): (f64, f64)| {
            format!("{best:>7.1} / {median:>7.1} ({:>5.2} GB/s)", gbps(best))
        };
        println!(
            "  {:>5} KiB   plain {}   streaming {}",
            size / 1024,
            line(plain),
            streamed.map_or("-".into(), line)
        );
        size *= 4;
    }
}

fn streaming_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("sse4.1")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Copies `n` bytes (a multiple of 64) with streaming loads.
///
/// # Safety
/// `src` and `dst` hold `n` bytes each, `dst` is 16-byte aligned, the CPU has SSE4.1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
unsafe fn stream_copy(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_store_si128, _mm_stream_load_si128};
    for i in (0..n).step_by(64) {
        // SAFETY: the caller's bounds; mapped memory is page-aligned, so each
        // 16-byte load is aligned too.
        unsafe {
            let s = src.add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            let (a, b, c, e) = (
                _mm_stream_load_si128(s),
                _mm_stream_load_si128(s.add(1)),
                _mm_stream_load_si128(s.add(2)),
                _mm_stream_load_si128(s.add(3)),
            );
            _mm_store_si128(d, a);
            _mm_store_si128(d.add(1), b);
            _mm_store_si128(d.add(2), c);
            _mm_store_si128(d.add(3), e);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn stream_copy(_: *const u8, _: *mut u8, _: usize) {}

/// Microseconds from `vkQueueSubmit`: until it returned, until the host saw
/// the semaphore (or fence) done, and until it saw the flag (flag variants).
struct Timed {
    submit: f64,
    done: f64,
    flag: Option<f64>,
}

/// What a submission signals and waits for, besides its command buffer.
struct Sync {
    semaphore: vk::Semaphore,
    fence: vk::Fence,
    /// Timeline semaphores already at 1, for waits that are already met.
    met: Vec<vk::Semaphore>,
    /// Host-coherent memory a flag variant's command buffer writes.
    flag: *const u32,
}

/// Submits `cmd` once, signalling `value` (or `fence`), and polls until done.
/// A flag variant's command buffer fills the flag with a value other than 0;
/// the host clears it before each submission.
fn submit_and_wait(
    device: &ash::Device,
    queue: vk::Queue,
    cmd: vk::CommandBuffer,
    sync: &Sync,
    value: u64,
    v: Variant,
) -> Timed {
    let (semaphore, fence, flag) = (sync.semaphore, sync.fence, sync.flag);
    let values = [value];
    let sems = [semaphore];
    let waits: Vec<_> = std::iter::once((semaphore, value - 1))
        .chain(sync.met.iter().map(|&s| (s, 1)))
        .take(v.waits)
        .collect();
    let (wait_sems, wait_values): (Vec<_>, Vec<_>) = waits.into_iter().unzip();
    let stages = vec![vk::PipelineStageFlags::ALL_COMMANDS; wait_sems.len()];
    let mut t = vk::TimelineSemaphoreSubmitInfo::default()
        .signal_semaphore_values(&values)
        .wait_semaphore_values(&wait_values);
    let cmds = [cmd];
    let mut info = vk::SubmitInfo::default()
        .command_buffers(&cmds)
        .wait_semaphores(&wait_sems)
        .wait_dst_stage_mask(&stages);
    if !v.fence {
        info = info.signal_semaphores(&sems).push_next(&mut t);
    }
    let fence = if v.fence { fence } else { vk::Fence::null() };
    if v.flag {
        // SAFETY: the flag's memory is mapped and coherent; the last submission
        // that wrote it was waited for.
        unsafe { (flag as *mut u32).write_volatile(0) };
    }
    let submitted = Instant::now();
    // SAFETY: recording is complete; one thread uses the queue.
    unsafe { device.queue_submit(queue, &[info], fence) }.expect("submit");
    let after_submit = Instant::now();
    let mut flag_seen = None;
    loop {
        if v.flag && flag_seen.is_none() {
            // SAFETY: as above; the device writes it.
            if unsafe { flag.read_volatile() } != 0 {
                flag_seen = Some(Instant::now());
            } else {
                std::hint::spin_loop();
                continue;
            }
        }
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
    let us = |t: Instant| (t - submitted).as_secs_f64() * 1e6;
    Timed {
        submit: us(after_submit),
        done: us(end),
        flag: flag_seen.map(us),
    }
}
