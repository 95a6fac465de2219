//! Readback into the caller's memory: a device buffer copied to a buffer over a
//! `Vec<f32>` the caller made (`Buffer::from_vec`), timed, with the rate printed.
//!
//! `cargo run --release --example readback_bench [-- MIB [REPEATS]]`

use std::time::Instant;

use vkcopy::{Buffer, Context, ContextOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let mib = args.next().transpose()?.unwrap_or(4);
    let repeats = args.next().transpose()?.unwrap_or(5);
    let n = mib * (1 << 20) / 4;
    let ctx = Context::new(ContextOptions::from_env()?)?;

    let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut dev = Buffer::from_vec("dev", &[n as i64], src)?;
    ctx.copy_to_device(&mut dev)?;
    let mut out = Buffer::from_vec("out", &[n as i64], vec![0f32; n])?;

    let mut best = f64::MAX;
    for _ in 0..repeats {
        let t = Instant::now();
        ctx.buffer_copy(&dev.without_host("dev_device"), &mut out, false)?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    let got = out.host::<f32>()?;
    assert_eq!(got[n - 1], (n - 1) as f32);
    drop(got);
    println!(
        "readback of {mib} MiB into caller memory: ok, best {:.3} ms, {:.2} GB/s",
        best * 1e3,
        (n * 4) as f64 / best / 1e9
    );
    drop((dev, out));
    let report = ctx.close();
    if !report.is_empty() {
        return Err(report.to_string().into());
    }
    Ok(())
}
