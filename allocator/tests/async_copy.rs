//! Async copies: started, in flight together, polled, waited for, dropped, chained
//! by events; through crops and strided views; on the staging ring and on imported
//! host memory; and a wait that runs out of time. Under `VKCOPY_VALIDATION=1` with
//! synchronization validation, any message fails the test, and a context that
//! leaves out the synchronization of async copies is caught.

use std::time::Duration;

use vkcopy::{Buffer, Context, ContextOptions, CopyPath, DeviceCopy, Dim, ElemType, HostBytes};

mod common;

use common::{assert_clean, context};

fn value(c: &[i64]) -> i64 {
    (c[0] * 31 + c.get(1).copied().unwrap_or(0) * 1009 + 7) % 65_521
}

/// A buffer whose device side holds `value` and whose host side is wiped.
fn on_device(ctx: &Context, name: &str, extents: &[i64]) -> Buffer {
    let mut b = Buffer::new(name, ElemType::I32, extents).unwrap();
    b.fill(value).unwrap();
    ctx.copy_to_device(&mut b).unwrap();
    b.fill(|_| -1).unwrap();
    b.set_host_dirty(false);
    b.set_device_dirty(true);
    b
}

#[test]
fn readback_and_upload_in_flight_together() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    // 4 KiB and 256 KiB go through staging; 4 MiB through imported host memory.
    for n in [1024i64, 64 << 10, 1 << 20] {
        let mut down = on_device(&ctx, "down", &[n]);
        let mut up = Buffer::new("up", ElemType::I32, &[n]).unwrap();
        up.fill(|c| value(c) + 1).unwrap();
        up.set_host_dirty(true);
        let r = ctx.start_copy_to_host(&mut down).unwrap();
        let u = ctx.start_copy_to_device(&mut up).unwrap();
        assert_eq!(u.wait().unwrap(), CopyPath::HostToDevice);
        assert_eq!(r.wait().unwrap(), CopyPath::DeviceToHost);
        assert!(!down.device_dirty() && !down.host_dirty());
        assert!(!up.host_dirty());
        assert_eq!(down.compare(value, 3).unwrap().mismatches, 0, "{n}");
        up.fill(|_| 0).unwrap();
        up.set_host_dirty(false);
        up.set_device_dirty(true);
        ctx.copy_to_host(&mut up).unwrap();
        assert_eq!(
            up.compare(|c| value(c) + 1, 3).unwrap().mismatches,
            0,
            "{n}"
        );
    }
    assert_clean(&ctx);
}

#[test]
fn crops_and_strided_views_copy_async() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let src = on_device(&ctx, "src", &[64, 48]);
    let crop = src.cropped("crop", &[5, 7], &[40, 30]).unwrap();
    // A destination with a gap between rows and its mins at the crop's.
    let dims = vec![
        Dim {
            min: 5,
            extent: 40,
            stride: 1,
        },
        Dim {
            min: 7,
            extent: 30,
            stride: 50,
        },
    ];
    let host = HostBytes::from_vec(vec![0u8; 50 * 30 * 4]);
    let mut dst = Buffer::from_host("dst", ElemType::I32, dims, host).unwrap();
    let p = ctx.start_buffer_copy(&crop, &mut dst, true).unwrap();
    assert_eq!(p.wait().unwrap(), CopyPath::DeviceToDevice);
    assert!(dst.device_dirty() && !dst.host_dirty());
    let p = ctx.start_copy_to_host(&mut dst).unwrap();
    assert_eq!(p.wait().unwrap(), CopyPath::DeviceToHost);
    assert_eq!(dst.compare(value, 3).unwrap().mismatches, 0);
    drop((src, crop, dst));
    assert_clean(&ctx);
}

#[test]
fn polled_dropped_and_chained() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let n = 1i64 << 20;
    // Dropping a handle waits and sets the dirty bits.
    let mut a = on_device(&ctx, "a", &[n]);
    drop(ctx.start_copy_to_host(&mut a).unwrap());
    assert!(!a.device_dirty());
    assert_eq!(a.compare(value, 3).unwrap().mismatches, 0);

    // Polling ends in done; a result is given once.
    let mut b = on_device(&ctx, "b", &[n]);
    let mut p = ctx.start_copy_to_host(&mut b).unwrap();
    let mut got = None;
    for _ in 0..10_000 {
        if let Some(path) = p.wait_timeout(Duration::from_millis(5)).unwrap() {
            got = Some(path);
            break;
        }
    }
    assert_eq!(got, Some(CopyPath::DeviceToHost));
    assert!(p.is_done());
    assert_eq!(p.wait_timeout(Duration::ZERO).unwrap(), None);
    drop(p);
    assert_eq!(b.compare(value, 3).unwrap().mismatches, 0);

    // An upload, then a device copy of its data that starts after it: without the
    // event the copy could run first, on another stream.
    let mut src = Buffer::new("src", ElemType::I32, &[n]).unwrap();
    src.fill(|c| value(c) * 2).unwrap();
    src.set_host_dirty(true);
    ctx.device_malloc(&mut src).unwrap();
    // Neither side of the view is dirty: a copy to device memory reads its device side.
    let mut view = src.cropped("view", &[0], &[n]).unwrap();
    view.set_host_dirty(false);
    let mut mid = Buffer::new("mid", ElemType::I32, &[n]).unwrap();
    let up = ctx.start_copy_to_device(&mut src).unwrap();
    let first = up.event();
    let copy = ctx
        .start_buffer_copy_after(std::slice::from_ref(&first), &view, &mut mid, true)
        .unwrap();
    let second = copy.event();
    assert_eq!(copy.wait().unwrap(), CopyPath::DeviceToDevice);
    assert_eq!(up.wait().unwrap(), CopyPath::HostToDevice);
    assert_eq!(first.wait_timeout(Duration::ZERO), Some(true));
    assert_eq!(second.wait_timeout(Duration::ZERO), Some(true));
    let (_, first_end) = first.interval().unwrap();
    let (second_start, _) = second.interval().unwrap();
    assert!(second_start >= first_end);
    ctx.copy_to_host(&mut mid).unwrap();
    assert_eq!(mid.compare(|c| value(c) * 2, 3).unwrap().mismatches, 0);
    drop((a, b, src, view, mid));
    assert_clean(&ctx);
}

#[test]
fn bad_requests_fail_at_start() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let mut dev_only =
        Buffer::with_dims("d", ElemType::I32, vkcopy::types::dense_dims(&[16]), false).unwrap();
    ctx.device_malloc(&mut dev_only).unwrap();
    dev_only.set_device_dirty(true);
    let e = ctx.start_copy_to_host(&mut dev_only).unwrap_err();
    assert_eq!(e.name(), "host_is_null");
    let a = on_device(&ctx, "a", &[16]);
    let mut b = Buffer::new("b", ElemType::U8, &[16]).unwrap();
    let e = ctx.start_buffer_copy(&a, &mut b, true).unwrap_err();
    assert_eq!(e.name(), "incompatible_buffers");
    drop((dev_only, a, b));
    assert_clean(&ctx);
}

#[test]
fn a_wait_runs_out_of_time() {
    let Some(ctx) = context(ContextOptions {
        timeout: Duration::from_nanos(1),
        spin: Duration::ZERO,
        device_copy: DeviceCopy::Transfer,
        ..Default::default()
    }) else {
        return;
    };
    // Filling and copying 1 GiB takes longer than the 200 us of polling before
    // a blocking wait on any device: at 4.8 TB/s (an H200's HBM) the copy's
    // 2 GiB of reads and writes take 0.45 ms. 256 MiB took under 200 us there.
    let dims = vkcopy::types::dense_dims(&[256 << 20]);
    let mut a = Buffer::with_dims("a", ElemType::I32, dims.clone(), false).unwrap();
    let mut b = Buffer::with_dims("b", ElemType::I32, dims, false).unwrap();
    // Whichever wait comes first runs out (on the H200, device_malloc's own).
    let mut copy = || {
        ctx.device_malloc(&mut a)?;
        ctx.device_malloc(&mut b)?;
        a.set_device_dirty(true);
        ctx.buffer_copy(&a, &mut b, true)
    };
    let e = copy().unwrap_err();
    assert_eq!(e.name(), "timeout", "{e}");
    assert!(e.to_string().contains("did not finish within"), "{e}");
}

/// A copy started after an upload that is held back reads the upload's data only
/// because it waits for the upload's event: started without it, it reads what was
/// there before. The ordering, not luck, is what the tests above see.
#[test]
fn leaving_out_the_wait_is_caught() {
    let run = |ordered: bool| {
        let ctx = context(ContextOptions::default())?;
        let n = 1i64 << 16;
        let mut host = Buffer::new("host", ElemType::I32, &[n]).unwrap();
        host.fill(|c| c[0] % 1000 + 1).unwrap();
        let mut dev = Buffer::new("dev", ElemType::I32, &[n]).unwrap();
        ctx.device_malloc(&mut dev).unwrap();
        let mut head = dev.cropped("head", &[0], &[4096]).unwrap();
        head.set_host_dirty(false);
        head.set_device_dirty(true);
        let mut out = Buffer::new("out", ElemType::I32, &[4096]).unwrap();
        let gate = vkcopy::HostEvent::new(Duration::from_secs(60));
        let up = ctx
            .start_buffer_copy_after(&[gate.event()], &host, &mut dev, true)
            .unwrap();
        let after = match ordered {
            true => vec![up.event()],
            false => Vec::new(),
        };
        let copy = ctx
            .start_buffer_copy_after(&after, &head, &mut out, true)
            .unwrap();
        if !ordered {
            // The upload is held back until the copy is done.
            assert!(copy.event().wait_timeout(Duration::from_secs(60)).unwrap());
        }
        gate.signal();
        copy.wait().unwrap();
        up.wait().unwrap();
        ctx.copy_to_host(&mut out).unwrap();
        let wrong = out.compare(|c| c[0] % 1000 + 1, 1).unwrap().mismatches;
        drop((host, dev, head, out));
        assert_clean(&ctx);
        Some(wrong)
    };
    let Some(ordered) = run(true) else {
        return;
    };
    assert_eq!(ordered, 0);
    assert_eq!(run(false), Some(4096));
}

/// Work in flight counts each stream once while a copy on it is ready to run
/// (nothing left to wait for) or running, from when it is started, however
/// the streams' threads are scheduled. The upload stream's thread is held by
/// a copy that waits for a gate, so what is counted does not depend on timing.
#[test]
fn streams_count_once_each_while_a_copy_is_ready() {
    let Some(ctx) = context(ContextOptions::default()) else {
        return;
    };
    let work = &ctx.stats().work_in_flight;
    let n = 1i64 << 14;
    let host = Buffer::new("host", ElemType::I32, &[n]).unwrap();
    let mut dev = Buffer::new("dev", ElemType::I32, &[n]).unwrap();
    let mut ups: Vec<Buffer> = (0..2)
        .map(|i| {
            let mut b = Buffer::new("up", ElemType::I32, &[n]).unwrap();
            b.fill(|c| value(c) + i).unwrap();
            b
        })
        .collect();
    let mut down = on_device(&ctx, "down", &[n]);
    // Allocated first: new device memory is zeroed by blocking work.
    ctx.device_malloc(&mut dev).unwrap();
    for b in &mut ups {
        ctx.device_malloc(b).unwrap();
    }
    let peak = work.peak();
    let gate = vkcopy::HostEvent::new(Duration::from_secs(60));
    let held = ctx
        .start_buffer_copy_after(&[gate.event()], &host, &mut dev, true)
        .unwrap();
    // Waiting for the gate, the held copy is not in flight.
    assert_eq!(work.live(), 0);
    // Two uploads queued behind it on its stream: one stream in flight.
    let [a, b] = &mut ups[..] else { unreachable!() };
    let up_a = ctx.start_copy_to_device(a).unwrap();
    let up_b = ctx.start_copy_to_device(b).unwrap();
    assert_eq!((work.live(), work.peak()), (1, peak.max(1)));
    // A readback on its own stream meanwhile: two.
    let r = ctx.start_copy_to_host(&mut down).unwrap();
    assert_eq!(work.peak(), 2);
    assert_eq!(r.wait().unwrap(), CopyPath::DeviceToHost);
    gate.signal();
    held.wait().unwrap();
    up_a.wait().unwrap();
    up_b.wait().unwrap();
    assert_eq!((work.live(), work.peak()), (0, 2));
    assert_eq!(down.compare(value, 3).unwrap().mismatches, 0);
    drop((host, dev, ups, down));
    assert_clean(&ctx);
}
