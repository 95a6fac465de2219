//! The heaps of a simulated (recorded) memory table on the real default device
//! (lavapipe in CI), through the public API: a table heap counts the blocks of
//! its types and what `fill_heap` took, refuses a block past its size and gives
//! the room of a freed block back; the table's `buffer_memory_type_bits` and
//! `dedicated_from` decide where a buffer goes; a table heap larger than the
//! real one is refused by the real heap's room, naming it. Every number is
//! exact: blocks under a table are of known sizes (the pool's) and regions are
//! 64-byte granular whatever the device's alignment.

use std::sync::Arc;

use vkcopy::ash::vk;
use vkcopy::memory::table::{DeviceType, MemoryHeap, MemoryTable, MemoryType};
use vkcopy::{Context, ContextOptions, Error, Region, Role};

mod common;

use common::{assert_clean, context, counter, noncoherent_only, round_trip};

const MIB: u64 = 1024 * 1024;
const DL: vk::MemoryPropertyFlags = vk::MemoryPropertyFlags::DEVICE_LOCAL;
const HV: vk::MemoryPropertyFlags = vk::MemoryPropertyFlags::HOST_VISIBLE;
const HC: vk::MemoryPropertyFlags = vk::MemoryPropertyFlags::HOST_COHERENT;

/// A table of `heaps` (sizes, bytes) and `types` (heap, flags), every type
/// usable by buffers unless `bits` says otherwise.
fn table(heaps: &[u64], types: &[(u32, vk::MemoryPropertyFlags)], bits: u32) -> MemoryTable {
    MemoryTable {
        name: "synthetic".into(),
        device_type: DeviceType::DiscreteGpu,
        non_coherent_atom_size: 64,
        // Heap 0 is device-local, any other is the host's.
        heaps: heaps
            .iter()
            .enumerate()
            .map(|(i, &size)| MemoryHeap {
                size,
                flags: if i == 0 {
                    vk::MemoryHeapFlags::DEVICE_LOCAL
                } else {
                    vk::MemoryHeapFlags::empty()
                },
                budget: None,
            })
            .collect(),
        types: types
            .iter()
            .map(|&(heap, flags)| MemoryType { heap, flags })
            .collect(),
        buffer_memory_type_bits: bits,
        dedicated_from: None,
    }
}

/// One heap of `size` bytes with one device-local type.
fn one_type(size: u64) -> MemoryTable {
    table(&[size], &[(0, DL)], 0b1)
}

fn simulated(table: MemoryTable) -> Option<Context> {
    context(ContextOptions {
        simulate_memory: Some(table),
        ..Default::default()
    })
}

fn region(ctx: &Context, role: Role, bytes: u64) -> Arc<Region> {
    ctx.allocate(role, bytes)
        .unwrap_or_else(|e| panic!("{role} of {bytes} bytes: {e}"))
}

/// The message of a refused request.
fn refusal(ctx: &Context, role: Role, bytes: u64) -> String {
    match ctx.allocate(role, bytes) {
        Err(Error::DeviceMallocFailed(e)) => e,
        Err(e) => panic!("{role} of {bytes} bytes: expected device_malloc_failed, got {e}"),
        Ok(r) => panic!(
            "{role} of {bytes} bytes: expected a refusal, got type {}",
            r.memory_type()
        ),
    }
}

/// The end of the refusal of `ty` for a full table heap, as the allocator
/// words it.
fn heap_full(ty: u32, heap: u32, live: u64, pooled: u64, taken: u64, size: u64) -> String {
    let taken = if taken > 0 {
        format!(", {taken} bytes taken by fill_heap,")
    } else {
        ",".to_owned()
    };
    format!(
        "type {ty}: heap {heap} is full (simulated heap size): {live} bytes live, \
         {pooled} bytes free in pooled blocks{taken} of {size} bytes"
    )
}

#[test]
fn a_table_heap_holds_its_size_and_no_more() {
    let size = 96 * MIB;
    let Some(ctx) = simulated(one_type(size)) else {
        return;
    };
    let a = region(&ctx, Role::Device, 64 * MIB);
    // 64 + 48 MiB is past the 96 MiB heap, though the real heap has room.
    let e = refusal(&ctx, Role::Device, 48 * MIB);
    assert!(e.ends_with(&heap_full(0, 0, 64 * MIB, 0, 0, size)), "{e}");
    // 64 + 32 MiB fills it to the byte.
    let b = region(&ctx, Role::Device, 32 * MIB);
    assert_eq!(counter(&ctx, "blocks"), 2);
    assert_eq!(counter(&ctx, "block_bytes"), size);
    assert_eq!(counter(&ctx, "live_device_memory_bytes"), size);
    // Then not one region more, of the smallest size.
    let e = refusal(&ctx, Role::Device, 4);
    assert!(e.ends_with(&heap_full(0, 0, size, 0, 0, size)), "{e}");
    drop((a, b));
    assert_clean(&ctx);
}

#[test]
fn freed_blocks_give_their_room_back() {
    // Each block takes the whole heap: only the room of the freed one lets the
    // next one in.
    let size = 64 * MIB;
    let Some(ctx) = simulated(one_type(size)) else {
        return;
    };
    for round in 0..3 {
        let r = region(&ctx, Role::Device, size);
        assert_eq!(counter(&ctx, "blocks"), 1, "round {round}");
        assert_eq!(counter(&ctx, "live_device_memories"), 1, "round {round}");
        let e = refusal(&ctx, Role::Device, 4);
        assert!(e.ends_with(&heap_full(0, 0, size, 0, 0, size)), "{e}");
        drop(r);
        // The empty block stays pooled until released.
        assert_eq!(counter(&ctx, "blocks"), 1, "round {round}");
        assert_eq!(ctx.release_unused(), 1, "round {round}");
        assert_eq!(counter(&ctx, "blocks"), 0, "round {round}");
        assert_eq!(counter(&ctx, "live_device_memories"), 0, "round {round}");
        assert_eq!(
            counter(&ctx, "live_device_memory_bytes"),
            0,
            "round {round}"
        );
    }
    assert_clean(&ctx);
}

#[test]
fn an_empty_block_of_another_type_goes_back_for_room_on_its_heap() {
    // A device-local type and a host-visible one on the same 64 MiB heap.
    let size = 64 * MIB;
    let Some(ctx) = simulated(table(&[size], &[(0, DL), (0, DL | HV | HC)], 0b11)) else {
        return;
    };
    let device = region(&ctx, Role::Device, size);
    assert_eq!(device.memory_type(), 0);
    drop(device);
    // The heap is full of type 0's empty block: it goes back to the device
    // before type 1 is refused.
    let upload = region(&ctx, Role::Upload, size);
    assert_eq!(upload.memory_type(), 1);
    assert_eq!(counter(&ctx, "blocks"), 1);
    assert_eq!(counter(&ctx, "live_device_memory_bytes"), size);
    let e = refusal(&ctx, Role::Upload, 4);
    assert!(e.ends_with(&heap_full(1, 0, size, 0, 0, size)), "{e}");
    drop(upload);
    // And back again.
    assert_eq!(region(&ctx, Role::Device, size).memory_type(), 0);
    assert_eq!(counter(&ctx, "blocks"), 1);
    assert_clean(&ctx);
}

#[test]
fn each_table_heap_counts_the_blocks_of_its_own_types() {
    // 1 GiB device-local heap 0; a 260 MiB host heap 1 (not a small BAR, which
    // staging would pass over).
    let host = 260 * MIB;
    let Some(ctx) = simulated(table(&[1 << 30, host], &[(0, DL), (1, HV | HC)], 0b11)) else {
        return;
    };
    let up = region(&ctx, Role::Upload, 200 * MIB);
    assert_eq!(up.memory_type(), 1);
    let e = refusal(&ctx, Role::Upload, 64 * MIB);
    assert!(e.ends_with(&heap_full(1, 1, 200 * MIB, 0, 0, host)), "{e}");
    // Heap 0 has all its room: heap 1's blocks are not counted there.
    let dev = region(&ctx, Role::Device, 1 << 30);
    assert_eq!(dev.memory_type(), 0);
    let placed: Vec<(u32, u32, u64)> = ctx
        .stats()
        .placements()
        .iter()
        .map(|p| (p.memory_type, p.heap, p.size))
        .collect();
    assert_eq!(placed, [(1, 1, 200 * MIB), (0, 0, 1 << 30)]);
    drop((up, dev));
    // The 1 GiB block, larger than the pool's blocks, went back at once; heap 1's
    // room is back once its pooled block goes back too.
    assert_eq!(counter(&ctx, "blocks"), 1);
    assert_eq!(ctx.release_unused(), 1);
    let up = region(&ctx, Role::Upload, host);
    assert_eq!(up.memory_type(), 1);
    drop(up);
    assert_clean(&ctx);
}

#[test]
fn fill_heap_takes_all_but_what_is_left_and_counts_against_the_heap() {
    let size = 256 * MIB;
    let Some(ctx) = simulated(one_type(size)) else {
        return;
    };
    let a = region(&ctx, Role::Device, 32 * MIB);
    // Of 256 MiB, 32 are allocated: taking all but 100 MiB takes 124 MiB.
    assert_eq!(ctx.fill_heap(0, 100 * MIB).unwrap(), 124 * MIB);
    // The 100 MiB left fit to the byte (the 32 MiB block of the pool's size does
    // not, so the block is of the request's size).
    let b = region(&ctx, Role::Device, 100 * MIB);
    assert_eq!(counter(&ctx, "block_bytes"), 132 * MIB);
    let e = refusal(&ctx, Role::Device, 4);
    assert!(
        e.ends_with(&heap_full(0, 0, 132 * MIB, 0, 124 * MIB, size)),
        "{e}"
    );
    // A new fill replaces the last: all but 4 MiB of what is not allocated.
    assert_eq!(ctx.fill_heap(0, 4 * MIB).unwrap(), 120 * MIB);
    let c = region(&ctx, Role::Device, 4 * MIB);
    let e = refusal(&ctx, Role::Device, 4);
    assert!(
        e.ends_with(&heap_full(0, 0, 136 * MIB, 0, 120 * MIB, size)),
        "{e}"
    );
    // Leaving more than there is takes nothing; the heap is the table's again.
    assert_eq!(ctx.fill_heap(0, size).unwrap(), 0);
    let d = region(&ctx, Role::Device, 120 * MIB);
    let e = refusal(&ctx, Role::Device, 4);
    assert!(e.ends_with(&heap_full(0, 0, size, 0, 0, size)), "{e}");
    // Blocks freed give their room back to the next fill.
    drop((a, b, c, d));
    assert_eq!(ctx.release_unused(), 4);
    assert_eq!(ctx.fill_heap(0, 0).unwrap(), size);
    assert_eq!(ctx.fill_heap(0, MIB).unwrap(), size - MIB);
    // A heap the table does not have.
    match ctx.fill_heap(1, 0) {
        Err(Error::BadSetting {
            name,
            value,
            reason,
        }) => {
            assert_eq!((name, value.as_str()), ("fill_heap", "1"));
            assert_eq!(reason, "synthetic has 1 heaps");
        }
        other => panic!("fill_heap(1): expected bad_setting, got {other:?}"),
    }
    assert_clean(&ctx);
}

#[test]
fn fill_heap_needs_a_simulated_table() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    match ctx.fill_heap(0, 0) {
        Err(Error::BadSetting { name, value, .. }) => {
            assert_eq!((name, value.as_str()), ("fill_heap", "0"));
        }
        other => panic!("expected bad_setting, got {other:?}"),
    }
    assert_clean(&ctx);
}

#[test]
fn buffers_go_only_to_the_types_of_the_tables_type_bits() {
    // The device-local type 0 ranks first for device memory, but the table's
    // buffers may only use type 1 (or only type 0).
    for (bits, want) in [(0b10, 1), (0b01, 0), (0b11, 0)] {
        let Some(ctx) = simulated(table(&[1 << 30], &[(0, DL), (0, DL | HV | HC)], bits)) else {
            return;
        };
        let r = region(&ctx, Role::Device, MIB);
        assert_eq!(r.memory_type(), want, "bits {bits:#b}");
        let p = ctx.stats().placements();
        assert_eq!(p.len(), 1, "bits {bits:#b}");
        assert_eq!(
            (p[0].memory_type, p[0].heap, p[0].fallbacks),
            (want, 0, 0),
            "bits {bits:#b}"
        );
        drop(r);
        assert_clean(&ctx);
    }
    // Staging needs a host-visible type: none under bits 0b01.
    let Some(ctx) = simulated(table(&[1 << 30], &[(0, DL), (0, DL | HV | HC)], 0b01)) else {
        return;
    };
    let e = refusal(&ctx, Role::Upload, MIB);
    assert!(e.contains("no memory type for host_to_device"), "{e}");
    assert!(e.contains("memoryTypeBits 0x1,"), "{e}");
    assert!(
        e.contains(
            "type 1: DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT (heap 0) [not in memoryTypeBits]"
        ),
        "{e}"
    );
    assert_clean(&ctx);
}

#[test]
fn the_tables_dedicated_from_decides_which_buffers_get_blocks_of_their_own() {
    // lavapipe prefers no dedicated memory; the table does, from 4 MiB on.
    let mut t = one_type(1 << 30);
    t.dedicated_from = Some(4 * MIB);
    let Some(ctx) = simulated(t) else {
        return;
    };
    let pooled = ctx.alloc_config().minimum_block_size;
    let small = region(&ctx, Role::Device, MIB);
    assert_eq!(counter(&ctx, "blocks"), 1);
    assert_eq!(counter(&ctx, "block_bytes"), pooled);
    // Under the threshold by 64 bytes: in the pooled block.
    let under = region(&ctx, Role::Device, 4 * MIB - 64);
    assert_eq!(counter(&ctx, "blocks"), 1);
    // At the threshold and above: a block of exactly the buffer's size each,
    // though the pooled block has room.
    let at = region(&ctx, Role::Device, 4 * MIB);
    let big = region(&ctx, Role::Device, 8 * MIB);
    assert_eq!(counter(&ctx, "blocks"), 3);
    assert_eq!(counter(&ctx, "block_bytes"), pooled + 12 * MIB);
    // A dedicated block goes back as soon as its buffer does.
    drop(big);
    assert_eq!(counter(&ctx, "blocks"), 2);
    assert_eq!(counter(&ctx, "block_bytes"), pooled + 4 * MIB);
    drop((small, under, at));
    assert_clean(&ctx);

    // Without dedicated_from every buffer up to the pool's largest block is pooled.
    let Some(ctx) = simulated(one_type(1 << 30)) else {
        return;
    };
    let big = region(&ctx, Role::Device, 8 * MIB);
    let small = region(&ctx, Role::Device, MIB);
    assert_eq!(counter(&ctx, "blocks"), 1);
    assert_eq!(counter(&ctx, "block_bytes"), pooled);
    drop((big, small));
    assert_clean(&ctx);
}

#[test]
fn regions_under_a_table_are_64_byte_granular() {
    // A 64 MiB heap: pooled blocks of 8 MiB (an eighth of a small heap).
    let size = 64 * MIB;
    let Some(ctx) = simulated(one_type(size)) else {
        return;
    };
    let small: Vec<_> = (0..3).map(|_| region(&ctx, Role::Device, 4)).collect();
    assert_eq!(counter(&ctx, "block_bytes"), 8 * MIB);
    // 60 MiB more does not fit: three regions of 64 bytes each are live, on
    // every device whose buffer alignment is at most 64 (lavapipe's is 64; a
    // driver aligning to 16 would give regions of 32 bytes without the table's).
    let e = refusal(&ctx, Role::Device, 60 * MIB);
    assert!(
        e.ends_with(&heap_full(0, 0, 3 * 64, 8 * MIB - 3 * 64, 0, size)),
        "{e}"
    );
    drop(small);
    assert_clean(&ctx);
}

#[test]
fn a_table_heap_larger_than_the_real_one_is_bounded_by_the_real_heap() {
    let Some(real) = context(ContextOptions::default()) else {
        return;
    };
    let memory = real.device_memory().clone();
    drop(real);
    let real_heap = memory.types[0].heap;
    let real_size = memory.heaps[real_heap as usize].size;
    // Twice the real heap, so that the table's own size never refuses.
    let Some(ctx) = simulated(one_type(2 * real_size)) else {
        return;
    };
    let e = refusal(&ctx, Role::Device, real_size + MIB);
    assert!(
        e.ends_with(&format!(
            "type 0: heap 0 is backed by heap {real_heap} of the real device, which \
             cannot hold the block (0 of {real_size} bytes allocated)"
        )),
        "{e}"
    );
    // Blocks of the table are blocks of the real heap too.
    let a = region(&ctx, Role::Device, 64 * MIB);
    let e = refusal(&ctx, Role::Device, real_size - 32 * MIB);
    assert!(
        e.ends_with(&format!(
            "type 0: heap 0 is backed by heap {real_heap} of the real device, which \
             cannot hold the block ({} of {real_size} bytes allocated)",
            64 * MIB
        )),
        "{e}"
    );
    assert_eq!(counter(&ctx, "blocks"), 1);
    drop(a);
    assert_clean(&ctx);
}

#[test]
fn non_coherent_table_memory_round_trips_through_its_shadow() {
    // Staging in a host-cached non-coherent type: the host writes a shadow that
    // only a flush hands to the device, and reads one that an invalidate refreshes.
    let Some(ctx) = simulated(noncoherent_only()) else {
        return;
    };
    let mut buf = vkcopy::Buffer::new("b", vkcopy::ElemType::U32, &[1000, 3]).unwrap();
    assert_eq!(round_trip(&ctx, &mut buf, |c| c[0] * 7 + c[1]), 0);
    let staged: Vec<_> = ctx
        .stats()
        .placements()
        .into_iter()
        .filter(|p| p.role != Role::Device)
        .collect();
    assert!(!staged.is_empty());
    for p in staged {
        assert_eq!(p.memory_type, 2, "{p:?}");
        assert!(!p.flags.contains(HC), "{p:?}");
    }
    drop(buf);
    assert_clean(&ctx);
}

#[test]
fn copies_under_a_table_stage_in_its_types_and_never_import_host_memory() {
    // lavapipe imports host memory; a table models staging in its own types
    // instead, as Halide stages (a host heap 1 here).
    let Some(ctx) = simulated(table(&[1 << 30, 1 << 30], &[(0, DL), (1, HV | HC)], 0b11)) else {
        return;
    };
    let bytes = 8 * MIB;
    let mut buf = vkcopy::Buffer::new("b", vkcopy::ElemType::U8, &[bytes as i64]).unwrap();
    assert_eq!(round_trip(&ctx, &mut buf, |c| c[0] % 251), 0);
    let placed: Vec<_> = ctx
        .stats()
        .placements()
        .iter()
        .map(|p| (p.role, p.memory_type, p.heap, p.size, p.imported))
        .collect();
    assert_eq!(
        placed,
        [
            (Role::Device, 0, 0, bytes, false),
            (Role::Upload, 1, 1, bytes, false),
            (Role::Readback, 1, 1, bytes, false),
        ]
    );
    for (name, want) in [
        ("copies_to_device_staged", 1),
        ("copies_to_host_staged", 1),
        ("copies_to_device_imported", 0),
        ("copies_to_host_imported", 0),
    ] {
        assert_eq!(counter(&ctx, name), want, "{name}");
    }
    drop(buf);
    assert_clean(&ctx);
}
