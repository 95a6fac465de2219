//! The host memcpy reference: the same byte count copied between two host
//! buffers, the yardstick for copies on a device whose memory is host memory.

use std::time::Instant;

use crate::rt::HostBytes;

/// Two host buffers of one size, the source filled and the destination already
/// written once, so that no run pays for page faults.
pub struct HostMemcpy {
    src: HostBytes,
    dst: HostBytes,
}

impl HostMemcpy {
    /// Buffers of `bytes`, page-aligned as vkcopy's own host memory is.
    pub fn new(bytes: u64) -> Result<Self, String> {
        let alloc = || {
            usize::try_from(bytes)
                .ok()
                .and_then(HostBytes::try_zeroed)
                .ok_or_else(|| format!("host_memcpy: cannot allocate {bytes} bytes"))
        };
        let (mut src, mut dst) = (alloc()?, alloc()?);
        src.fill(0x5A);
        dst.copy_from_slice(&src);
        Ok(HostMemcpy { src, dst })
    }

    /// Seconds one copy takes by the host clock.
    pub fn run(&mut self) -> f64 {
        let start = Instant::now();
        self.dst.copy_from_slice(&self.src);
        // The copy must happen even though nothing reads the destination.
        std::hint::black_box(&mut self.dst);
        start.elapsed().as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_the_bytes() {
        let mut m = HostMemcpy::new(10_000).unwrap();
        m.dst.fill(0);
        assert!(m.run() >= 0.0);
        assert!(m.dst.iter().all(|b| *b == 0x5A));
    }
}
