//! Eight threads on one context for a bounded time (`VKCOPY_STRESS_SECS`,
//! default 5): uploads through staging and through imported host memory, crops
//! copied on the device, readbacks (blocking and async), frees and pool
//! collection, each thread checking its data; then the leak check.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vkcopy::{fault, Buffer, Context, ContextOptions, DeviceCopy, ElemType};

mod common;

use common::context;

const THREADS: u64 = 8;

/// A small deterministic generator per thread (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn value(seed: i64) -> impl Fn(&[i64]) -> i64 {
    move |c: &[i64]| (c[0] * 31 + c.get(1).copied().unwrap_or(0) * 7 + seed) & 0xffff
}

/// Readback of `b` into a cleared host, checked against `seed`'s values.
fn read_and_check(ctx: &Context, b: &mut Buffer, seed: i64, asynchronous: bool) {
    b.fill(|_| -1).unwrap();
    b.set_host_dirty(false);
    b.set_device_dirty(true);
    match asynchronous {
        true => {
            ctx.start_copy_to_host(b).unwrap().wait().unwrap();
        }
        false => {
            ctx.copy_to_host(b).unwrap();
        }
    }
    assert_eq!(
        b.compare(value(seed), 1).unwrap().mismatches,
        0,
        "{}",
        b.name()
    );
}

/// One step of thread `t`'s mix.
fn step(ctx: &Context, t: u64, i: u64, rng: &mut Rng) {
    let seed = (t * 1_000_000 + i) as i64;
    match rng.below(5) {
        // A small upload and readback through staging.
        0 => {
            let n = 1 + rng.below(20_000) as i64;
            let mut b = Buffer::new("small", ElemType::U16, &[n]).unwrap();
            b.fill(value(seed)).unwrap();
            ctx.copy_to_device(&mut b).unwrap();
            read_and_check(ctx, &mut b, seed, rng.below(2) == 0);
        }
        // A large one, through imported host memory where the device can import.
        1 => {
            let mut b =
                Buffer::new("large", ElemType::U32, &[1024, 1024 + rng.below(64) as i64]).unwrap();
            b.fill(value(seed)).unwrap();
            ctx.copy_to_device(&mut b).unwrap();
            read_and_check(ctx, &mut b, seed, false);
            ctx.device_free(&mut b).unwrap();
        }
        // A crop copied on the device into a buffer of the parent's shape.
        2 => {
            let (w, h) = (64 + rng.below(200) as i64, 16 + rng.below(100) as i64);
            let mut a = Buffer::new("parent", ElemType::I32, &[w, h]).unwrap();
            a.fill(value(seed)).unwrap();
            ctx.copy_to_device(&mut a).unwrap();
            let (min, extent) = ([w / 4, h / 4], [w / 2, h / 2]);
            let crop = a.cropped("crop", &min, &extent).unwrap();
            let mut dst = Buffer::new("dst", ElemType::I32, &[w, h]).unwrap();
            ctx.buffer_copy(&crop, &mut dst, true).unwrap();
            ctx.copy_to_host(&mut dst).unwrap();
            let copied = dst.cropped("copied", &min, &extent).unwrap();
            assert_eq!(copied.compare(value(seed), 1).unwrap().mismatches, 0);
        }
        // A device-to-device copy of a whole buffer, then frees.
        3 => {
            let n = 1 + rng.below(100_000) as i64;
            let mut a = Buffer::new("a", ElemType::U8, &[n]).unwrap();
            a.fill(value(seed)).unwrap();
            ctx.copy_to_device(&mut a).unwrap();
            let mut b = ctx.copy_to_new(&a, "b", true).unwrap();
            ctx.device_and_host_malloc(&mut b).unwrap();
            read_and_check(ctx, &mut b, seed, true);
            ctx.device_and_host_free(&mut b).unwrap();
            ctx.device_free(&mut a).unwrap();
        }
        // Gives empty blocks back while the other threads work.
        _ => {
            ctx.release_unused();
        }
    }
}

#[test]
fn eight_threads_share_a_context_without_leaks() {
    // Device copies by the copy shader: kernels run alongside the transfers.
    let options = ContextOptions {
        device_copy: DeviceCopy::Shader,
        ..ContextOptions::default()
    };
    let Some(ctx) = context(options) else {
        return;
    };
    let secs: u64 = std::env::var("VKCOPY_STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let steps = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (ctx, steps) = (ctx.clone(), &steps);
            s.spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
                let mut i = 0;
                while Instant::now() < deadline {
                    step(&ctx, t, i, &mut rng);
                    i += 1;
                }
                steps.fetch_add(i, Ordering::Relaxed);
            });
        }
    });
    let steps = steps.into_inner();
    let counter = |name: &str| ctx.counters().iter().find(|(n, _)| *n == name).unwrap().1;
    let imports = fault::calls()
        .iter()
        .find(|(e, _)| *e == "vkGetMemoryHostPointerPropertiesEXT")
        .unwrap()
        .1;
    eprintln!(
        "{THREADS} threads, {secs} s: {steps} steps, {} shader copies, {imports} host imports",
        counter("copies_device_to_device_shader")
    );
    assert!(steps >= THREADS, "every thread made a step");
    assert!(counter("copies_device_to_device_shader") > 0);
    let messages = ctx.take_validation_messages();
    assert!(messages.is_empty(), "validation messages: {messages:#?}");
    let report = ctx.close();
    assert!(report.is_empty(), "{report}");
}
