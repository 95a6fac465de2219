//! Small readbacks the CPU reads straight out of host-visible device memory
//! with streaming loads (`runtime/mapped.rs`): which contexts have the
//! route, that the bytes are right for whole buffers and crops, and that memory
//! the device wrote without a barrier to the host is read back by the GPU. On
//! lavapipe (one host-visible device-local type) and on recorded tables
//! presented on it.

mod common;

use common::{assert_clean, context, counter, noncoherent_only, round_trip, table};
use vkcopy::{Buffer, Context, ContextOptions, ElemType, MappedCopy, Policy};

/// Uploads written by the CPU, so that no device write is pending when a
/// readback starts, and readbacks as `mapped_readback` says.
fn options(mapped_readback: MappedCopy) -> ContextOptions {
    ContextOptions {
        mapped_upload: MappedCopy::Always,
        mapped_readback,
        ..Default::default()
    }
}

/// Whether the default device has the route (lavapipe and GPUs with resizable
/// BAR do); a test that needs it skips, with a note, where it does not.
fn has_route(ctx: &Context) -> bool {
    let has = ctx.mapped_readback() != MappedCopy::Never;
    if !has {
        eprintln!("skipping: no host-visible coherent device memory off a small BAR heap");
    }
    has
}

#[test]
fn small_readbacks_are_read_by_the_cpu() {
    let Some(ctx) = context(options(MappedCopy::Always)) else {
        return;
    };
    if !has_route(&ctx) {
        return;
    }
    let mut g = Buffer::new("g", ElemType::I32, &[1000, 3]).unwrap();
    assert_eq!(round_trip(&ctx, &mut g, |c| c[0] - 7 * c[1]), 0);
    assert_eq!(counter(&ctx, "copies_to_host_mapped"), 1);
    assert_eq!(counter(&ctx, "bytes_to_host_mapped"), 12_000);
    assert_eq!(counter(&ctx, "copies_to_host_ring"), 0);

    // A crop whose rows start and end inside 16-byte blocks (u8, x from 3,
    // 29 wide, in rows 101 apart): only its box is read into the host.
    let mut b = Buffer::new("b", ElemType::U8, &[101, 7]).unwrap();
    b.fill(|c| (c[0] * 3 + c[1] * 17) % 251).unwrap();
    ctx.copy_to_device(&mut b).unwrap();
    b.fill(|_| 255).unwrap();
    b.set_host_dirty(false);
    let mut crop = b.cropped("crop", &[3, 2], &[29, 4]).unwrap();
    crop.set_device_dirty(true);
    ctx.copy_to_host(&mut crop).unwrap();
    drop(crop);
    let want = |c: &[i64]| match (3..32).contains(&c[0]) && (2..6).contains(&c[1]) {
        true => (c[0] * 3 + c[1] * 17) % 251,
        false => 255,
    };
    assert_eq!(b.compare(want, 0).unwrap().mismatches, 0);
    assert_eq!(counter(&ctx, "copies_to_host_mapped"), 2);
    assert_eq!(counter(&ctx, "bytes_to_host_mapped"), 12_000 + 29 * 4);
    drop((g, b));
    assert_clean(&ctx);
}

#[test]
fn after_a_device_write_readbacks_go_by_the_gpu_until_one_made_it_available() {
    // A device-to-device copy ends without a barrier to the host: the CPU must
    // not read what it wrote until a readback by the GPU has made it available.
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
    ctx.device_malloc(&mut g).unwrap();
    ctx.buffer_copy(&other, &mut g, true).unwrap();
    let read = |g: &mut Buffer| {
        g.fill(|_| 0).unwrap();
        g.set_host_dirty(false);
        g.set_device_dirty(true);
        ctx.copy_to_host(g).unwrap();
        g.compare(|c| 5 * c[0] - c[1], 1).unwrap().mismatches
    };
    let (mapped, ring) = (
        counter(&ctx, "copies_to_host_mapped"),
        counter(&ctx, "copies_to_host_ring"),
    );
    assert_eq!(read(&mut g), 0);
    assert_eq!(counter(&ctx, "copies_to_host_mapped"), mapped);
    assert_eq!(counter(&ctx, "copies_to_host_ring"), ring + 1);
    // That readback made them available: the CPU reads the next one.
    assert_eq!(read(&mut g), 0);
    assert_eq!(counter(&ctx, "copies_to_host_mapped"), mapped + 1);
    assert_eq!(counter(&ctx, "copies_to_host_ring"), ring + 1);
    drop((g, other));
    assert_clean(&ctx);
}

#[test]
fn auto_measures_the_first_readback_of_a_size_class() {
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
    let cal = ctx.readback_calibrations();
    assert_eq!(cal.len(), 1, "{cal:?}");
    assert_eq!((cal[0].min_bytes, cal[0].bytes), (4096, 5000));
    assert!(cal[0].mapped_seconds > 0.0 && cal[0].copy_seconds > 0.0);
    // The calibrating readback ends on the GPU's copy and counts as one; the
    // second takes its class's way.
    let mapped = counter(&ctx, "copies_to_host_mapped");
    let staged = counter(&ctx, "copies_to_host_ring");
    assert_eq!(
        (mapped, staged),
        if cal[0].mapped { (1, 1) } else { (0, 2) }
    );
    drop((a, b));
    assert_clean(&ctx);
}

#[test]
fn under_auto_a_readback_of_many_runs_goes_by_the_gpu() {
    // Streaming loads pay a PCIe round trip per run: a crop of 32 rows is not
    // measured, and goes by the GPU, even below a class the CPU won.
    let Some(ctx) = context(options(MappedCopy::Auto)) else {
        return;
    };
    if !has_route(&ctx) {
        return;
    }
    let mut g = Buffer::new("g", ElemType::U8, &[64, 64]).unwrap();
    let f = |c: &[i64]| (c[0] + 3 * c[1]) % 251;
    assert_eq!(round_trip(&ctx, &mut g, f), 0);
    let measured = ctx.readback_calibrations();
    assert_eq!(measured.len(), 1, "{measured:?}");
    let gpu = |ctx: &Context| {
        ["ring", "staged", "imported"]
            .iter()
            .map(|r| counter(ctx, &format!("copies_to_host_{r}")))
            .sum::<u64>()
    };
    let (mapped, by_gpu) = (counter(&ctx, "copies_to_host_mapped"), gpu(&ctx));
    g.fill(|_| 0).unwrap();
    g.set_host_dirty(false);
    let mut crop = g.cropped("crop", &[8, 8], &[32, 32]).unwrap();
    crop.set_device_dirty(true);
    ctx.copy_to_host(&mut crop).unwrap();
    drop(crop);
    let want = |c: &[i64]| match (8..40).contains(&c[0]) && (8..40).contains(&c[1]) {
        true => f(c),
        false => 0,
    };
    assert_eq!(g.compare(want, 0).unwrap().mismatches, 0);
    assert_eq!(counter(&ctx, "copies_to_host_mapped"), mapped);
    assert_eq!(gpu(&ctx), by_gpu + 1);
    assert_eq!(ctx.readback_calibrations(), measured);
    drop(g);
    assert_clean(&ctx);
}

#[test]
fn never_and_the_halide_policies_read_back_by_the_gpu() {
    for (opts, what) in [
        (options(MappedCopy::Never), "never"),
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
        assert_eq!(ctx.mapped_readback(), MappedCopy::Never, "{what}");
        let mut g = Buffer::new("g", ElemType::I32, &[256]).unwrap();
        assert_eq!(round_trip(&ctx, &mut g, |c| 3 * c[0]), 0, "{what}");
        assert_eq!(counter(&ctx, "copies_to_host_mapped"), 0, "{what}");
        drop(g);
        assert_clean(&ctx);
    }
}

#[test]
fn on_the_h200_large_buffers_are_read_back_by_the_gpu() {
    let opts = ContextOptions {
        simulate_memory: Some(table("nvidia-h200")),
        ..options(MappedCopy::Always)
    };
    let Some(ctx) = context(opts) else {
        return;
    };
    assert_eq!(ctx.mapped_readback(), MappedCopy::Always);
    let mut small = Buffer::new("small", ElemType::F32, &[64, 64]).unwrap();
    assert_eq!(round_trip(&ctx, &mut small, |c| c[0] + c[1]), 0);
    assert_eq!(counter(&ctx, "copies_to_host_mapped"), 1);
    // Over 4 MiB: device-only memory, which the CPU cannot read.
    let mut large = Buffer::new("large", ElemType::U8, &[(4 << 20) + 1]).unwrap();
    assert_eq!(round_trip(&ctx, &mut large, |c| c[0] % 13), 0);
    assert_eq!(counter(&ctx, "copies_to_host_mapped"), 1);
    assert_eq!(counter(&ctx, "copies_to_host_staged"), 1);
    drop((small, large));
    assert_clean(&ctx);
}

#[test]
fn small_bar_and_non_coherent_tables_have_no_route() {
    for (table, what) in [
        (table("nvidia-rtx4070-no-rebar"), "small BAR"),
        (noncoherent_only(), "non-coherent"),
    ] {
        let opts = ContextOptions {
            simulate_memory: Some(table),
            ..options(MappedCopy::Always)
        };
        let Some(ctx) = context(opts) else {
            return;
        };
        assert_eq!(ctx.mapped_readback(), MappedCopy::Never, "{what}");
        let mut g = Buffer::new("g", ElemType::I32, &[1000]).unwrap();
        assert_eq!(round_trip(&ctx, &mut g, |c| 11 * c[0]), 0, "{what}");
        assert_eq!(counter(&ctx, "copies_to_host_mapped"), 0, "{what}");
        drop(g);
        assert_clean(&ctx);
    }
}
