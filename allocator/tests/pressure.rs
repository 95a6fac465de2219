//! The allocator under memory pressure, on the real default device (lavapipe in CI)
//! with simulated tables: empty blocks go back to the driver before a heap is
//! reported full, dedicated blocks when released, and no block exceeds what the
//! real device can hold.

use ash::vk;
use vkcopy::memory::table::{DeviceType, MemoryHeap, MemoryTable, MemoryType};
use vkcopy::types::dense_dims;
use vkcopy::{Buffer, Context, ContextOptions, ElemType, Error};

mod common;

use common::{assert_clean, context, counter};

const MIB: u64 = 1024 * 1024;

/// One device-local heap of `heap` bytes with a device-local and a host-visible
/// coherent type.
fn one_heap(heap: u64) -> MemoryTable {
    MemoryTable {
        name: "synthetic one heap".into(),
        device_type: DeviceType::DiscreteGpu,
        non_coherent_atom_size: 64,
        heaps: vec![MemoryHeap {
            size: heap,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
            budget: None,
        }],
        types: vec![
            MemoryType {
                heap: 0,
                flags: vk::MemoryPropertyFlags::DEVICE_LOCAL,
            },
            MemoryType {
                heap: 0,
                flags: vk::MemoryPropertyFlags::DEVICE_LOCAL
                    | vk::MemoryPropertyFlags::HOST_VISIBLE
                    | vk::MemoryPropertyFlags::HOST_COHERENT,
            },
        ],
        buffer_memory_type_bits: 0b11,
        dedicated_from: None,
    }
}

fn simulated(heap: u64) -> Option<Context> {
    with_table(one_heap(heap))
}

fn with_table(table: MemoryTable) -> Option<Context> {
    context(ContextOptions {
        simulate_memory: Some(table),
        ..Default::default()
    })
}

/// A device-only buffer of `bytes` bytes.
fn device_buffer(bytes: u64) -> Buffer {
    Buffer::with_dims("b", ElemType::U8, dense_dims(&[bytes as i64]), false).unwrap()
}

fn malloc_error(ctx: &Context, bytes: u64) -> String {
    let mut b = device_buffer(bytes);
    match ctx.device_malloc(&mut b) {
        Err(e @ Error::DeviceMallocFailed(_)) => e.to_string(),
        other => panic!("{bytes} bytes: expected device_malloc_failed, got {other:?}"),
    }
}

#[test]
fn growing_sizes_each_freed_fit_one_heap() {
    // 924.6 MiB: the blocks of 100 to 250 MiB left empty would fill it by the 300.
    let Some(ctx) = simulated(969_521_152) else {
        return;
    };
    for mib in [100, 150, 200, 250, 300, 350, 400, 450, 500] {
        let mut b = device_buffer(mib * MIB);
        ctx.device_malloc(&mut b)
            .unwrap_or_else(|e| panic!("{mib} MiB: {e}"));
        drop(b);
        if mib * MIB > ctx.alloc_config().maximum_block_size {
            // A dedicated block goes back when its one region is released.
            assert_eq!(counter(&ctx, "blocks"), 0, "{mib} MiB");
        }
    }
    assert_eq!(counter(&ctx, "live_regions"), 0);
    assert_clean(&ctx);
}

#[test]
fn full_heap_message_counts_live_and_pooled_bytes_apart() {
    let heap = 969_521_152;
    let Some(ctx) = simulated(heap) else {
        return;
    };
    let mut small = device_buffer(1000);
    ctx.device_malloc(&mut small).unwrap();
    let mut big = device_buffer(600 * MIB);
    ctx.device_malloc(&mut big).unwrap();
    let e = malloc_error(&ctx, 400 * MIB);
    let number = |before: &str| -> u64 {
        let head = e.split(before).next().unwrap();
        head.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(e.contains("heap 0 is full (simulated heap size): "), "{e}");
    assert!(e.ends_with(&format!("of {heap} bytes")), "{e}");
    let (live, pooled) = (number(" bytes live"), number(" bytes free in pooled"));
    // The small region's rounding is the device's; the block sizes are the pool's.
    assert!(
        (600 * MIB + 1000..600 * MIB + 1000 + 256).contains(&live),
        "{e}"
    );
    let block = ctx.alloc_config().minimum_block_size;
    assert_eq!(live + pooled, 600 * MIB + block, "{e}");
    drop((small, big));
    assert_clean(&ctx);
}

#[test]
fn no_block_beyond_the_real_heap() {
    let Some(real) = context(ContextOptions::default()) else {
        return;
    };
    let real_heap = real.device_memory().heaps[real.device_memory().types[0].heap as usize].size;
    drop(real);
    // A simulated heap far larger than the device's: the driver is never asked for
    // more than its heap (VUID-vkAllocateMemory-pAllocateInfo-01713).
    let Some(ctx) = simulated(real_heap * 4) else {
        return;
    };
    let e = malloc_error(&ctx, real_heap + MIB);
    // Refused before the driver is asked: for the real heap's room, or where one
    // allocation may not be that large (the H200: 4 GiB), for that.
    assert!(
        e.contains("of the real device, which cannot hold the block (0 of ")
            || e.contains("is larger than maxMemoryAllocationSize"),
        "{e}"
    );
    assert_eq!(counter(&ctx, "blocks"), 0);
    assert_clean(&ctx);
}

#[test]
fn the_budget_bounds_the_blocks_and_empty_ones_go_back_first() {
    // A 1 GiB heap of which the driver grants 160 MiB (VK_EXT_memory_budget).
    let mut table = one_heap(1 << 30);
    table.heaps[0].budget = Some(160 * MIB);
    let Some(ctx) = with_table(table) else {
        return;
    };
    let (mut a, mut b) = (device_buffer(64 * MIB), device_buffer(64 * MIB));
    ctx.device_malloc(&mut a).unwrap();
    ctx.device_malloc(&mut b).unwrap();
    // 128 MiB live in blocks of 64 MiB: a third does not fit the budget.
    let e = malloc_error(&ctx, 64 * MIB);
    assert!(
        e.contains(&format!(
            "heap 0 is full (memory budget: {} of {} bytes in use)",
            128 * MIB,
            160 * MIB
        )),
        "{e}"
    );
    assert!(e.contains(&format!("{} bytes live", 128 * MIB)), "{e}");
    drop((a, b));
    // The two empty 64 MiB blocks stay pooled until a request needs their room.
    assert_eq!(counter(&ctx, "blocks"), 2);
    let mut c = device_buffer(150 * MIB);
    ctx.device_malloc(&mut c)
        .unwrap_or_else(|e| panic!("150 MiB after freeing: {e}"));
    assert_eq!(counter(&ctx, "blocks"), 1);
    drop(c);
    assert_clean(&ctx);
}

#[test]
fn fill_heap_counts_against_the_budget() {
    let mut table = one_heap(1 << 30);
    table.heaps[0].budget = Some(256 * MIB);
    let Some(ctx) = with_table(table) else {
        return;
    };
    // Other programs hold 64 MiB of the heap.
    assert_eq!(ctx.fill_heap(0, 960 * MIB).unwrap(), 64 * MIB);
    let mut a = device_buffer(100 * MIB);
    ctx.device_malloc(&mut a).unwrap();
    // 64 + 100 + 100 MiB is past the budget, though the heap has room.
    let e = malloc_error(&ctx, 100 * MIB);
    assert!(
        e.contains(&format!(
            "(memory budget: {} of {} bytes in use)",
            164 * MIB,
            256 * MIB
        )),
        "{e}"
    );
    assert!(
        e.contains(&format!("{} bytes taken by fill_heap", 64 * MIB)),
        "{e}"
    );
    drop(a);
    assert_clean(&ctx);
}

#[test]
fn buffers_the_driver_wants_alone_get_blocks_of_their_own() {
    // A driver that prefers dedicated memory for buffers of 1 MiB and more.
    let mut table = one_heap(1 << 30);
    table.dedicated_from = Some(MIB);
    let Some(ctx) = with_table(table) else {
        return;
    };
    let mut big = Buffer::new("big", ElemType::U32, &[512 * 1024]).unwrap();
    big.fill(|c| c[0] * 3 + 1).unwrap();
    ctx.copy_to_device(&mut big).unwrap();
    // Its own block of exactly its size, not a pooled block of 32 MiB.
    assert_eq!(counter(&ctx, "blocks"), 1);
    assert_eq!(counter(&ctx, "block_bytes"), 2 * MIB);
    let mut small = device_buffer(512 * 1024);
    ctx.device_malloc(&mut small).unwrap();
    let pooled = ctx.alloc_config().minimum_block_size;
    assert_eq!(counter(&ctx, "blocks"), 2);
    assert_eq!(counter(&ctx, "block_bytes"), 2 * MIB + pooled);
    // The data went through the dedicated buffer and back.
    big.fill(|_| 0).unwrap();
    big.set_host_dirty(false);
    big.set_device_dirty(true);
    ctx.copy_to_host(&mut big).unwrap();
    assert_eq!(big.compare(|c| c[0] * 3 + 1, 1).unwrap().mismatches, 0);
    // Released, the dedicated block goes back at once; the pooled one stays.
    ctx.device_free(&mut big).unwrap();
    assert_eq!(counter(&ctx, "blocks"), 1);
    assert_eq!(counter(&ctx, "block_bytes"), pooled);
    drop((big, small));
    assert_clean(&ctx);
}

/// The Raspberry Pi 4 table: one heap of 969,521,152 bytes, one uncached
/// coherent type.
fn pi4() -> MemoryTable {
    MemoryTable {
        name: "Raspberry Pi 4 (V3D 4.2, v3dv)".into(),
        device_type: DeviceType::IntegratedGpu,
        non_coherent_atom_size: 256,
        heaps: vec![MemoryHeap {
            size: 969_521_152,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
            budget: None,
        }],
        types: vec![MemoryType {
            heap: 0,
            flags: vk::MemoryPropertyFlags::DEVICE_LOCAL
                | vk::MemoryPropertyFlags::HOST_VISIBLE
                | vk::MemoryPropertyFlags::HOST_COHERENT,
        }],
        buffer_memory_type_bits: 0b1,
        dedicated_from: None,
    }
}

/// Fills the Pi 4 heap but `leave` bytes, then allocates, uploads and reads back
/// a 50,000,000-byte buffer: what each step gave (the error's name when it
/// failed) and every placement made.
fn pi4_round_trip(import_host: bool, leave: u64) -> Option<(Vec<String>, Vec<vkcopy::Placement>)> {
    let ctx = context(ContextOptions {
        simulate_memory: Some(pi4()),
        import_host,
        ..Default::default()
    })?;
    let mut b = Buffer::new("b", ElemType::U8, &[50_000_000]).unwrap();
    let mut steps = vec![format!(
        "fill_heap took {}",
        ctx.fill_heap(0, leave).unwrap()
    )];
    let mut step = |what: &str, r: vkcopy::Result<()>| {
        steps.push(match r {
            Ok(()) => format!("{what}: ok"),
            Err(e) => format!("{what}: {}", e.name()),
        })
    };
    step("device_malloc", ctx.device_malloc(&mut b));
    b.fill(|c| c[0] % 7).unwrap();
    step("copy_to_device", ctx.copy_to_device(&mut b));
    b.fill(|_| 0).unwrap();
    b.set_host_dirty(false);
    b.set_device_dirty(true);
    step("copy_to_host", ctx.copy_to_host(&mut b));
    let placements = ctx.stats().placements();
    ctx.device_free(&mut b).unwrap();
    drop(b);
    assert_clean(&ctx);
    Some((steps, placements))
}

/// Placement under a simulated table does not depend on whether the real device
/// imports host memory: the same steps succeed and fail, with the same
/// placements, with host import on and off.
#[test]
fn a_simulated_table_places_the_same_with_host_import_on_and_off() {
    for leave in [50_000_000, 100_000_000 + 4 * MIB] {
        let Some(on) = pi4_round_trip(true, leave) else {
            return;
        };
        let off = pi4_round_trip(false, leave).unwrap();
        assert_eq!(on, off, "leave {leave}");
        let (steps, placements) = on;
        assert_eq!(steps[0], format!("fill_heap took {}", 969_521_152 - leave));
        assert_eq!(steps[1], "device_malloc: ok");
        // Room for the buffer alone: its staging (per copy under a table) does
        // not fit; room for both: the copies go through staging.
        let copies = if leave == 50_000_000 {
            "device_malloc_failed"
        } else {
            "ok"
        };
        assert_eq!(steps[2], format!("copy_to_device: {copies}"), "{steps:?}");
        assert_eq!(steps[3], format!("copy_to_host: {copies}"), "{steps:?}");
        assert!(placements.iter().all(|p| !p.imported && p.memory_type == 0));
        let staged = placements
            .iter()
            .filter(|p| p.size >= 50_000_000 && p.role != vkcopy::Role::Device)
            .count();
        assert_eq!(staged, if copies == "ok" { 2 } else { 0 }, "{placements:?}");
    }
}
