//! Buffers over caller-owned host memory at addresses that are not page-aligned,
//! and neighbours that share a page: large copies import the page range around
//! the memory and touch only the buffer's own bytes.

use std::ptr::NonNull;

use vkcopy::{Buffer, Context, ContextOptions, Dim, ElemType, HostBytes, MappedCopy};

mod common;

use common::{assert_clean, context, counter};

const PAGE: usize = 4096;

/// A vector of `len` bytes and the offset in it of the first byte at `page + skew`.
fn skewed_vec(len: usize, skew: usize) -> (Vec<u8>, usize) {
    let v = vec![0u8; len + 2 * PAGE];
    let addr = v.as_ptr() as usize;
    let start = (addr.next_multiple_of(PAGE) + skew) - addr;
    (v, start)
}

fn dense(extents: &[i64]) -> Vec<Dim> {
    vkcopy::types::dense_dims(extents)
}

fn imports(ctx: &Context) -> usize {
    ctx.stats()
        .placements()
        .iter()
        .filter(|p| p.imported)
        .count()
}

/// Uploads `buf` (whose host holds `f`), wipes the host, reads back, compares.
fn round_trip(ctx: &Context, buf: &mut Buffer, f: impl Fn(&[i64]) -> i64 + Copy) -> u64 {
    buf.fill(f).unwrap();
    ctx.copy_to_device(buf).unwrap();
    buf.fill(|_| -7).unwrap();
    buf.set_host_dirty(false);
    buf.set_device_dirty(true);
    ctx.copy_to_host(buf).unwrap();
    buf.compare(f, 3).unwrap().mismatches
}

#[test]
fn caller_memory_at_any_offset_round_trips() {
    // Copies by the GPU, which import the caller's memory: the CPU's copies
    // of a buffer in host-visible device memory (under 4 MiB) import nothing.
    let opts = ContextOptions {
        mapped_upload: MappedCopy::Never,
        mapped_readback: MappedCopy::Never,
        ..ContextOptions::default()
    };
    let Some(ctx) = context(opts) else {
        return;
    };
    let can_import = ctx.info().has("VK_EXT_external_memory_host");
    for (skew, extents) in [(16usize, [512i64, 1024]), (4, [1000, 1001]), (0, [64, 64])] {
        let bytes = (extents[0] * extents[1] * 4) as usize;
        let (v, start) = skewed_vec(bytes, skew);
        let host = HostBytes::from_vec_range(v, start..start + bytes).unwrap();
        assert_eq!(host.as_ptr() as usize % PAGE, skew);
        let mut b = Buffer::from_host("b", ElemType::I32, dense(&extents), host).unwrap();
        assert!(b.host_dirty(), "caller memory holds the buffer's data");
        let before = imports(&ctx);
        let bad = round_trip(&ctx, &mut b, |c| c[0] - 3 * c[1] + skew as i64);
        assert_eq!(bad, 0, "skew {skew}, {extents:?}");
        if can_import && bytes >= 1 << 20 {
            assert_eq!(
                imports(&ctx),
                before + 1,
                "one import, reused by both copies"
            );
        }
        // The bytes around the buffer were not written.
        let mem = b.host_view().unwrap().memory.read().unwrap();
        assert_eq!(mem.len(), bytes);
        drop(mem);
        drop(b);
    }
    assert_clean(&ctx);
}

#[test]
fn strided_rows_in_caller_memory_keep_their_gaps() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    // Rows of 1500 i32 every 1601: each row starts at another offset in its
    // 256-byte block, so the copies to and from the rows are cut differently.
    let (rows, row, stride) = (400usize, 1500usize, 1601usize);
    let bytes = 4 * stride * rows;
    let (mut backing, start) = skewed_vec(bytes, 48);
    let sentinel = 0xa5u8;
    backing.iter_mut().for_each(|x| *x = sentinel);
    // SAFETY: the range lies inside `backing`, which outlives the buffer.
    let host = unsafe {
        HostBytes::from_raw_parts(
            NonNull::new(backing.as_mut_ptr().add(start)).unwrap(),
            bytes,
            None,
        )
    };
    let dims = vec![
        Dim {
            min: 0,
            extent: row as i64,
            stride: 1,
        },
        Dim {
            min: 0,
            extent: rows as i64,
            stride: stride as i64,
        },
    ];
    let mut b = Buffer::from_host("b", ElemType::I32, dims, host).unwrap();
    assert_eq!(round_trip(&ctx, &mut b, |c| 7 * c[0] - c[1]), 0);
    drop(b);
    for r in 0..rows {
        let gap = &backing[start + 4 * (r * stride + row)..start + 4 * (r + 1) * stride];
        assert!(
            gap.iter().all(|&x| x == sentinel),
            "row {r}'s gap was written"
        );
    }
    assert_clean(&ctx);
}

#[test]
fn neighbours_sharing_a_page_keep_their_own_bytes() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    // One backing allocation; a ends and b starts inside the same page.
    let n = 300_000usize; // i32 elements each: 1.2 MB, above the import threshold
    let (mut backing, start) = skewed_vec(8 * n + 64, 16);
    let sentinel = 0x5au8;
    backing.iter_mut().for_each(|x| *x = sentinel);
    let base = backing.as_mut_ptr();
    let a_at = start;
    let b_at = start + 4 * n + 8; // an 8-byte gap, same page
    let make = |at: usize, name: &str| {
        // SAFETY: the range lies inside `backing`, which outlives both buffers
        // (they are dropped before it), and the ranges do not overlap.
        let host =
            unsafe { HostBytes::from_raw_parts(NonNull::new(base.add(at)).unwrap(), 4 * n, None) };
        Buffer::from_host(name, ElemType::I32, dense(&[n as i64]), host).unwrap()
    };
    let mut a = make(a_at, "a");
    let mut b = make(b_at, "b");
    assert_eq!(
        (a_at + 4 * n) / PAGE,
        b_at / PAGE,
        "the buffers share a page"
    );
    assert_eq!(round_trip(&ctx, &mut a, |c| c[0] + 1), 0);
    assert_eq!(round_trip(&ctx, &mut b, |c| 2 * c[0] + 5), 0);
    // a again, after b's import of the shared page: still a's values only.
    assert_eq!(round_trip(&ctx, &mut a, |c| 3 * c[0]), 0);
    assert_eq!(b.compare(|c| 2 * c[0] + 5, 3).unwrap().mismatches, 0);
    drop((a, b));
    let gap = &backing[a_at + 4 * n..b_at];
    assert!(
        gap.iter().all(|&x| x == sentinel),
        "the gap was written: {gap:?}"
    );
    assert!(backing[..a_at].iter().all(|&x| x == sentinel));
    assert!(backing[b_at + 4 * n..].iter().all(|&x| x == sentinel));
    assert_clean(&ctx);
}

#[test]
fn caller_memory_too_small_for_the_shape_is_an_error() {
    let host = HostBytes::from_vec(vec![0u8; 100]);
    let e = Buffer::from_host("small", ElemType::I32, dense(&[26]), host).unwrap_err();
    assert_eq!(e.name(), "bad_dimensions");
    assert!(e.to_string().contains("104 bytes"), "{e}");
}

/// Reads `buf` back after the device got `f` (wiping the host first), and says
/// by which route: `imported` or `ring`.
fn read_back(ctx: &Context, buf: &mut Buffer, f: impl Fn(&[i64]) -> i64 + Copy) -> &'static str {
    buf.fill(f).unwrap();
    ctx.copy_to_device(buf).unwrap();
    buf.fill(|_| -7).unwrap();
    buf.set_host_dirty(false);
    buf.set_device_dirty(true);
    let imported = counter(ctx, "copies_to_host_imported");
    let ring = counter(ctx, "copies_to_host_ring");
    ctx.copy_to_host(buf).unwrap();
    assert_eq!(buf.compare(f, 3).unwrap().mismatches, 0, "{}", buf.name());
    match (
        counter(ctx, "copies_to_host_imported") - imported,
        counter(ctx, "copies_to_host_ring") - ring,
    ) {
        (1, 0) => "imported",
        (0, 1) => "ring",
        other => panic!("one readback counted {other:?}"),
    }
}

#[test]
fn small_readbacks_import_memory_they_meet_again() {
    // Readbacks by the GPU: the CPU's reads of device memory import nothing.
    let opts = ContextOptions {
        mapped_readback: MappedCopy::Never,
        ..ContextOptions::default()
    };
    let Some(ctx) = context(opts) else {
        return;
    };
    let again = match ctx.info().has("VK_EXT_external_memory_host") {
        true => "imported",
        false => "ring",
    };
    // 64 KiB of caller memory 16 bytes into a page, between sentinels: the
    // import covers the pages around it, the readback writes only its bytes.
    let bytes = 64 << 10;
    let (mut v, start) = skewed_vec(bytes, 16);
    let sentinel = 0x5au8;
    v.iter_mut().for_each(|x| *x = sentinel);
    let base = v.as_mut_ptr();
    // SAFETY: the range lies inside `v`, which outlives the buffer.
    let host =
        unsafe { HostBytes::from_raw_parts(NonNull::new(base.add(start)).unwrap(), bytes, None) };
    let mut small = Buffer::from_host("small", ElemType::I32, dense(&[16 << 10]), host).unwrap();
    let routes: Vec<_> = (0..3)
        .map(|round| read_back(&ctx, &mut small, |c| c[0] * 7 + round))
        .collect();
    assert_eq!(routes, ["ring", again, again]);
    drop(small);
    assert!(v[..start].iter().all(|&x| x == sentinel));
    assert!(v[start + bytes..].iter().all(|&x| x == sentinel));
    // A small crop of a large allocation stays staged: the import would pin
    // all of it.
    let large = Buffer::new("large", ElemType::I32, &[1 << 19]).unwrap();
    let mut crop = large.cropped("crop", &[4096], &[1024]).unwrap();
    let routes: Vec<_> = (0..2)
        .map(|round| read_back(&ctx, &mut crop, |c| c[0] + round))
        .collect();
    assert_eq!(routes, ["ring", "ring"]);
    drop((crop, large));
    assert_clean(&ctx);
}
