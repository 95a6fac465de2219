//! Reserve+release throughput of vkcopy's pooled allocator against `gpu-allocator`,
//! on the same `VkDevice` (issue 3, item 10). See `bench/README.md`.
//!
//! Three columns per size class and pattern, in nanoseconds per reserve+release:
//!
//! * `vkcopy`: `Context::allocate(Role::Device, size)` and dropping the `Arc<Region>`.
//!   Each region comes with a `VkBuffer` bound at its offset, which the pool keeps
//!   for reuse when a later request takes the same offset and size.
//! * `gpu-alloc`: `gpu_allocator::vulkan::Allocator::allocate` and `free`: memory
//!   only, no buffer.
//! * `gpu-alloc+buf`: the same, plus `vkCreateBuffer` / `vkBindBufferMemory` before
//!   and `vkDestroyBuffer` after, so that each reservation also ends in a bound
//!   buffer, as vkcopy's does (like for like).
//!
//! Patterns: `single` (reserve, release, repeat) and `batch` (reserve 256, release
//! the 256 in the order they were reserved, repeat). Each is warmed up once, then
//! timed 5 times, interleaving the three columns; the best run counts.
//!
//! Environment: `VKCOPY_BENCH_SCALE` multiplies the operation counts (default 1;
//! `0.1` for a quick look). `VKCOPY_BENCH_FILTER` runs only the rows whose
//! "size pattern" label contains it (`"1 KiB single"`, `"mixed"`, `"batch"`).
//! `VKCOPY_DEVICE` etc. pick the device as everywhere in
//! vkcopy; the validation layer is never enabled here (it would dominate the timing).

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ash::vk;
use gpu_allocator::vulkan::{
    Allocation, AllocationCreateDesc, AllocationScheme, Allocator, AllocatorCreateDesc,
};
use gpu_allocator::MemoryLocation;
use vkcopy::Region;
use vkcopy::{Context, ContextOptions, Role};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
/// Reserve+release pairs per `single` run.
const SINGLE_OPS: usize = 20_000;
/// Regions held at once in the `batch` pattern.
const BATCH: usize = 256;
/// Rounds of `BATCH` per `batch` run.
const BATCH_ROUNDS: usize = 40;
/// Timed runs; the best counts.
const RUNS: usize = 5;
/// Seed of the mixed-size sequence.
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;
/// Same usage as vkcopy's buffers (`BUFFER_USAGE` in `allocator/src/vk/allocator.rs`).
const USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// xorshift64* (Vigna): enough for a reproducible size sequence, no `rand` crate.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Copy)]
enum Class {
    Fixed(u64),
    /// Log-uniform in 1 KiB ..= 1 MiB, any byte count.
    Mixed,
}

impl Class {
    fn label(self) -> String {
        match self {
            Class::Fixed(s) if s >= MIB => format!("{} MiB", s / MIB),
            Class::Fixed(s) => format!("{} KiB", s / KIB),
            Class::Mixed => "mixed 1K-1M".to_owned(),
        }
    }

    fn sequence(self, len: usize) -> Vec<u64> {
        match self {
            Class::Fixed(s) => vec![s; len],
            Class::Mixed => {
                let mut rng = XorShift(SEED);
                let (lo, hi) = ((KIB as f64).ln(), (MIB as f64).ln());
                (0..len)
                    .map(|_| ((lo + (hi - lo) * rng.unit()).exp() as u64).clamp(KIB, MIB))
                    .collect()
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pattern {
    Single,
    Batch,
}

impl Pattern {
    fn label(self) -> &'static str {
        match self {
            Pattern::Single => "single",
            Pattern::Batch => "batch",
        }
    }

    fn ops(self, scale: f64) -> usize {
        match self {
            Pattern::Single => ((SINGLE_OPS as f64 * scale) as usize).max(1),
            Pattern::Batch => ((BATCH_ROUNDS as f64 * scale) as usize).max(1) * BATCH,
        }
    }
}

/// What the gpu-allocator columns need per request, computed before timing.
struct Request {
    size: u64,
    requirements: vk::MemoryRequirements,
}

/// The memory requirements of a real buffer of each distinct size in `sizes`.
fn requirements(device: &ash::Device, sizes: &[u64]) -> Vec<Request> {
    let mut known: HashMap<u64, vk::MemoryRequirements> = HashMap::new();
    sizes
        .iter()
        .map(|&size| {
            let requirements = *known.entry(size).or_insert_with(|| {
                let info = buffer_info(size);
                // SAFETY: valid create info; the probe is destroyed right after the query.
                unsafe {
                    let b = device.create_buffer(&info, None).expect("vkCreateBuffer");
                    let r = device.get_buffer_memory_requirements(b);
                    device.destroy_buffer(b, None);
                    r
                }
            });
            Request { size, requirements }
        })
        .collect()
}

fn buffer_info(size: u64) -> vk::BufferCreateInfo<'static> {
    vk::BufferCreateInfo::default()
        .size(size)
        .usage(USAGE)
        .sharing_mode(vk::SharingMode::EXCLUSIVE)
}

fn desc(r: &Request) -> AllocationCreateDesc<'static> {
    AllocationCreateDesc {
        name: "bench",
        requirements: r.requirements,
        location: MemoryLocation::GpuOnly,
        linear: true,
        allocation_scheme: AllocationScheme::GpuAllocatorManaged,
    }
}

/// The three things timed. Each runs one pattern over `seq` and returns its time.
fn run_vkcopy(ctx: &Context, pattern: Pattern, seq: &[Request]) -> Duration {
    let start = Instant::now();
    match pattern {
        Pattern::Single => {
            for r in seq {
                let region = ctx.allocate(Role::Device, r.size).expect("vkcopy allocate");
                black_box(&region);
                drop(region);
            }
        }
        Pattern::Batch => {
            let mut held: Vec<Arc<Region>> = Vec::with_capacity(BATCH);
            for round in seq.chunks(BATCH) {
                for r in round {
                    held.push(ctx.allocate(Role::Device, r.size).expect("vkcopy allocate"));
                }
                black_box(&held);
                held.clear();
            }
        }
    }
    start.elapsed()
}

fn run_gpu_allocator(alloc: &mut Allocator, pattern: Pattern, seq: &[Request]) -> Duration {
    let start = Instant::now();
    match pattern {
        Pattern::Single => {
            for r in seq {
                let a = alloc.allocate(&desc(r)).expect("gpu-allocator allocate");
                black_box(&a);
                alloc.free(a).expect("gpu-allocator free");
            }
        }
        Pattern::Batch => {
            let mut held: Vec<Allocation> = Vec::with_capacity(BATCH);
            for round in seq.chunks(BATCH) {
                for r in round {
                    held.push(alloc.allocate(&desc(r)).expect("gpu-allocator allocate"));
                }
                black_box(&held);
                for a in held.drain(..) {
                    alloc.free(a).expect("gpu-allocator free");
                }
            }
        }
    }
    start.elapsed()
}

/// gpu-allocator plus what vkcopy does besides sub-allocating: a buffer bound at the
/// allocation. (vkcopy takes the requirements from a probe buffer made once, so
/// `vkGetBufferMemoryRequirements` is not timed here either.)
fn run_gpu_allocator_buffers(
    device: &ash::Device,
    alloc: &mut Allocator,
    pattern: Pattern,
    seq: &[Request],
) -> Duration {
    let reserve = |alloc: &mut Allocator, r: &Request| {
        // SAFETY: valid create info; the buffer is bound once, to memory that outlives
        // it (freed only after `release` destroys the buffer), and never used.
        unsafe {
            let buffer = device
                .create_buffer(&buffer_info(r.size), None)
                .expect("vkCreateBuffer");
            let a = alloc.allocate(&desc(r)).expect("gpu-allocator allocate");
            device
                .bind_buffer_memory(buffer, a.memory(), a.offset())
                .expect("vkBindBufferMemory");
            (buffer, a)
        }
    };
    let release = |alloc: &mut Allocator, (buffer, a): (vk::Buffer, Allocation)| {
        // SAFETY: the buffer was never used by the device.
        unsafe { device.destroy_buffer(buffer, None) };
        alloc.free(a).expect("gpu-allocator free");
    };
    let start = Instant::now();
    match pattern {
        Pattern::Single => {
            for r in seq {
                let held = reserve(alloc, r);
                black_box(&held);
                release(alloc, held);
            }
        }
        Pattern::Batch => {
            let mut held = Vec::with_capacity(BATCH);
            for round in seq.chunks(BATCH) {
                for r in round {
                    held.push(reserve(alloc, r));
                }
                black_box(&held);
                for h in held.drain(..) {
                    release(alloc, h);
                }
            }
        }
    }
    start.elapsed()
}

fn ns_per_op(d: Duration, ops: usize) -> f64 {
    d.as_nanos() as f64 / ops as f64
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

fn main() {
    let scale = std::env::var("VKCOPY_BENCH_SCALE")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0);
    let filter = std::env::var("VKCOPY_BENCH_FILTER")
        .ok()
        .filter(|f| !f.is_empty());
    // Plain options (VKCOPY_DEVICE is honoured), never validation.
    let mut options = ContextOptions::from_env().expect("VKCOPY_* settings");
    options.validation = false;
    let ctx = Context::new(options).expect("a Vulkan device (lavapipe will do)");
    let device = ctx.raw_device().clone();
    let info = ctx.info();
    let config = ctx.alloc_config();
    println!(
        "device: {} ({:?}, Vulkan {}, driver {})",
        info.name, info.device_type, info.api_version, info.driver
    );
    println!(
        "host: {}, {} threads available",
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "vkcopy blocks: {} MiB minimum, {} MiB maximum; gpu-allocator: default AllocationSizes \
         (256 MiB blocks of device-only memory types, 64 MiB of host-visible ones)",
        config.minimum_block_size / MIB,
        config.maximum_block_size / MIB
    );
    println!(
        "single: {} reserve+release pairs per run; batch: {} rounds of {BATCH}; best of {RUNS} runs after a warm-up",
        Pattern::Single.ops(scale),
        Pattern::Batch.ops(scale) / BATCH
    );
    println!();

    let classes = [
        Class::Fixed(KIB),
        Class::Fixed(4 * KIB),
        Class::Fixed(64 * KIB),
        Class::Fixed(256 * KIB),
        Class::Fixed(MIB),
        Class::Mixed,
    ];
    println!(
        "{:<12} {:<7} {:>10} {:>10} {:>7} {:>14} {:>7}",
        "size", "pattern", "vkcopy", "gpu-alloc", "ratio", "gpu-alloc+buf", "ratio"
    );
    println!(
        "{:<12} {:<7} {:>10} {:>10} {:>7} {:>14} {:>7}",
        "", "", "ns/op", "ns/op", "ga/vk", "ns/op", "ga+b/vk"
    );
    let mut slower = Vec::new();
    for class in classes {
        for pattern in [Pattern::Single, Pattern::Batch] {
            let row = format!("{} {}", class.label(), pattern.label());
            if !filter.as_ref().is_none_or(|f| row.contains(f.as_str())) {
                continue;
            }
            let ops = pattern.ops(scale);
            let seq = requirements(&device, &class.sequence(ops));
            // A fresh start for each row: vkcopy's free blocks (and the buffers kept
            // on their regions) go back; gpu-allocator gets a new allocator.
            ctx.release_unused();
            let mut ga = Allocator::new(&AllocatorCreateDesc {
                instance: ctx.raw_instance().clone(),
                device: device.clone(),
                physical_device: ctx.raw_physical_device(),
                debug_settings: Default::default(),
                buffer_device_address: false,
                allocation_sizes: Default::default(),
            })
            .expect("gpu-allocator Allocator::new");
            // Warm-up: blocks allocated and mapped, vkcopy's buffers cached, caches hot.
            run_vkcopy(&ctx, pattern, &seq);
            run_gpu_allocator(&mut ga, pattern, &seq);
            run_gpu_allocator_buffers(&device, &mut ga, pattern, &seq);
            let mut best = [Duration::MAX; 3];
            for _ in 0..RUNS {
                best[0] = best[0].min(run_vkcopy(&ctx, pattern, &seq));
                best[1] = best[1].min(run_gpu_allocator(&mut ga, pattern, &seq));
                best[2] = best[2].min(run_gpu_allocator_buffers(&device, &mut ga, pattern, &seq));
            }
            drop(ga);
            let [vk_ns, ga_ns, gab_ns] = best.map(|d| ns_per_op(d, ops));
            println!(
                "{:<12} {:<7} {:>10.0} {:>10.0} {:>7.2} {:>14.0} {:>7.2}",
                class.label(),
                pattern.label(),
                vk_ns,
                ga_ns,
                ga_ns / vk_ns,
                gab_ns,
                gab_ns / vk_ns
            );
            if gab_ns < vk_ns {
                slower.push(row);
            }
        }
    }
    ctx.release_unused();
    println!();
    println!("ratio > 1: vkcopy is faster. gpu-alloc only sub-allocates memory; vkcopy also");
    println!(
        "binds a VkBuffer to each region (kept and reused), so gpu-alloc+buf is like for like."
    );
    if slower.is_empty() {
        println!("vkcopy is at least as fast as gpu-allocator+buffer in every row.");
    } else {
        println!(
            "vkcopy is slower than gpu-allocator+buffer in: {}",
            slower.join(", ")
        );
    }
    let leaks = ctx.leak_check();
    if !leaks.is_empty() {
        println!("vkcopy leak check: {leaks:?}");
    }
}
