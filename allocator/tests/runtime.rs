//! The runtime on the real default device (lavapipe in CI): threads sharing a
//! context, non-coherent memory through a simulated table, pooling.

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use ash::vk;
use vkcopy::{Buffer, Context, ContextOptions, ElemType, Emulate, MappedCopy, SmallCopyQueue};

mod common;

use common::{assert_clean, context, noncoherent_only};

/// Fills on the host, uploads, clears the host, reads back; returns mismatches.
fn round_trip(ctx: &Context, name: &str, extents: &[i64], seed: i64) -> u64 {
    let mut b = Buffer::new(name, ElemType::I32, extents).unwrap();
    b.fill(|c| {
        c.iter()
            .enumerate()
            .map(|(d, v)| v * (d as i64 * 1000 + 1))
            .sum::<i64>()
            + seed
    })
    .unwrap();
    ctx.copy_to_device(&mut b).unwrap();
    b.fill(|_| -1).unwrap();
    b.set_host_dirty(false);
    b.set_device_dirty(true);
    ctx.copy_to_host(&mut b).unwrap();
    b.compare(
        |c| {
            c.iter()
                .enumerate()
                .map(|(d, v)| v * (d as i64 * 1000 + 1))
                .sum::<i64>()
                + seed
        },
        1,
    )
    .unwrap()
    .mismatches
}

#[test]
fn context_is_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Context>();
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    thread::scope(|s| {
        for t in 0..4i64 {
            let ctx = ctx.clone();
            s.spawn(move || {
                for i in 0..8 {
                    let extent = 100 + 37 * t + i;
                    let bad = round_trip(&ctx, &format!("t{t}.{i}"), &[extent, 33], t * 100 + i);
                    assert_eq!(bad, 0, "thread {t} copy {i}");
                }
            });
        }
    });
    assert_clean(&ctx);
}

#[test]
fn threads_have_blocking_work_in_flight_together() {
    // Every copy by the GPU: where `auto` sends a copy is measured, so under
    // load the CPU may take some, and the count of submissions changes with it.
    // For the same reason one queue: choosing among several (on a GPU) makes
    // a class's first copy on each.
    let Some(ctx) = context(ContextOptions {
        mapped_upload: MappedCopy::Never,
        mapped_readback: MappedCopy::Never,
        small_copy_queue: SmallCopyQueue::Compute,
        ..Default::default()
    }) else {
        return;
    };
    let busy = &ctx.stats().work_in_flight;
    // One thread: each submission ends before the next begins.
    for i in 0..4 {
        assert_eq!(round_trip(&ctx, "one", &[1 << 18], i), 0);
    }
    assert_eq!((busy.peak(), busy.live()), (1, 0));
    assert_eq!(
        busy.created(),
        12,
        "a clear of new memory, an upload and a readback each"
    );
    // Four threads, each submitting on a submitter of its own: their work can
    // be in flight together rather than queued behind one submitter's lock.
    // Whether two submissions overlap is the scheduler's call: on a loaded
    // machine of two cores one thread may run alone for many round trips. So
    // rounds, each round trip started together, go on until two overlap, for
    // up to a minute; one lock would hold the peak at 1 however long.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rounds = 0;
    while busy.peak() < 2 && Instant::now() < deadline {
        let together = Barrier::new(4);
        thread::scope(|s| {
            for t in 0..4i64 {
                let (ctx, together) = (ctx.clone(), &together);
                s.spawn(move || {
                    for i in 0..25 {
                        together.wait();
                        assert_eq!(round_trip(&ctx, "many", &[1 << 18], t * 100 + i), 0);
                    }
                });
            }
        });
        rounds += 1;
    }
    assert!(
        busy.peak() >= 2,
        "peak {} after {rounds} rounds of 100 round trips",
        busy.peak()
    );
    assert!(busy.peak() <= 4, "peak {}", busy.peak());
    assert_eq!(busy.live(), 0);
    assert_clean(&ctx);
}

#[test]
fn small_buffers_share_blocks() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let mut bufs: Vec<Buffer> = (0..50)
        .map(|i| Buffer::new(&format!("b{i}"), ElemType::U8, &[1000 + i]).unwrap())
        .collect();
    for b in &mut bufs {
        ctx.device_malloc(b).unwrap();
    }
    let counters = ctx.counters();
    let get = |n: &str| counters.iter().find(|(k, _)| *k == n).unwrap().1;
    // 50 regions of about 1 KiB share one 32 MiB block.
    assert_eq!(get("live_regions"), 50);
    assert_eq!(get("blocks"), 1);
    assert_eq!(get("block_bytes"), ctx.alloc_config().minimum_block_size);
    drop(bufs);
    // Released regions keep their memory until release_unused.
    assert_eq!(ctx.release_unused(), 1);
    assert_clean(&ctx);
}

#[test]
fn reuse_off_frees_each_allocation_when_its_buffer_does() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let get = |n: &str| ctx.counters().iter().find(|(k, _)| *k == n).unwrap().1;
    assert!(ctx.reuses_device_allocations());
    let mut a = Buffer::new("a", ElemType::U8, &[4096]).unwrap();
    let mut b = Buffer::new("b", ElemType::U8, &[4096]).unwrap();
    ctx.device_malloc(&mut a).unwrap();
    ctx.device_malloc(&mut b).unwrap();
    drop(a);
    // Kept: the block, and the free region's buffer for the next request.
    assert_eq!(
        (get("live_regions"), get("blocks"), get("live_buffers")),
        (1, 1, 2)
    );
    // Off: empty blocks go now; b still holds this one (a's free region keeps its
    // buffer until it merges with a free neighbour or its block goes).
    assert_eq!(ctx.reuse_device_allocations(false), 0);
    assert!(!ctx.reuses_device_allocations());
    assert_eq!(
        (get("live_regions"), get("blocks"), get("live_buffers")),
        (1, 1, 2)
    );
    drop(b);
    // The last region freed with reuse off takes its block with it.
    assert_eq!(
        (get("live_regions"), get("blocks"), get("live_buffers")),
        (0, 0, 0)
    );
    // On again: freed allocations stay until release_unused.
    assert_eq!(ctx.reuse_device_allocations(true), 0);
    let mut c = Buffer::new("c", ElemType::U8, &[4096]).unwrap();
    ctx.device_malloc(&mut c).unwrap();
    drop(c);
    assert_eq!(get("blocks"), 1);
    assert_eq!(ctx.reuse_device_allocations(false), 1);
    assert_eq!(get("blocks"), 0);
    assert_clean(&ctx);
}

#[test]
fn noncoherent_memory_needs_flush_and_invalidate() {
    let options = ContextOptions {
        simulate_memory: Some(noncoherent_only()),
        ..Default::default()
    };
    let Some(ctx) = context(options.clone()) else {
        return;
    };
    // Odd sizes: flush and invalidate ranges must be atom-aligned and clamped.
    for (i, extent) in [1i64, 63, 64, 1000, 4097].into_iter().enumerate() {
        assert_eq!(
            round_trip(&ctx, "nc", &[extent], i as i64),
            0,
            "extent {extent}"
        );
    }
    let placements = ctx.stats().placements();
    assert!(placements
        .iter()
        .filter(|p| p.role != vkcopy::Role::Device)
        .all(|p| p.memory_type == 2));
    assert_clean(&ctx);

    // Without them, the data is stale.
    let buggy = ContextOptions {
        emulate: Emulate {
            no_flush_invalidate: true,
            ..Default::default()
        },
        ..options
    };
    let ctx = context(buggy).expect("the device was there a moment ago");
    // Staging regions are reused, so a stale cache could hold exactly the data
    // staged last; stage another buffer in between.
    let mut a = Buffer::new("a", ElemType::I32, &[1000]).unwrap();
    let mut b = Buffer::new("b", ElemType::I32, &[1000]).unwrap();
    a.fill(|c| c[0]).unwrap();
    b.fill(|c| -c[0]).unwrap();
    ctx.copy_to_device(&mut a).unwrap();
    ctx.copy_to_device(&mut b).unwrap();
    a.set_device_dirty(true);
    ctx.copy_to_host(&mut a).unwrap();
    assert_ne!(a.compare(|c| c[0], 1).unwrap().mismatches, 0);
}

#[test]
fn large_copies_use_the_users_host_memory_when_the_device_can_import_it() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    if !ctx.info().features.contains(&"VK_EXT_external_memory_host") {
        eprintln!("skipping: no VK_EXT_external_memory_host");
        return;
    }
    // 4 MiB with a strided, offset view: the GPU writes only the view's elements.
    let mut full = Buffer::new("full", ElemType::I32, &[1024, 1024]).unwrap();
    full.fill(|c| c[0] + 1024 * c[1]).unwrap();
    ctx.copy_to_device(&mut full).unwrap();
    let mut back = Buffer::new("back", ElemType::I32, &[1024, 1024]).unwrap();
    back.fill(|_| -1).unwrap();
    back.set_host_dirty(false);
    ctx.buffer_copy(&full, &mut back, false).unwrap();
    // full's host is valid, so that was a host copy; now from the device only.
    let dev = full.without_host("dev");
    ctx.buffer_copy(&dev, &mut back, false).unwrap();
    assert_eq!(
        back.compare(|c| c[0] + 1024 * c[1], 1).unwrap().mismatches,
        0
    );
    let imported: Vec<_> = ctx
        .stats()
        .placements()
        .into_iter()
        .filter(|p| p.imported)
        .collect();
    assert_eq!(
        imported.len(),
        2,
        "the upload and the readback import: {imported:?}"
    );
    assert_eq!(imported[1].role, vkcopy::Role::Readback);
    drop((full, back, dev));
    assert_clean(&ctx);

    // Turned off, the same copy stages.
    let ctx = context(ContextOptions {
        import_host: false,
        ..Default::default()
    })
    .unwrap();
    assert!(!ctx.info().features.contains(&"VK_EXT_external_memory_host"));
    assert_eq!(round_trip(&ctx, "staged", &[1024, 1024], 3), 0);
    assert!(ctx.stats().placements().iter().all(|p| !p.imported));

    // The Halide policies model Halide, which always stages.
    let ctx = context(ContextOptions {
        policy: vkcopy::Policy::Halide,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(round_trip(&ctx, "halide", &[1024, 1024], 4), 0);
    assert!(ctx.stats().placements().iter().all(|p| !p.imported));
}

#[test]
fn an_import_is_kept_while_its_host_memory_lives() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    if !ctx.info().features.contains(&"VK_EXT_external_memory_host") {
        eprintln!("skipping: no VK_EXT_external_memory_host");
        return;
    }
    let live = |ctx: &Context| {
        ctx.counters()
            .iter()
            .find(|(n, _)| *n == "live_device_memories")
            .unwrap()
            .1
    };
    let mut g = Buffer::new("g", ElemType::U32, &[1 << 20]).unwrap();
    for round in 0..3 {
        g.fill(|c| c[0] * 3 + round).unwrap();
        ctx.copy_to_device(&mut g).unwrap();
        g.fill(|_| 0).unwrap();
        g.set_host_dirty(false);
        g.set_device_dirty(true);
        ctx.copy_to_host(&mut g).unwrap();
        assert_eq!(
            g.compare(|c| c[0] * 3 + round, 1).unwrap().mismatches,
            0,
            "round {round}"
        );
    }
    let imports = ctx
        .stats()
        .placements()
        .iter()
        .filter(|p| p.imported)
        .count();
    assert_eq!(imports, 1, "one import serves every copy of the buffer");
    let before = live(&ctx);
    drop(g);
    // The device block of g and the import go; pooled blocks stay until release_unused.
    assert_eq!(live(&ctx), before - 1);
    assert_clean(&ctx);
}

#[test]
fn a_native_vk_buffer_wraps_as_a_region_and_detaches() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let device = &ctx.raw_device();
    let size = 64 * 64 * 4;
    let info = vk::BufferCreateInfo::default().size(size).usage(
        vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST
            | vk::BufferUsageFlags::STORAGE_BUFFER,
    );
    // SAFETY: a plain buffer and memory of this device, freed at the end of the test
    // after the context has detached the buffer.
    let (buffer, memory) = unsafe {
        let buffer = device.create_buffer(&info, None).unwrap();
        let req = device.get_buffer_memory_requirements(buffer);
        let ty = req.memory_type_bits.trailing_zeros();
        let memory = device
            .allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(ty),
                None,
            )
            .unwrap();
        device.bind_buffer_memory(buffer, memory, 0).unwrap();
        (buffer, memory)
    };
    let mut g = Buffer::with_dims(
        "g",
        ElemType::I32,
        vkcopy::types::dense_dims(&[64, 64]),
        false,
    )
    .unwrap();
    ctx.device_and_host_malloc(&mut Buffer::new("other", ElemType::U8, &[3]).unwrap())
        .unwrap();
    ctx.wrap_vk_buffer(&mut g, buffer, size).unwrap();
    // A second wrap, a too-small buffer, or detaching vkcopy's own memory are errors.
    assert_eq!(
        ctx.wrap_vk_buffer(&mut g, buffer, size).unwrap_err().name(),
        "incompatible_buffers"
    );
    g.set_device_dirty(false);
    // Write through the wrapped buffer, crop it, read the crop back.
    let mut h = Buffer::new("h", ElemType::I32, &[64, 64]).unwrap();
    h.fill(|c| c[0] + 64 * c[1]).unwrap();
    ctx.buffer_copy(&h, &mut g, true).unwrap();
    {
        let crop = g.cropped("crop", &[8, 8], &[16, 16]).unwrap();
        assert!(
            ctx.detach_vk_buffer(&mut g).is_err(),
            "a live crop blocks detaching"
        );
        let mut back =
            Buffer::with_dims("back", ElemType::I32, crop.dims().to_vec(), true).unwrap();
        ctx.buffer_copy(&crop, &mut back, false).unwrap();
        assert_eq!(back.compare(|c| c[0] + 64 * c[1], 1).unwrap().mismatches, 0);
    }
    assert_eq!(ctx.detach_vk_buffer(&mut g).unwrap(), buffer);
    assert!(!g.has_device_allocation());
    let mut own = Buffer::new("own", ElemType::I32, &[4]).unwrap();
    ctx.device_malloc(&mut own).unwrap();
    assert_eq!(
        ctx.detach_vk_buffer(&mut own).unwrap_err().name(),
        "incompatible_buffers"
    );
    ctx.device_and_host_free(&mut own).unwrap();
    assert!(!own.has_host() && !own.has_device_allocation());
    drop((own, h, g));
    assert_clean(&ctx);
    // SAFETY: detached above; no submission uses it.
    unsafe {
        device.destroy_buffer(buffer, None);
        device.free_memory(memory, None);
    }
}

#[test]
fn impossible_host_memory_is_an_error_not_an_abort() {
    for extents in [
        &[100_000_000_000_000i64][..],
        &[i64::MAX],
        &[1 << 40, 1 << 40],
    ] {
        let e = Buffer::new("huge", ElemType::U8, extents).unwrap_err();
        assert_eq!(e.name(), "bad_dimensions", "{extents:?}: {e}");
    }
}

#[test]
fn raw_copies_run_on_every_device_path_and_free_their_memory() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    use vkcopy::CopyPath;
    let placed = |ctx: &Context| ctx.stats().placements().len();
    for path in [
        CopyPath::HostToDevice,
        CopyPath::DeviceToHost,
        CopyPath::DeviceToDevice,
    ] {
        let before = placed(&ctx);
        let raw = ctx.raw_copy(path, 1 << 20).unwrap();
        assert_eq!(raw.bytes(), 1 << 20);
        assert_eq!(placed(&ctx), before + 2, "{path:?}: both sides allocated");
        for _ in 0..3 {
            assert!(raw.run().unwrap() > std::time::Duration::ZERO);
        }
    }
    let host = ctx.raw_copy(CopyPath::HostToHost, 64).err().unwrap();
    assert!(host.to_string().contains("memcpy"), "{host}");
    let empty = ctx.raw_copy(CopyPath::DeviceToHost, 0).err().unwrap();
    assert!(empty.to_string().contains("0 bytes"), "{empty}");
    ctx.release_unused();
    assert_clean(&ctx);
}
