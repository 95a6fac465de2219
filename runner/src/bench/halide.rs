//! Copy speed of Halide's runtime: readback, upload, device to device and
//! round trip of a 1-D `u8` buffer over a sweep of sizes, best of the timed
//! runs by the host clock, after warm-up copies, as `vkcopy-suite bench`
//! times vkcopy. Readback data is checked on the first timed run.

use std::time::Instant;

use crate::bench::sizes;
use crate::bench::sweep::{repeats_for, WARMUP};
use halide_harness::ffi::{
    HalideBuffer, HalideDimension, HalideType, Library, DEVICE_DIRTY, HOST_DIRTY,
};

/// One measured path at one size.
pub struct Row {
    pub path: &'static str,
    pub bytes: u64,
    pub best_s: f64,
    pub correct: Option<bool>,
}

impl Row {
    pub fn line(&self) -> String {
        let gbps = self.bytes as f64 / self.best_s / 1e9;
        let correct = match self.correct {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        format!(
            "| {} | {} | {:.1} us | {gbps:.3} GB/s | {correct} |",
            self.path,
            sizes::format(self.bytes),
            self.best_s * 1e6
        )
    }
}

pub const HEADING: &str = "| path | size | best | GB/s | data right |\n|---|---:|---:|---:|---|";

/// A page-aligned host buffer and its `halide_buffer_t`.
struct HostBuf {
    mem: Vec<u8>,
    start: usize,
    dim: Box<HalideDimension>,
    raw: Box<HalideBuffer>,
}

impl HostBuf {
    fn new(bytes: u64) -> Result<HostBuf, String> {
        let n = i32::try_from(bytes)
            .map_err(|_| format!("{bytes} bytes: past a halide_dimension_t's extent"))?;
        let mut mem = vec![0u8; bytes as usize + 4096];
        let start = (mem.as_ptr() as usize).next_multiple_of(4096) - mem.as_ptr() as usize;
        let mut dim = Box::new(HalideDimension {
            min: 0,
            extent: n,
            stride: 1,
            flags: 0,
        });
        let raw = Box::new(HalideBuffer {
            device: 0,
            device_interface: std::ptr::null(),
            // SAFETY: `start` is within the vector, which outlives `raw`.
            host: unsafe { mem.as_mut_ptr().add(start) },
            flags: 0,
            ty: HalideType {
                code: 1,
                bits: 8,
                lanes: 1,
            },
            dimensions: 1,
            dim: &mut *dim,
            padding: std::ptr::null_mut(),
        });
        Ok(HostBuf {
            mem,
            start,
            dim,
            raw,
        })
    }

    fn bytes(&mut self) -> &mut [u8] {
        let n = self.dim.extent as usize;
        &mut self.mem[self.start..self.start + n]
    }
}

fn ok(call: &str, code: i32) -> Result<(), String> {
    if code == 0 {
        return Ok(());
    }
    Err(format!(
        "{call} returned {code}: {}",
        halide_harness::ffi::take_errors().join("; ")
    ))
}

/// Best of `runs` timed calls of `f` after [`WARMUP`] untimed ones.
fn best(runs: u32, mut f: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    for _ in 0..WARMUP {
        f()?;
    }
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Measures every path at every size of `sizes` on `lib`.
pub fn run(
    lib: &Library,
    sizes: &[u64],
    repeat: Option<u32>,
    mut each: impl FnMut(&Row),
) -> Result<(), String> {
    for &n in sizes {
        let runs = repeats_for(n, repeat);
        let mut a = HostBuf::new(n)?;
        let mut b = HostBuf::new(n)?;
        for (i, v) in a.bytes().iter_mut().enumerate() {
            *v = (i * 7 + 3) as u8;
        }
        // Every call below: valid buffers with host memory that outlives
        // them; freed before the vectors drop.
        // SAFETY: valid buffers with host memory that outlives them.
        ok("halide_device_malloc", unsafe {
            lib.device_malloc(&mut *a.raw)
        })?;
        // SAFETY: valid buffers with host memory that outlives them.
        ok("halide_device_malloc", unsafe {
            lib.device_malloc(&mut *b.raw)
        })?;
        let upload = best(runs, || {
            a.raw.flags = HOST_DIRTY;
            // SAFETY: valid buffers with host memory that outlives them.
            ok("halide_copy_to_device", unsafe {
                lib.copy_to_device(&mut *a.raw)
            })
        })?;
        each(&Row {
            path: "upload",
            bytes: n,
            best_s: upload,
            correct: None,
        });
        let d2d = best(runs, || {
            a.raw.flags = DEVICE_DIRTY;
            // SAFETY: valid buffers with host memory that outlives them.
            ok("halide_buffer_copy", unsafe {
                lib.buffer_copy(&mut *a.raw, true, &mut *b.raw)
            })
        })?;
        each(&Row {
            path: "device_to_device",
            bytes: n,
            best_s: d2d,
            correct: None,
        });
        b.bytes().fill(0);
        let readback = best(runs, || {
            b.raw.flags = DEVICE_DIRTY;
            // SAFETY: valid buffers with host memory that outlives them.
            ok("halide_copy_to_host", unsafe {
                lib.copy_to_host(&mut *b.raw)
            })
        })?;
        let correct = b
            .bytes()
            .iter()
            .enumerate()
            .all(|(i, v)| *v == (i * 7 + 3) as u8);
        each(&Row {
            path: "readback",
            bytes: n,
            best_s: readback,
            correct: Some(correct),
        });
        if n <= crate::bench::paths::ROUND_TRIP_MAX {
            let round = best(runs, || {
                a.raw.flags = HOST_DIRTY;
                // SAFETY: valid buffers with host memory that outlives them.
                ok("halide_copy_to_device", unsafe {
                    lib.copy_to_device(&mut *a.raw)
                })?;
                a.raw.flags = DEVICE_DIRTY;
                // SAFETY: valid buffers with host memory that outlives them.
                ok("halide_copy_to_host", unsafe {
                    lib.copy_to_host(&mut *a.raw)
                })
            })?;
            each(&Row {
                path: "round_trip",
                bytes: n,
                best_s: round,
                correct: None,
            });
        }
        // SAFETY: valid buffers with host memory that outlives them.
        ok("halide_device_free", unsafe {
            lib.device_free(&mut *a.raw)
        })?;
        // SAFETY: valid buffers with host memory that outlives them.
        ok("halide_device_free", unsafe {
            lib.device_free(&mut *b.raw)
        })?;
    }
    // SAFETY: no buffer holds device memory.
    unsafe { lib.device_release() };
    Ok(())
}
