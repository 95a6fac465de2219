//! Typed host access and dirty state that views share: the silent no-ops of a
//! first-time user are results or errors now.

use vkcopy::{Buffer, ContextOptions, ElemType, Error, HostBytes, Value};

mod common;

use common::{assert_clean, context};

#[test]
fn writes_through_a_guard_are_uploaded() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let mut img = Buffer::new("img", ElemType::F32, &[64, 32]).unwrap();
    ctx.copy_to_device(&mut img).unwrap();
    {
        let mut px = img.host_mut::<f32>().unwrap();
        for (i, p) in px.iter_mut().enumerate() {
            *p = i as f32 * 0.5;
        }
    }
    // Before: the guard-less write left host_dirty clear and the upload did nothing.
    assert!(img.host_dirty());
    ctx.copy_to_device(&mut img).unwrap();
    assert!(!img.host_dirty());
    let mut out = Buffer::new("out", ElemType::F32, &[64, 32]).unwrap();
    ctx.buffer_copy(&img, &mut out, true).unwrap();
    ctx.copy_to_host(&mut out).unwrap();
    let got = out.host::<f32>().unwrap();
    assert_eq!(got.len(), 64 * 32);
    assert_eq!(got[0], 0.0);
    assert_eq!(got[64 * 32 - 1], (64 * 32 - 1) as f32 * 0.5);
    drop(got);
    drop((img, out));
    assert_clean(&ctx);
}

#[test]
fn from_vec_keeps_the_callers_elements() {
    let data: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let addr = data.as_ptr() as usize;
    let buf = Buffer::from_vec("v", &[4, 3], data).unwrap();
    assert!(buf.host_dirty());
    assert_eq!(buf.elem(), ElemType::F32);
    let s = buf.host::<f32>().unwrap();
    assert_eq!(s.as_ptr() as usize, addr);
    assert_eq!(s[buf.offset_of(&[1, 2]).unwrap() as usize], 9.0);
    drop(s);
    assert!(matches!(
        Buffer::from_vec("w", &[4, 4], vec![0u8; 12]),
        Err(Error::BadDimensions(_))
    ));
}

#[test]
fn typed_access_checks_type_and_alignment() {
    let buf = Buffer::new("b", ElemType::I32, &[8]).unwrap();
    assert!(matches!(
        buf.host::<f32>(),
        Err(Error::IncompatibleBuffers(_))
    ));
    // Bytes at an odd address cannot be i32s.
    let v = vec![0u8; 40];
    let host = HostBytes::from_vec_range(v, 1..33).unwrap();
    let odd =
        Buffer::from_host("odd", ElemType::I32, vkcopy::types::dense_dims(&[8]), host).unwrap();
    assert!(matches!(odd.host::<i32>(), Err(Error::HostInUse(_))));
    // A guard of a crop borrows the parent's memory.
    let crop = buf.cropped("c", &[2], &[4]).unwrap();
    let g = crop.host::<i32>().unwrap();
    assert_eq!(g.len(), 4);
    let mut parent = buf;
    assert!(matches!(parent.host_mut::<i32>(), Err(Error::HostInUse(_))));
    drop(g);
    parent.host_mut::<i32>().unwrap()[3] = 7;
    assert_eq!(crop.host::<i32>().unwrap()[1], 7);
}

#[test]
fn a_device_dirty_host_is_not_read() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let mut src = Buffer::new("src", ElemType::I32, &[16]).unwrap();
    src.fill(|c| c[0] * 3).unwrap();
    let mut dst = Buffer::new("dst", ElemType::I32, &[16]).unwrap();
    ctx.buffer_copy(&src, &mut dst, true).unwrap();
    assert!(matches!(dst.host::<i32>(), Err(Error::DeviceDirty(_))));
    assert!(matches!(dst.host_mut::<i32>(), Err(Error::DeviceDirty(_))));
    ctx.copy_to_host(&mut dst).unwrap();
    assert_eq!(dst.host::<i32>().unwrap()[5], 15);
    drop((src, dst));
    assert_clean(&ctx);
}

#[test]
fn a_write_into_a_crop_makes_the_parent_device_dirty() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let mut img = Buffer::new("img", ElemType::I32, &[32, 32]).unwrap();
    ctx.copy_to_device(&mut img).unwrap();
    let mut crop = img.cropped("crop", &[8, 8], &[4, 4]).unwrap();
    let mut ones = Buffer::new("ones", ElemType::I32, &[32, 32]).unwrap();
    ones.fill(|c| 1 + c[0] + 100 * c[1]).unwrap();
    ctx.buffer_copy(&ones, &mut crop, true).unwrap();
    assert!(crop.device_dirty());
    // Halide's own bit stays clear; the parent still knows.
    assert!(!img.device_dirty());
    assert!(img.is_device_dirty());
    assert!(matches!(img.host::<i32>(), Err(Error::DeviceDirty(_))));
    // Before: a silent no-op that left zeros.
    ctx.copy_to_host(&mut img).unwrap();
    assert!(!img.is_device_dirty());
    assert_eq!(img.get(&[9, 10]).unwrap(), Value::Int(1 + 9 + 1000));
    assert_eq!(img.get(&[7, 10]).unwrap(), Value::Int(0));
    drop((img, crop, ones));
    assert_clean(&ctx);
}

#[test]
fn a_host_write_through_a_crop_makes_the_parent_host_dirty() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let mut img = Buffer::new("img", ElemType::U32, &[16, 16]).unwrap();
    ctx.copy_to_device(&mut img).unwrap();
    let mut crop = img.cropped("crop", &[4, 4], &[2, 2]).unwrap();
    crop.host_mut::<u32>().unwrap()[0] = 99;
    assert!(img.is_host_dirty());
    ctx.copy_to_device(&mut img).unwrap();
    let mut out = Buffer::new("out", ElemType::U32, &[16, 16]).unwrap();
    ctx.buffer_copy(&img, &mut out, true).unwrap();
    ctx.copy_to_host(&mut out).unwrap();
    assert_eq!(out.get(&[4, 4]).unwrap(), Value::Int(99));
    drop((img, crop, out));
    assert_clean(&ctx);
}

#[test]
fn copies_that_move_nothing_say_so() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let mut img = Buffer::new("img", ElemType::I32, &[256, 256]).unwrap();
    img.fill(|c| c[0] + 1000 * c[1]).unwrap();
    ctx.copy_to_device(&mut img).unwrap();
    let crop = img.cropped("crop", &[100, 100], &[64, 64]).unwrap();
    let mut fresh = Buffer::new("fresh", ElemType::I32, &[64, 64]).unwrap();
    // Halide's rule: Ok, nothing moved.
    ctx.buffer_copy(&crop, &mut fresh, false).unwrap();
    assert!(matches!(
        ctx.buffer_copy_counted(&crop, &mut fresh, false),
        Err(Error::IncompatibleBuffers(_))
    ));
    let mut big = Buffer::new("big", ElemType::I32, &[128, 128]).unwrap();
    let c = ctx.buffer_copy_counted(&crop, &mut big, true).unwrap();
    assert_eq!(c.elements, 28 * 28);
    // The helper: the crop's shape, every element.
    let mut copy = ctx.copy_to_new(&crop, "copy", true).unwrap();
    assert_eq!(copy.dims()[0].min, 100);
    assert_eq!(copy.len(), 64 * 64);
    ctx.device_and_host_malloc(&mut copy).unwrap();
    ctx.copy_to_host(&mut copy).unwrap();
    let cmp = copy.compare(|c| c[0] + 1000 * c[1], 4).unwrap();
    assert_eq!(cmp.mismatches, 0, "{cmp:?}");
    let on_host = ctx.copy_to_new(&crop, "on_host", false).unwrap();
    assert_eq!(on_host.host::<i32>().unwrap()[0], 100 + 100_000);
    drop((img, crop, fresh, big, copy, on_host));
    assert_clean(&ctx);
}
