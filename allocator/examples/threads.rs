//! One context shared by several threads: each clones it (cheap) and runs its
//! own upload, device-to-device copy and readback.
//!
//! `cargo run --example threads [-- THREADS]`

use vkcopy::{Buffer, Context, ContextOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads: u32 = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(4);
    let ctx = Context::new(ContextOptions::from_env()?)?;
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let ctx = ctx.clone();
            std::thread::spawn(move || -> vkcopy::Result<u32> {
                let data: Vec<u32> = (0..64 * 64).map(|i| i * (t + 1)).collect();
                let mut a = Buffer::from_vec("a", &[64, 64], data)?;
                ctx.copy_to_device(&mut a)?;
                let mut b = ctx.copy_to_new(&a, "b", true)?;
                ctx.device_and_host_malloc(&mut b)?;
                ctx.copy_to_host(&mut b)?;
                let last = b.host::<u32>()?[64 * 64 - 1];
                Ok(last)
            })
        })
        .collect();
    for (t, w) in workers.into_iter().enumerate() {
        let last = w.join().map_err(|_| "a thread panicked")??;
        assert_eq!(last, (64 * 64 - 1) * (t as u32 + 1));
    }
    let messages = ctx.take_validation_messages();
    let report = ctx.close();
    println!("{threads} threads: ok; {report}");
    if !report.is_empty() || !messages.is_empty() {
        return Err(format!("{report}; validation: {messages:?}").into());
    }
    Ok(())
}
