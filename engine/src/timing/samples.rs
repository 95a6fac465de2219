//! Run times of one measurement, and their best and median.

/// Seconds per run: by the host clock, and by GPU timestamps where there are any.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// Each run by the host clock.
    pub host: Vec<f64>,
    /// Each run by GPU timestamps; empty where the copy had none.
    pub gpu: Vec<f64>,
}

impl Samples {
    /// Fastest run by the host clock; infinity without runs.
    pub fn best(&self) -> f64 {
        self.host.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// Median run by the host clock.
    pub fn median(&self) -> f64 {
        median(&self.host)
    }

    /// Fastest run by GPU timestamps, where there are any.
    pub fn gpu_best(&self) -> Option<f64> {
        (!self.gpu.is_empty()).then(|| self.gpu.iter().copied().fold(f64::INFINITY, f64::min))
    }

    /// Median run by GPU timestamps, where there are any.
    pub fn gpu_median(&self) -> Option<f64> {
        (!self.gpu.is_empty()).then(|| median(&self.gpu))
    }
}

/// The middle value; the mean of the two middle ones for an even count (as
/// Python's `statistics.median`, which the CUDA reference uses). NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// GB/s (1e9 bytes per second); 0 for a zero time.
pub fn gbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds / 1e9
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn best_and_gpu_figures() {
        let s = Samples {
            host: vec![0.03, 0.02, 0.04],
            gpu: vec![],
        };
        assert_eq!((s.best(), s.median()), (0.02, 0.03));
        assert_eq!((s.gpu_best(), s.gpu_median()), (None, None));
        assert_eq!(gbps(2_000_000_000, 2.0), 1.0);
        assert_eq!(gbps(1, 0.0), 0.0);
    }
}
