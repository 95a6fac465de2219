//! Small uploads the CPU writes straight into host-visible device memory
//! (`runtime/mapped.rs`): where buffers are placed for them, which
//! contexts have the route, and that the bytes land right beside what the
//! device wrote. On lavapipe (one host-visible device-local type) and on
//! recorded tables presented on it.

mod common;

use common::{assert_clean, context, counter, noncoherent_only, round_trip, table};
use vkcopy::ash::vk::MemoryPropertyFlags;
use vkcopy::{Buffer, Context, ContextOptions, ElemType, MappedCopy, Policy, Role};

fn options(mapped_upload: MappedCopy) -> ContextOptions {
    ContextOptions {
        mapped_upload,
        ..Default::default()
    }
}

/// Whether the default device has the route (lavapipe and GPUs with resizable
/// BAR do); a test that needs it skips, with a note, where it does not.
fn has_route(ctx: &Context) -> bool {
    let has = ctx.mapped_upload() != MappedCopy::Never;
    if !has {
        eprintln!("skipping: no host-visible coherent device memory off a small BAR heap");
    }
    has
}

/// The last placement of `role`: (memory type, size).
fn placed(ctx: &Context, role: Role) -> Option<(u32, u64)> {
    ctx.stats()
        .placements()
        .iter()
        .rev()
        .find(|p| p.role == role)
        .map(|p| (p.memory_type, p.size))
}

#[test]
fn small_uploads_are_written_by_the_cpu() {
    let Some(ctx) = context(options(MappedCopy::Always)) else {
        return;
    };
    if !has_route(&ctx) {
        return;
    }
    let mut g = Buffer::new("g", ElemType::I32, &[1000, 3]).unwrap();
    assert_eq!(round_trip(&ctx, &mut g, |c| c[0] - 7 * c[1]), 0);
    assert_eq!(counter(&ctx, "copies_to_device_mapped"), 1);
    assert_eq!(counter(&ctx, "bytes_to_device_mapped"), 12_000);
    assert_eq!(counter(&ctx, "copies_to_device_ring"), 0);
    let p = ctx.stats().placements();
    let p = p.iter().rev().find(|p| p.role == Role::DeviceMapped);
    let mapped = MemoryPropertyFlags::DEVICE_LOCAL
        | MemoryPropertyFlags::HOST_VISIBLE
        | MemoryPropertyFlags::HOST_COHERENT;
    assert!(
        p.is_some_and(|p| p.size == 12_000 && p.flags.contains(mapped)),
        "{p:?}"
    );

    // A crop of the device buffer written from a strided host view: only its
    // box changes, the rest keeps what the first upload wrote.
    let mut crop = g.cropped("crop", &[10, 1], &[500, 2]).unwrap();
    crop.fill(|c| 100_000 + c[0] + 1000 * c[1]).unwrap();
    ctx.copy_to_device(&mut crop).unwrap();
    drop(crop);
    g.fill(|_| -1).unwrap();
    g.set_host_dirty(false);
    g.set_device_dirty(true);
    ctx.copy_to_host(&mut g).unwrap();
    let want = |c: &[i64]| match (10..510).contains(&c[0]) && (1..3).contains(&c[1]) {
        true => 100_000 + c[0] + 1000 * c[1],
        false => c[0] - 7 * c[1],
    };
    assert_eq!(g.compare(want, 1).unwrap().mismatches, 0);
    assert_eq!(counter(&ctx, "copies_to_device_mapped"), 2);
    assert_eq!(counter(&ctx, "bytes_to_device_mapped"), 12_000 + 4_000);
    drop(g);
    assert_clean(&ctx);
}

#[test]
fn off_and_the_halide_policies_stage_every_upload() {
    for (opts, what) in [
        (
            // Buffers go to host-visible device memory for either way; with
            // both off they stay in device memory.
            ContextOptions {
                mapped_readback: MappedCopy::Never,
                ..options(MappedCopy::Never)
            },
            "off",
        ),
        (
            ContextOptions {
                policy: Policy::Halide,
                ..options(MappedCopy::Always)
            },
            "halide",
        ),
    ] {
        let Some(ctx) = context(opts) else {
            return;
        };
        assert_eq!(ctx.mapped_upload(), MappedCopy::Never, "{what}");
        let mut g = Buffer::new("g", ElemType::I32, &[256]).unwrap();
        assert_eq!(round_trip(&ctx, &mut g, |c| 3 * c[0]), 0, "{what}");
        assert_eq!(counter(&ctx, "copies_to_device_mapped"), 0, "{what}");
        assert_eq!(placed(&ctx, Role::DeviceMapped), None, "{what}");
        assert_eq!(placed(&ctx, Role::Device).map(|p| p.1), Some(1024));
        drop(g);
        assert_clean(&ctx);
    }
}

#[test]
fn auto_measures_the_first_upload_of_a_size_class() {
    let Some(ctx) = context(options(MappedCopy::Auto)) else {
        return;
    };
    if !has_route(&ctx) {
        return;
    }
    let mut a = Buffer::new("a", ElemType::U8, &[5000]).unwrap();
    let mut b = Buffer::new("b", ElemType::U8, &[6000]).unwrap();
    assert_eq!(round_trip(&ctx, &mut a, |c| c[0] % 251), 0);
    assert_eq!(round_trip(&ctx, &mut b, |c| c[0] % 241), 0);
    // 5000 and 6000 bytes are one class (4096 up to 16383): measured once.
    let cal = ctx.upload_calibrations();
    assert_eq!(cal.len(), 1, "{cal:?}");
    assert_eq!((cal[0].min_bytes, cal[0].bytes), (4096, 5000));
    assert!(cal[0].mapped_seconds > 0.0 && cal[0].copy_seconds > 0.0);
    // Each upload counts once: the measured one on the GPU's route (its copy
    // wrote last, as a readback's does), the next on the route its class took.
    let mapped = counter(&ctx, "copies_to_device_mapped");
    let staged = counter(&ctx, "copies_to_device_ring");
    assert_eq!(mapped + staged, 2);
    assert_eq!(mapped == 1, cal[0].mapped, "{cal:?}");
    drop((a, b));
    assert_clean(&ctx);
}

#[test]
fn large_buffers_stay_in_device_memory_on_the_h200() {
    let opts = ContextOptions {
        simulate_memory: Some(table("nvidia-h200")),
        ..options(MappedCopy::Always)
    };
    let Some(ctx) = context(opts) else {
        return;
    };
    // Type 4 is DEVICE_LOCAL | HOST_VISIBLE on the VRAM heap (resizable BAR).
    let mut small = Buffer::new("small", ElemType::F32, &[64, 64]).unwrap();
    assert_eq!(round_trip(&ctx, &mut small, |c| c[0] + c[1]), 0);
    assert_eq!(placed(&ctx, Role::DeviceMapped), Some((4, 16384)));
    assert_eq!(counter(&ctx, "copies_to_device_mapped"), 1);
    // Over 4 MiB: device-only memory (type 1), uploads through the GPU.
    let mut large = Buffer::new("large", ElemType::U8, &[(4 << 20) + 1]).unwrap();
    assert_eq!(round_trip(&ctx, &mut large, |c| c[0] % 13), 0);
    assert_eq!(placed(&ctx, Role::Device), Some((1, (4 << 20) + 1)));
    assert_eq!(counter(&ctx, "copies_to_device_mapped"), 1);
    drop((small, large));
    assert_clean(&ctx);
}

#[test]
fn a_small_bar_heap_is_never_taken_for_small_buffers() {
    // The RTX 4070 without resizable BAR: its only host-visible VRAM is a 246 MiB
    // BAR heap, kept for what needs it; there is no route.
    let opts = ContextOptions {
        simulate_memory: Some(table("nvidia-rtx4070-no-rebar")),
        ..options(MappedCopy::Always)
    };
    let Some(ctx) = context(opts) else {
        return;
    };
    assert_eq!(ctx.mapped_upload(), MappedCopy::Never);
    let mut g = Buffer::new("g", ElemType::I32, &[100]).unwrap();
    assert_eq!(round_trip(&ctx, &mut g, |c| 5 - c[0]), 0);
    assert_eq!(placed(&ctx, Role::Device), Some((1, 400)));
    assert_eq!(counter(&ctx, "copies_to_device_mapped"), 0);
    drop(g);
    assert_clean(&ctx);
}

#[test]
fn non_coherent_device_memory_takes_no_cpu_writes() {
    // The only host-visible device type is cached and not coherent: a flush
    // writes back whole atoms, which could land over the device's writes beside
    // the bytes written, so buffers stay where the device role puts them and
    // uploads go through the GPU.
    let opts = ContextOptions {
        simulate_memory: Some(noncoherent_only()),
        ..options(MappedCopy::Always)
    };
    let Some(ctx) = context(opts) else {
        return;
    };
    assert_eq!(ctx.mapped_upload(), MappedCopy::Never);
    let mut g = Buffer::new("g", ElemType::I32, &[1000]).unwrap();
    assert_eq!(round_trip(&ctx, &mut g, |c| 11 * c[0]), 0);
    assert_eq!(placed(&ctx, Role::Device).map(|p| p.0), Some(0));
    assert_eq!(counter(&ctx, "copies_to_device_mapped"), 0);
    drop(g);
    assert_clean(&ctx);
}

#[test]
fn a_partial_write_keeps_what_the_device_wrote_beside_it() {
    // On the H200's table: a crop's rows start and end beside bytes the GPU
    // wrote since the host last wrote there.
    let opts = ContextOptions {
        simulate_memory: Some(table("nvidia-h200")),
        ..options(MappedCopy::Always)
    };
    let Some(ctx) = context(opts) else {
        return;
    };
    let mut g = Buffer::new("g", ElemType::I32, &[100, 6]).unwrap();
    g.fill(|c| c[0] + 100 * c[1]).unwrap();
    ctx.copy_to_device(&mut g).unwrap();
    // The GPU overwrites all of g from another buffer.
    let mut other = Buffer::new("other", ElemType::I32, &[100, 6]).unwrap();
    other.fill(|c| -1 - c[0] - 100 * c[1]).unwrap();
    ctx.copy_to_device(&mut other).unwrap();
    other.set_host_dirty(false);
    ctx.buffer_copy(&other, &mut g, true).unwrap();
    // Read back through staging: the host's cache of g's own memory stays stale.
    ctx.copy_to_host(&mut g).unwrap();
    // The host writes a box of it: 30 elements from x = 33 in rows 2..4.
    let mut crop = g.cropped("crop", &[33, 2], &[30, 2]).unwrap();
    crop.fill(|c| 7000 + c[0] + 100 * c[1]).unwrap();
    ctx.copy_to_device(&mut crop).unwrap();
    drop(crop);
    g.fill(|_| 0).unwrap();
    g.set_host_dirty(false);
    g.set_device_dirty(true);
    ctx.copy_to_host(&mut g).unwrap();
    let want = |c: &[i64]| match (33..63).contains(&c[0]) && (2..4).contains(&c[1]) {
        true => 7000 + c[0] + 100 * c[1],
        false => -1 - c[0] - 100 * c[1],
    };
    assert_eq!(g.compare(want, 1).unwrap().mismatches, 0);
    assert_eq!(counter(&ctx, "copies_to_device_mapped"), 3);
    drop((g, other));
    assert_clean(&ctx);
}

#[test]
fn after_a_device_write_uploads_go_by_the_gpu_until_a_readback() {
    // The device's writes end without a barrier to the host: the CPU must not
    // write the memory until one has made them available.
    let Some(ctx) = context(options(MappedCopy::Always)) else {
        return;
    };
    if !has_route(&ctx) {
        return;
    }
    let mut g = Buffer::new("g", ElemType::I32, &[64, 4]).unwrap();
    let mut other = Buffer::new("other", ElemType::I32, &[64, 4]).unwrap();
    other.fill(|c| 5 * c[0] - c[1]).unwrap();
    ctx.copy_to_device(&mut other).unwrap();
    other.set_host_dirty(false);
    ctx.buffer_copy(&other, &mut g, true).unwrap();
    let mapped = counter(&ctx, "copies_to_device_mapped");
    // Only a box of g's host side is written, and only the box is uploaded.
    let upload = |g: &mut Buffer, v: i64| {
        g.set_device_dirty(false);
        let mut crop = g.cropped("crop", &[8, 1], &[16, 2]).unwrap();
        crop.fill(|c| v + c[0] + 100 * c[1]).unwrap();
        ctx.copy_to_device(&mut crop).unwrap();
    };
    upload(&mut g, 1000);
    assert_eq!(counter(&ctx, "copies_to_device_mapped"), mapped);
    g.fill(|_| 0).unwrap();
    g.set_host_dirty(false);
    g.set_device_dirty(true);
    ctx.copy_to_host(&mut g).unwrap();
    let want = |v: i64| {
        move |c: &[i64]| match (8..24).contains(&c[0]) && (1..3).contains(&c[1]) {
            true => v + c[0] + 100 * c[1],
            false => 5 * c[0] - c[1],
        }
    };
    assert_eq!(g.compare(want(1000), 1).unwrap().mismatches, 0);
    // The readback made them available: the CPU writes the next upload.
    upload(&mut g, 2000);
    assert_eq!(counter(&ctx, "copies_to_device_mapped"), mapped + 1);
    g.fill(|_| 0).unwrap();
    g.set_host_dirty(false);
    g.set_device_dirty(true);
    ctx.copy_to_host(&mut g).unwrap();
    assert_eq!(g.compare(want(2000), 1).unwrap().mismatches, 0);
    drop((g, other));
    assert_clean(&ctx);
}
