//! Device-to-device copies by the copy shader: every shape is copied once on a
//! context that forces the shader and once on one that forces `vkCmdCopyBuffer`,
//! and the destinations must agree byte for byte, bytes outside the copied box
//! included. Under the validation layer with synchronization validation.

mod common;

use common::{assert_clean, context, counter, validation_installed};
use vkcopy::{
    Buffer, Context, ContextOptions, CopyPath, DeviceCopy, Dim, ElemType, MappedCopy, Policy,
    SmallCopyQueue,
};

fn options(device_copy: DeviceCopy) -> ContextOptions {
    ContextOptions {
        device_copy,
        validation: validation_installed(),
        ..ContextOptions::from_env().unwrap()
    }
}

/// A context that forces the shader and one that forces `vkCmdCopyBuffer`.
fn pair() -> Option<(Context, Context)> {
    Some((
        context(options(DeviceCopy::Shader))?,
        context(options(DeviceCopy::Transfer))?,
    ))
}

fn host_bytes(b: &Buffer) -> Vec<u8> {
    b.host_view().unwrap().memory.read().unwrap().to_vec()
}

/// A buffer on the device holding `seed`-dependent values.
fn on_device(ctx: &Context, name: &str, elem: ElemType, extents: &[i64], seed: i64) -> Buffer {
    let mut b = Buffer::new(name, elem, extents).unwrap();
    b.fill(|c| {
        c.iter()
            .enumerate()
            .fold(seed, |a, (i, &x)| a * 31 + x * (i as i64 + 7))
    })
    .unwrap();
    ctx.copy_to_device(&mut b).unwrap();
    b
}

/// Copies `src` (the box `min`/`extent` of a buffer of `src_extents`) into a
/// buffer of `dst_extents` on the device, reads the destination back, and
/// returns its bytes.
fn copy_crop(
    ctx: &Context,
    elem: ElemType,
    src_extents: &[i64],
    crop: Option<(&[i64], &[i64])>,
    dst_extents: &[i64],
) -> Vec<u8> {
    let src = on_device(ctx, "src", elem, src_extents, 3);
    let mut dst = on_device(ctx, "dst", elem, dst_extents, 11);
    let view = match crop {
        Some((min, extent)) => src.cropped("crop", min, extent).unwrap(),
        None => src
            .cropped("all", &vec![0; src_extents.len()], src_extents)
            .unwrap(),
    };
    assert_eq!(
        ctx.buffer_copy(&view, &mut dst, true).unwrap(),
        CopyPath::DeviceToDevice
    );
    ctx.copy_to_host(&mut dst).unwrap();
    let bytes = host_bytes(&dst);
    drop((view, src, dst));
    bytes
}

/// Runs one copy on both contexts; returns whether the shader made it.
fn agree(
    (shader, transfer): &(Context, Context),
    elem: ElemType,
    src_extents: &[i64],
    crop: Option<(&[i64], &[i64])>,
    dst_extents: &[i64],
) -> bool {
    let before = counter(shader, "copies_device_to_device_shader");
    let a = copy_crop(shader, elem, src_extents, crop, dst_extents);
    let b = copy_crop(transfer, elem, src_extents, crop, dst_extents);
    assert!(
        a == b,
        "{elem:?} {src_extents:?} crop {crop:?} into {dst_extents:?}: first difference at byte {:?}",
        a.iter().zip(&b).position(|(x, y)| x != y)
    );
    assert_eq!(counter(transfer, "copies_device_to_device_shader"), 0);
    counter(shader, "copies_device_to_device_shader") > before
}

#[test]
fn contiguous_copies_of_every_tail() {
    let Some(p) = pair() else { return };
    // 4-byte words: 16-byte multiples, tails of 1 to 3 words, and larger copies.
    for n in [1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 1000, 1023, 4097, 262_147] {
        assert!(agree(&p, ElemType::U32, &[n], None, &[n]), "{n} words");
    }
    // 8-byte elements, into a larger destination.
    assert!(agree(&p, ElemType::U64, &[1001], None, &[1500]));
    // Byte sizes that are multiples of 4 take the shader; others vkCmdCopyBuffer.
    assert!(agree(&p, ElemType::U8, &[4096], None, &[4096]));
    assert!(agree(&p, ElemType::U16, &[6], None, &[6]));
    assert!(!agree(&p, ElemType::U8, &[1001], None, &[1001]));
    assert!(!agree(&p, ElemType::U16, &[5], None, &[9]));
    assert_clean(&p.0);
    assert_clean(&p.1);
}

#[test]
fn crops_at_four_and_sixteen_byte_offsets() {
    let Some(p) = pair() else { return };
    let u32s = ElemType::U32;
    // Rows at 16-byte offsets and strides: wide words with a one-word tail per row.
    assert!(agree(
        &p,
        u32s,
        &[128, 40],
        Some((&[4, 2], &[61, 20])),
        &[100, 50]
    ));
    // Rows at 4-byte offsets: narrow words.
    assert!(agree(
        &p,
        u32s,
        &[130, 40],
        Some((&[1, 3], &[61, 20])),
        &[100, 50]
    ));
    // A crop that runs past the destination: the intersection is copied.
    assert!(agree(
        &p,
        u32s,
        &[64, 64],
        Some((&[30, 30], &[34, 34])),
        &[48, 40]
    ));
    // Two outer dimensions (planes).
    assert!(agree(
        &p,
        u32s,
        &[32, 16, 6],
        Some((&[2, 1, 1], &[20, 10, 4])),
        &[32, 16, 6]
    ));
    // Three outer dimensions are left to vkCmdCopyBuffer.
    assert!(!agree(
        &p,
        u32s,
        &[8, 6, 5, 4],
        Some((&[1, 1, 1, 1], &[5, 4, 3, 2])),
        &[8, 6, 5, 4]
    ));
    // Byte elements at odd offsets are left to vkCmdCopyBuffer too.
    assert!(!agree(
        &p,
        ElemType::U8,
        &[64, 8],
        Some((&[3, 1], &[33, 5])),
        &[64, 8]
    ));
    // Bytes in rows of 4-byte multiples at 4-byte offsets.
    assert!(agree(
        &p,
        ElemType::U8,
        &[64, 8],
        Some((&[4, 1], &[32, 5])),
        &[64, 8]
    ));
    assert_clean(&p.0);
    assert_clean(&p.1);
}

/// `dst[x] = src[x]` where dst's element x is src's element x + shift, in one
/// device region: a `memmove` through a temporary.
fn shift_in_place(ctx: &Context, n: i64, shift: u64) -> Vec<u8> {
    let buf = on_device(ctx, "buf", ElemType::U32, &[n], 5);
    let src = buf.cropped("src", &[0], &[n - shift as i64]).unwrap();
    let dims = vec![Dim {
        min: 0,
        extent: n - shift as i64,
        stride: 1,
    }];
    let mut dst = buf.view_at("dst", dims, shift).unwrap();
    ctx.buffer_copy(&src, &mut dst, true).unwrap();
    let mut whole = buf.cropped("whole", &[0], &[n]).unwrap();
    whole.set_device_dirty(true);
    whole.set_host_dirty(false);
    ctx.copy_to_host(&mut whole).unwrap();
    let bytes = host_bytes(&whole);
    drop((src, dst, whole, buf));
    bytes
}

#[test]
fn overlapping_copies_within_one_region() {
    let Some((shader, transfer)) = pair() else {
        return;
    };
    for (n, shift) in [(1000, 1), (1000, 4), (4096, 100)] {
        let a = shift_in_place(&shader, n, shift);
        let b = shift_in_place(&transfer, n, shift);
        assert!(a == b, "{n} words shifted by {shift}");
    }
    assert_eq!(counter(&shader, "copies_device_to_device_shader"), 3);
    assert_clean(&shader);
    assert_clean(&transfer);
}

#[test]
fn auto_measures_once_per_size_class() {
    let Some(ctx) = context(options(DeviceCopy::Auto)) else {
        return;
    };
    assert_eq!(ctx.device_copy(), DeviceCopy::Auto);
    ctx.set_profiling(true);
    let n = 1 << 20; // 4 MiB of u32
    let expected = copy_crop(&ctx, ElemType::U32, &[n], None, &[n]);
    let calibrations = ctx.device_copy_calibrations();
    assert_eq!(calibrations.len(), 1, "{calibrations:?}");
    let c = calibrations[0];
    assert_eq!(
        (c.min_bytes, c.contiguous, c.bytes),
        (4 << 20, true, 4 << 20)
    );
    assert!(c.transfer_seconds > 0.0 && c.shader_seconds > 0.0);
    assert!(matches!(
        c.chosen,
        DeviceCopy::Shader | DeviceCopy::Transfer
    ));
    // A second copy of the class follows the choice without measuring again.
    let again = copy_crop(&ctx, ElemType::U32, &[n + 1000], None, &[n + 1000]);
    assert_eq!(ctx.device_copy_calibrations().len(), 1);
    assert_eq!(&again[..expected.len()], &expected[..]);
    let shader = counter(&ctx, "copies_device_to_device_shader");
    assert_eq!(shader, if c.chosen == DeviceCopy::Shader { 2 } else { 0 });
    assert_eq!(counter(&ctx, "copies_device_to_device"), 2);
    // Small copies are not measured.
    copy_crop(&ctx, ElemType::U32, &[1000], None, &[1000]);
    assert_eq!(ctx.device_copy_calibrations().len(), 1);
    assert_clean(&ctx);
}

#[test]
fn each_path_and_size_class_measures_every_queue_once() {
    let Some(ctx) = context(options(DeviceCopy::Auto)) else {
        return;
    };
    let on_one_queue = context(ContextOptions {
        policy: Policy::Halide,
        ..options(DeviceCopy::Auto)
    })
    .unwrap();
    let n = 3000;
    let expected = copy_crop(&on_one_queue, ElemType::U8, &[n, 5], None, &[n, 5]);
    let got = copy_crop(&ctx, ElemType::U8, &[n, 5], None, &[n, 5]);
    assert_eq!(got, expected);
    // Halide submits to one queue.
    assert_eq!(on_one_queue.copy_queue_calibrations(), vec![]);
    let measured = ctx.copy_queue_calibrations();
    if measured.is_empty() {
        eprintln!("skipping: the device has one queue");
        return;
    }
    // The device copy by the GPU, and the upload where the CPU does not write
    // device memory, each measured every queue: the compute queue's first,
    // each of another family, and kept the fastest.
    let first = match ctx.mapped_upload() {
        MappedCopy::Never => CopyPath::HostToDevice,
        _ => CopyPath::DeviceToDevice,
    };
    assert!(
        measured
            .iter()
            .any(|c| (c.path, c.bytes) == (first, 5 * n as u64)),
        "{measured:?}"
    );
    for c in &measured {
        assert_eq!(c.min_bytes, 4096, "{c:?}");
        assert!(
            c.times.len() >= 2 && c.times.iter().all(|t| t.seconds > 0.0),
            "{c:?}"
        );
        let mut others: Vec<u32> = c.times[1..].iter().map(|t| t.family).collect();
        others.sort();
        others.dedup();
        assert_eq!(
            others.len(),
            c.times.len() - 1,
            "a copy queue per family: {c:?}"
        );
        let best = c
            .times
            .iter()
            .map(|t| t.seconds)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(c.times[c.chosen].seconds, best, "{c:?}");
    }
    // A second copy of the class follows the choice; copies of 16 MiB stay on
    // the compute queue, unmeasured.
    let again = copy_crop(&ctx, ElemType::U8, &[n, 5], None, &[n, 5]);
    assert_eq!(again, expected);
    copy_crop(&ctx, ElemType::U32, &[1 << 22], None, &[1 << 22]);
    assert_eq!(ctx.copy_queue_calibrations(), measured);
    assert_eq!(counter(&ctx, "copies_device_to_device"), 3);
    assert_clean(&ctx);
    assert_clean(&on_one_queue);
}

#[test]
fn small_copies_on_the_other_queue_stay_in_order_with_large_ones() {
    // Forced onto the second queue (on a device with one queue, submissions of
    // their own to it): small uploads, copies and readbacks interleaved with
    // large ones (16 MiB) on the compute queue, each reading what the other
    // wrote.
    let Some(ctx) = context(ContextOptions {
        small_copy_queue: SmallCopyQueue::Other,
        mapped_upload: MappedCopy::Never,
        ..options(DeviceCopy::Auto)
    }) else {
        return;
    };
    let n = 1 << 22; // 16 MiB of u32
    let mut a = Buffer::new("a", ElemType::U32, &[n]).unwrap();
    a.fill(|c| c[0] % 1009).unwrap();
    ctx.copy_to_device(&mut a).unwrap();
    // A small upload into the middle of it, on the other queue.
    let mut crop = a.cropped("crop", &[1000], &[3000]).unwrap();
    crop.fill(|c| 7_000_000 + c[0]).unwrap();
    ctx.copy_to_device(&mut crop).unwrap();
    drop(crop);
    // The whole of it to b on the compute queue, then a small copy of b's
    // start to c on the other one.
    let mut b = Buffer::new("b", ElemType::U32, &[n]).unwrap();
    a.set_host_dirty(false);
    ctx.buffer_copy(&a, &mut b, true).unwrap();
    let mut c = Buffer::new("c", ElemType::U32, &[5000]).unwrap();
    let start = b.cropped("start", &[0], &[5000]).unwrap();
    // Blocking work wherever it is submitted: counted as work in flight.
    ctx.device_malloc(&mut c).unwrap();
    let work = ctx.stats().work_in_flight.created();
    ctx.buffer_copy(&start, &mut c, true).unwrap();
    assert_eq!(ctx.stats().work_in_flight.created(), work + 1);
    drop(start);
    let want = |x: i64| match (1000..4000).contains(&x) {
        true => 7_000_000 + x,
        false => x % 1009,
    };
    // A small readback on the other queue, a large one on the compute queue.
    ctx.copy_to_host(&mut c).unwrap();
    assert_eq!(c.compare(|p| want(p[0]), 1).unwrap().mismatches, 0);
    b.set_device_dirty(true);
    ctx.copy_to_host(&mut b).unwrap();
    assert_eq!(b.compare(|p| want(p[0]), 1).unwrap().mismatches, 0);
    assert_eq!(ctx.copy_queue_calibrations(), vec![]);
    drop((a, b, c));
    assert_clean(&ctx);
}

/// Rounds of a pipeline's upload, device copy and readback on `ctx`, from new
/// buffers; `between` runs after each round. Returns, per round, how many
/// recordings the device copy submitted again.
fn pipeline_rounds(ctx: &Context, rounds: i64, between: impl Fn()) -> Vec<u64> {
    let n = 1 << 16; // 256 KiB of u32
    let mut a = Buffer::new("a", ElemType::U32, &[n]).unwrap();
    let mut b = Buffer::new("b", ElemType::U32, &[n]).unwrap();
    ctx.device_malloc(&mut b).unwrap();
    let mut again = Vec::new();
    for round in 0..rounds {
        a.fill(|c| c[0] * 7 + round).unwrap();
        ctx.copy_to_device(&mut a).unwrap();
        let before = ctx.stats().submitted_again();
        ctx.buffer_copy(&a, &mut b, true).unwrap();
        again.push(ctx.stats().submitted_again() - before);
        b.set_device_dirty(true);
        ctx.copy_to_host(&mut b).unwrap();
        let wrong = b.compare(|c| c[0] * 7 + round, 1).unwrap().mismatches;
        assert_eq!(wrong, 0, "round {round}");
        between();
    }
    again
}

#[test]
fn repeated_copies_submit_their_recording_again() {
    // From the second round on, the device copy submits what it recorded in
    // the first, and moves the new bytes. The queue is fixed: choosing it (on
    // a device with several) makes the first copy on each.
    for device_copy in [DeviceCopy::Shader, DeviceCopy::Transfer] {
        let Some(ctx) = context(ContextOptions {
            mapped_upload: MappedCopy::Never,
            small_copy_queue: SmallCopyQueue::Compute,
            ..options(device_copy)
        }) else {
            return;
        };
        assert_eq!(
            pipeline_rounds(&ctx, 3, || ()),
            [0, 1, 1],
            "{device_copy:?}"
        );
        // Once any buffer is destroyed, nothing kept is submitted again, though
        // its own buffers live: a new buffer may take a destroyed one's handle.
        let destroy_one = || {
            let mut c = Buffer::new("c", ElemType::U32, &[1 << 24]).unwrap();
            ctx.device_malloc(&mut c).unwrap();
            drop(c);
            assert!(ctx.release_unused() > 0);
        };
        assert_eq!(
            pipeline_rounds(&ctx, 3, destroy_one),
            [0, 0, 0],
            "{device_copy:?}"
        );
        // And after the kernel and every block are destroyed.
        ctx.device_release();
        assert_eq!(pipeline_rounds(&ctx, 2, || ()), [0, 1], "{device_copy:?}");
        assert_clean(&ctx);
    }
}

#[test]
fn profiled_copies_submit_their_recording_again_and_are_timed_each_time() {
    // Work timed by GPU timestamps resets its queries in its own command
    // buffer, so its recording is kept as an untimed one is; every submission
    // of it still writes both timestamps.
    let Some(ctx) = context(ContextOptions {
        mapped_upload: MappedCopy::Never,
        small_copy_queue: SmallCopyQueue::Compute,
        ..options(DeviceCopy::Transfer)
    }) else {
        return;
    };
    ctx.set_profiling(true);
    let gpu = || ctx.copy_stats(CopyPath::DeviceToDevice).gpu_seconds;
    let seen = std::cell::RefCell::new(vec![gpu()]);
    let again = pipeline_rounds(&ctx, 3, || seen.borrow_mut().push(gpu()));
    assert_eq!(again, [0, 1, 1]);
    let seen = seen.into_inner();
    if seen[3] > 0.0 {
        assert!(
            seen.windows(2).all(|w| w[1] > w[0]),
            "GPU time per round: {seen:?}"
        );
    }
    assert_clean(&ctx);
}

#[test]
fn halide_policies_copy_with_vk_cmd_copy_buffer() {
    let Some(ctx) = context(ContextOptions {
        policy: Policy::Halide,
        ..options(DeviceCopy::Auto)
    }) else {
        return;
    };
    assert_eq!(ctx.device_copy(), DeviceCopy::Transfer);
    let n = 1 << 20;
    copy_crop(&ctx, ElemType::U32, &[n], None, &[n]);
    assert!(ctx.device_copy_calibrations().is_empty());
    assert_eq!(counter(&ctx, "copies_device_to_device_shader"), 0);
    assert_clean(&ctx);
}

#[test]
fn release_destroys_the_copy_kernel() {
    let Some((shader, _)) = pair() else { return };
    assert!(copy_crop(&shader, ElemType::U32, &[4096], None, &[4096]).len() == 16384);
    shader.device_release();
    assert_clean(&shader);
    // And it is made again on the next copy.
    copy_crop(&shader, ElemType::U32, &[4096], None, &[4096]);
    assert_eq!(counter(&shader, "copies_device_to_device_shader"), 2);
    assert_clean(&shader);
}

/// GB/s of both paths at 64 MiB, by GPU timestamps: `cargo test --release -p
/// vkcopy --test device_copy -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn measure_64_mib() {
    let Some((shader, transfer)) = pair() else {
        return;
    };
    let n = 16 << 20; // 64 MiB of u32
    for (name, ctx) in [("transfer", &transfer), ("shader", &shader)] {
        let src = on_device(ctx, "src", ElemType::U32, &[n], 1);
        let mut dst = on_device(ctx, "dst", ElemType::U32, &[n], 2);
        ctx.buffer_copy(&src, &mut dst, true).unwrap();
        ctx.set_profiling(true);
        let first = ctx.copy_stats(CopyPath::DeviceToDevice);
        let mut best = f64::MAX;
        for _ in 0..5 {
            let before = ctx.copy_stats(CopyPath::DeviceToDevice);
            ctx.buffer_copy(&src, &mut dst, true).unwrap();
            let after = ctx.copy_stats(CopyPath::DeviceToDevice);
            best = best.min(after.gpu_seconds - before.gpu_seconds);
        }
        let last = ctx.copy_stats(CopyPath::DeviceToDevice);
        let mean = (last.gpu_seconds - first.gpu_seconds) / 5.0;
        let bytes = (n * 4) as f64;
        println!(
            "{name}: best {:.2} GB/s, mean {:.2} GB/s (GPU timestamps)",
            bytes / best / 1e9,
            bytes / mean / 1e9
        );
        ctx.set_profiling(false);
    }
    let auto = context(options(DeviceCopy::Auto)).unwrap();
    let src = on_device(&auto, "src", ElemType::U32, &[n], 1);
    let mut dst = on_device(&auto, "dst", ElemType::U32, &[n], 2);
    auto.buffer_copy(&src, &mut dst, true).unwrap();
    println!("auto: {:?}", auto.device_copy_calibrations());
}
