//! Staging through the reused ring (host import off): copies of every size cross
//! the ring's window boundaries exactly, strided layouts included, and staging
//! memory stays bounded by the ring whatever the copy size.

use vkcopy::{Buffer, Context, ContextOptions, Dim, ElemType, Role, SmallCopyQueue};

mod common;

use common::{assert_clean, context};

fn staged() -> Option<Context> {
    context(ContextOptions {
        import_host: false,
        ..Default::default()
    })
}

fn value(c: &[i64]) -> i64 {
    c.iter()
        .enumerate()
        .map(|(d, v)| v * (1 + 7919 * d as i64))
        .sum::<i64>()
        % 251
}

/// Uploads, wipes the host, reads back; the mismatches.
fn round_trip(ctx: &Context, b: &mut Buffer) -> u64 {
    b.fill(value).unwrap();
    ctx.copy_to_device(b).unwrap();
    b.fill(|_| -1).unwrap();
    b.set_host_dirty(false);
    b.set_device_dirty(true);
    ctx.copy_to_host(b).unwrap();
    b.compare(value, 3).unwrap().mismatches
}

fn staging_placements(ctx: &Context) -> usize {
    ctx.stats()
        .placements()
        .iter()
        .filter(|p| matches!(p.role, Role::Upload | Role::Readback))
        .count()
}

#[test]
fn every_size_round_trips_through_the_ring() {
    let Some(ctx) = staged() else {
        return;
    };
    const MIB: i64 = 1 << 20;
    // Bytes around multiples of the windows (a quarter of the copy in whole MiB),
    // odd sizes included.
    let sizes = [
        (ElemType::U8, 1),
        (ElemType::U8, 3),
        (ElemType::U8, 4096),
        (ElemType::U8, MIB - 1),
        (ElemType::I16, 8 * MIB - 1),
        (ElemType::I16, 8 * MIB),
        (ElemType::I16, 8 * MIB + 1),
        (ElemType::I32, 8 * MIB + 3),
    ];
    for (elem, n) in sizes {
        let mut b = Buffer::new("b", elem, &[n]).unwrap();
        assert_eq!(round_trip(&ctx, &mut b), 0, "{n} elements of {elem}");
    }
    // The ring grew with the copies (chunks of 1 MiB up to the largest window,
    // at most 3 lanes per direction), and a second pass reuses it: no new chunk.
    let grown = staging_placements(&ctx);
    assert!((2..=2 * 3 * 6).contains(&grown), "{grown}");
    for (elem, n) in sizes.iter().rev() {
        let mut b = Buffer::new("b", *elem, &[*n]).unwrap();
        assert_eq!(round_trip(&ctx, &mut b), 0, "{n} elements of {elem}");
    }
    assert_eq!(staging_placements(&ctx), grown, "every chunk was reused");
    assert_clean(&ctx);
}

#[test]
fn strided_and_cropped_copies_cross_windows() {
    let Some(ctx) = staged() else {
        return;
    };
    // Rows of 3000 bytes every 3202 bytes: 12 MB, so windows cut rows.
    let row = |min, extent, stride| Dim {
        min,
        extent,
        stride,
    };
    let dims = vec![row(-5, 1500, 1), row(2, 4000, 1601)];
    let mut s = Buffer::with_dims("s", ElemType::I16, dims, true).unwrap();
    assert_eq!(round_trip(&ctx, &mut s), 0);
    // 2-byte elements every 3 elements: one region per element.
    let dims = vec![row(0, 100, 3), row(0, 40, 301)];
    let mut e = Buffer::with_dims("e", ElemType::I16, dims, true).unwrap();
    assert_eq!(round_trip(&ctx, &mut e), 0);
    // A crop read back into a buffer of its own box, and written back through it.
    let mut full = Buffer::new("full", ElemType::I32, &[3000, 1500]).unwrap();
    full.fill(value).unwrap();
    ctx.copy_to_device(&mut full).unwrap();
    let crop = full.cropped("crop", &[7, 3], &[2900, 1400]).unwrap();
    // `out` is dense over the crop's box (mins 7 and 3).
    let out_dims: Vec<Dim> = vkcopy::types::dense_dims(&[2900, 1400])
        .into_iter()
        .zip(crop.dims())
        .map(|(o, c)| Dim { min: c.min, ..o })
        .collect();
    let mut out = Buffer::with_dims("out", ElemType::I32, out_dims, true).unwrap();
    let dev = crop.without_host("dev");
    ctx.buffer_copy(&dev, &mut out, false).unwrap();
    assert_eq!(out.compare(value, 3).unwrap().mismatches, 0);
    drop((crop, dev, full, out, s, e));
    assert_clean(&ctx);
}

#[test]
fn overlapping_destinations_read_back_in_order() {
    let Some(ctx) = staged() else {
        return;
    };
    // Rows of 1M elements every 64K elements of `dst`: they overlap, so each byte
    // keeps what the last row to write it brought, as a copy in order would.
    let mut src = Buffer::new("src", ElemType::I32, &[1 << 20, 4]).unwrap();
    src.fill(|c| c[0] + 10 * c[1]).unwrap();
    ctx.copy_to_device(&mut src).unwrap();
    let dev = src.without_host("dev");
    let row = |min, extent, stride| Dim {
        min,
        extent,
        stride,
    };
    let dims = vec![row(0, 1 << 20, 1), row(0, 4, 1 << 16)];
    let mut dst = Buffer::with_dims("dst", ElemType::I32, dims, true).unwrap();
    ctx.buffer_copy(&dev, &mut dst, false).unwrap();
    let last_writer = |m: i64| {
        let y = (m >> 16).min(3);
        (m - (y << 16)) + 10 * y
    };
    for (x, y) in [
        (5, 0),
        (70_000, 0),
        (0, 3),
        ((1 << 20) - 1, 3),
        (123_456, 1),
    ] {
        let m = x + (y << 16);
        assert_eq!(
            dst.get(&[x, y]).unwrap(),
            vkcopy::Value::Int(last_writer(m)),
            "({x}, {y})"
        );
    }
    drop((src, dev, dst));
    assert_clean(&ctx);
}

#[test]
fn release_unused_gives_the_ring_back() {
    let Some(ctx) = staged() else {
        return;
    };
    let mut b = Buffer::new("b", ElemType::F32, &[4 << 20]).unwrap();
    assert_eq!(round_trip(&ctx, &mut b), 0);
    drop(b);
    let live = |ctx: &Context| ctx.stats().regions.live();
    assert!(live(&ctx) > 0, "the ring keeps its chunks between copies");
    ctx.release_unused();
    assert_eq!(live(&ctx), 0);
    assert_clean(&ctx);
}

/// The ring's chunks are the context's, not the user's: after buffers of growing
/// sizes, crops of crops included, round-trip and are freed, no user region is
/// alive though the ring keeps its chunks; `leak_check` reports nothing.
#[test]
fn live_regions_count_only_the_users_buffers() {
    let Some(ctx) = staged() else {
        return;
    };
    let mut bytes = 4u64 << 10;
    while bytes <= 25_000_000 {
        let n = (bytes / 4) as i64;
        let mut b = Buffer::new("b", ElemType::I32, &[n]).unwrap();
        ctx.device_malloc(&mut b).unwrap();
        let crop = b.cropped("c", &[n / 4], &[n / 2]).unwrap();
        let mut inner = crop.cropped("cc", &[n / 4 + 1], &[n / 4]).unwrap();
        assert_eq!(round_trip(&ctx, &mut inner), 0, "{bytes} bytes");
        // The crop's device write makes `b` device-dirty: read it back first.
        ctx.copy_to_host(&mut b).unwrap();
        assert_eq!(round_trip(&ctx, &mut b), 0, "{bytes} bytes");
        drop((inner, crop));
        ctx.device_free(&mut b).unwrap();
        bytes *= 5;
    }
    let counter = |name: &str| {
        ctx.counters()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    };
    assert_eq!(ctx.stats().user_regions(), 0);
    assert_eq!(counter("live_regions"), Some(0));
    let staging = ctx.stats().staging_regions.live();
    assert!(staging > 0, "the ring keeps its chunks between copies");
    assert_eq!(counter("staging_regions"), Some(staging));
    assert_eq!(ctx.stats().regions.live(), staging);
    assert!(ctx
        .stats()
        .leaks()
        .alive
        .iter()
        .all(|(w, _)| *w != "device regions"));
    ctx.release_unused();
    assert_eq!(counter("staging_regions"), Some(0));
    assert_clean(&ctx);
}

#[test]
fn repeated_copies_through_the_ring_submit_their_recording_again() {
    // A copy of one window records the same commands each time (the same ring
    // slot and offsets): from the second on, each direction submits its kept
    // recording, and the bytes are the new ones. The queue is fixed: choosing
    // it (`Auto` on a device with two) copies the first one several times.
    for queue in [SmallCopyQueue::Compute, SmallCopyQueue::Other] {
        let Some(ctx) = context(ContextOptions {
            import_host: false,
            mapped_upload: vkcopy::MappedCopy::Never,
            small_copy_queue: queue,
            ..Default::default()
        }) else {
            return;
        };
        ring_recordings_are_submitted_again(&ctx);
    }
}

fn ring_recordings_are_submitted_again(ctx: &Context) {
    let again = || ctx.stats().submitted_again();
    for n in [1024i64, 1 << 16] {
        let mut b = Buffer::new("b", ElemType::I32, &[n]).unwrap();
        let mut counts = Vec::new();
        for round in 0..3 {
            b.fill(|c| value(c) + round).unwrap();
            let before = again();
            ctx.copy_to_device(&mut b).unwrap();
            let up = again() - before;
            b.fill(|_| -1).unwrap();
            b.set_host_dirty(false);
            b.set_device_dirty(true);
            let before = again();
            ctx.copy_to_host(&mut b).unwrap();
            counts.push((up, again() - before));
            let wrong = b.compare(|c| value(c) + round, 3).unwrap().mismatches;
            assert_eq!(wrong, 0, "{n} round {round}");
        }
        assert_eq!(counts, [(0, 0), (1, 1), (1, 1)], "{n}");
    }
    assert_clean(ctx);
}
