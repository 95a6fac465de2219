//! Copies whose layouts cannot be merged cost what they move: strides of 0
//! (every element on the same bytes) copy the bytes once, and a strided layout
//! does not record a region per element in one call.

use std::time::Instant;

use vkcopy::{Buffer, Context, ContextOptions, CopyPath, Dim, ElemType};

mod common;

use common::{assert_clean, context};

fn dims(v: &[(i64, i64)]) -> Vec<Dim> {
    v.iter()
        .map(|&(extent, stride)| Dim {
            min: 0,
            extent,
            stride,
        })
        .collect()
}

/// Bytes moved by the context's copies along `path` so far.
fn bytes(ctx: &Context, path: CopyPath) -> u64 {
    ctx.copy_stats(path).bytes
}

/// Uploads and reads back a u8 buffer of `shape` whose first byte is 42; returns
/// the bytes each direction moved.
fn one_byte_round_trip(ctx: &Context, shape: &[(i64, i64)]) -> (u64, u64) {
    let (up, down) = (
        bytes(ctx, CopyPath::HostToDevice),
        bytes(ctx, CopyPath::DeviceToHost),
    );
    let started = Instant::now();
    let mut b = Buffer::with_dims("aliased", ElemType::U8, dims(shape), true).unwrap();
    b.host_view().unwrap().memory.write().unwrap()[0] = 42;
    b.set_host_dirty(true);
    ctx.copy_to_device(&mut b).unwrap();
    b.host_view().unwrap().memory.write().unwrap()[0] = 0;
    b.set_host_dirty(false);
    b.set_device_dirty(true);
    ctx.copy_to_host(&mut b).unwrap();
    assert_eq!(b.host_view().unwrap().memory.read().unwrap()[0], 42);
    eprintln!("{shape:?}: {:.1?}", started.elapsed());
    (
        bytes(ctx, CopyPath::HostToDevice) - up,
        bytes(ctx, CopyPath::DeviceToHost) - down,
    )
}

#[test]
fn zero_strides_copy_one_byte() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    // 2^31 elements on one byte, in two dimensions and in one.
    assert_eq!(one_byte_round_trip(&ctx, &[(65536, 0), (32768, 0)]), (1, 1));
    assert_eq!(one_byte_round_trip(&ctx, &[(2147483648, 0)]), (1, 1));
    assert_clean(&ctx);
}

#[test]
fn a_strided_layout_round_trips() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let started = Instant::now();
    let mut b = Buffer::with_dims("gaps", ElemType::U8, dims(&[(16000, 2)]), true).unwrap();
    b.fill(|c| c[0] * 3).unwrap();
    ctx.copy_to_device(&mut b).unwrap();
    b.fill(|_| 0).unwrap();
    b.set_host_dirty(false);
    b.set_device_dirty(true);
    ctx.copy_to_host(&mut b).unwrap();
    assert_eq!(b.compare(|c| (c[0] * 3) & 0xff, 1).unwrap().mismatches, 0);
    assert_eq!(bytes(&ctx, CopyPath::HostToDevice), 16000);
    eprintln!("u8 [16000] stride [2]: {:.1?}", started.elapsed());
    drop(b);
    assert_clean(&ctx);
}

#[test]
fn strided_device_copies_round_trip_between_and_within_buffers() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let started = Instant::now();
    // 16000 one-byte chunks: neither the copy kernel nor one region can take them.
    let mut a = Buffer::with_dims("a", ElemType::U8, dims(&[(16000, 2)]), true).unwrap();
    a.fill(|c| c[0] * 7 + 1).unwrap();
    ctx.copy_to_device(&mut a).unwrap();
    let mut b = Buffer::with_dims("b", ElemType::U8, dims(&[(16000, 3)]), true).unwrap();
    ctx.buffer_copy(&a, &mut b, true).unwrap();
    ctx.copy_to_host(&mut b).unwrap();
    assert_eq!(
        b.compare(|c| (c[0] * 7 + 1) & 0xff, 1).unwrap().mismatches,
        0
    );
    // Within one buffer: the first half of `a` onto its second half, through a
    // temporary.
    let first = a.cropped("first", &[0], &[8000]).unwrap();
    let mut second = a
        .strided_view("second", &[8000], dims(&[(8000, 2)]))
        .unwrap();
    ctx.buffer_copy(&first, &mut second, true).unwrap();
    drop((first, second));
    a.set_host_dirty(false);
    a.set_device_dirty(true);
    ctx.copy_to_host(&mut a).unwrap();
    let expected = |c: &[i64]| ((c[0] % 8000) * 7 + 1) & 0xff;
    assert_eq!(a.compare(expected, 1).unwrap().mismatches, 0);
    eprintln!("strided device copies: {:.1?}", started.elapsed());
    drop((a, b));
    assert_clean(&ctx);
}
