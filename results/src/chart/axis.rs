//! Value axes fitted to the data, with ticks a reader can read: 1-2-5 steps on
//! a linear axis from 0, the 1-2-5 values of each decade on a log axis (the
//! powers of ten alone when there are many decades).

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

/// An axis: its range and ticks in values, drawn in positions ([`Axis::pos`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The values at the axis's ends.
    pub lo: f64,
    /// The top end.
    pub hi: f64,
    /// Whether positions are the values' log10.
    pub log: bool,
    /// The values labelled.
    pub ticks: Vec<f64>,
}

/// A plotters coordinate over positions whose labelled points are the given
/// ticks (plotters would pick its own).
#[derive(Clone, Debug)]
pub struct Ticked {
    range: std::ops::Range<f64>,
    ticks: Vec<f64>,
}

impl Ticked {
    /// Positions `range`, labelled at `ticks`.
    pub fn new(range: std::ops::Range<f64>, ticks: Vec<f64>) -> Ticked {
        Ticked { range, ticks }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let f = if span > 0.0 {
            (v - self.range.start) / span
        } else {
            0.0
        };
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // The light mesh between ticks is not drawn.
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// Above this ratio of the largest value to the smallest, an axis is logarithmic.
pub const LOG_ABOVE: f64 = 20.0;

impl Axis {
    /// Fits `values` (positive ones; others are left out), leaving the fraction
    /// `room` of the axis free above the largest (for the figures written there).
    pub fn fit(values: impl IntoIterator<Item = f64>, room: f64) -> Axis {
        let v: Vec<f64> = values
            .into_iter()
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let max = v.iter().copied().fold(0.0, f64::max);
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let room = room.clamp(0.0, 0.8);
        if v.is_empty() {
            return Axis::linear(1.0);
        }
        if max / min <= LOG_ABOVE {
            return Axis::linear(max / (1.0 - room));
        }
        // Past three decades the ticks are powers of ten: start at one.
        let lo = if max / min > 1e3 {
            10f64.powf((min / 1.1).log10().floor())
        } else {
            step_below(min / 1.1)
        };
        let (lo_t, max_t) = (lo.log10(), max.log10());
        let hi_t = max_t + (max_t - lo_t) * room / (1.0 - room);
        Axis::log(lo, 10f64.powf(hi_t))
    }

    /// A linear axis from 0 to a round value at or above `top`: of the 1-2-5
    /// steps that cut it into 3 to 8 parts, the one whose end lies nearest
    /// above `top` (the larger step on a tie), so that little of it is empty.
    pub fn linear(top: f64) -> Axis {
        let top = if top.is_finite() && top > 0.0 {
            top
        } else {
            1.0
        };
        let parts = |step: f64| (top / step - 1e-9).ceil();
        let mut step = nice_step(top / 8.0);
        let mut best = (parts(step) * step, step);
        while parts(step) >= 3.0 {
            let hi = parts(step) * step;
            if hi <= best.0 * (1.0 + 1e-9) {
                best = (hi, step);
            }
            step = nice_step(step * 1.01);
        }
        let (hi, step) = best;
        let n = (hi / step).round() as usize;
        Axis {
            lo: 0.0,
            hi,
            log: false,
            ticks: (0..=n).map(|i| i as f64 * step).collect(),
        }
    }

    /// A log axis from `lo` to `hi`, with 1-2-5 ticks (1-2-3-5-7 within a
    /// decade and a half, powers of ten alone past three decades).
    pub fn log(lo: f64, hi: f64) -> Axis {
        let first = lo.log10().floor() as i32;
        let last = hi.log10().ceil() as i32;
        let mantissas: &[f64] = if last - first > 3 {
            &[1.0]
        } else if (hi / lo).log10() <= 1.6 {
            &[1.0, 2.0, 3.0, 5.0, 7.0]
        } else {
            &[1.0, 2.0, 5.0]
        };
        let eps = 1e-9;
        let ticks = (first..=last)
            .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|t| *t >= lo * (1.0 - eps) && *t <= hi * (1.0 + eps))
            .collect();
        Axis {
            lo,
            hi,
            log: true,
            ticks,
        }
    }

    /// Where `v` lies on the drawn axis: `v`, or its log10; values below the
    /// axis lie at its start.
    pub fn pos(&self, v: f64) -> f64 {
        let v = v.max(self.lo);
        if self.log {
            v.log10()
        } else {
            v
        }
    }

    /// The value at a position.
    pub fn value(&self, pos: f64) -> f64 {
        if self.log {
            10f64.powf(pos)
        } else {
            pos
        }
    }

    /// The drawn range.
    pub fn range(&self) -> std::ops::Range<f64> {
        self.pos(self.lo)..self.pos(self.hi)
    }

    /// The ticks' positions.
    pub fn tick_positions(&self) -> Vec<f64> {
        self.ticks.iter().map(|t| self.pos(*t)).collect()
    }

    /// The axis as a plotters coordinate, labelled at its ticks.
    pub fn coord(&self) -> Ticked {
        Ticked::new(self.range(), self.tick_positions())
    }
}

/// The 1-2-5 step at or above `x`.
fn nice_step(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let e = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * e)
        .find(|s| *s >= x * (1.0 - 1e-9))
        .unwrap_or(10.0 * e)
}

/// The largest 1-2-5 value at or below `x`.
fn step_below(x: f64) -> f64 {
    let e = 10f64.powf(x.log10().floor());
    [5.0, 2.0, 1.0]
        .iter()
        .map(|m| m * e)
        .find(|s| *s <= x * (1.0 + 1e-9))
        .unwrap_or(e)
}

/// A tick's label: as few digits as the value needs (`0.05`, `1.5`, `20`, `1000`).
pub fn label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = if v.abs() >= 10.0 {
        0
    } else {
        // Enough decimals for two significant digits, trailing zeros dropped.
        (1.0 - v.abs().log10().floor()).max(0.0) as usize
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_values_get_a_linear_axis_with_ticks_among_them() {
        // The H200 run's bars lay between 5.8 and 9.4 GB/s, with ticks at 10 and 20 only.
        let a = Axis::fit([5.8, 7.1, 9.4], 0.15);
        assert!(!a.log);
        assert_eq!(a.lo, 0.0);
        assert_eq!(a.ticks, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
        assert!(a.hi >= 9.4 / 0.85);
        let among = a.ticks.iter().filter(|t| **t > 5.8 && **t < 9.4).count();
        assert_eq!(among, 2);
    }

    #[test]
    fn a_linear_axis_ends_at_the_nearest_round_value_above_its_data() {
        // A two-run chart's bars reached 10.69 GB/s on an axis drawn to 15,
        // ticks at 0, 5, 10 and 15: a third of it empty.
        let a = Axis::fit([3.0, 10.69], 0.15);
        assert_eq!(a.ticks, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]);
        // Equal ends: the larger step, fewer ticks.
        assert_eq!(Axis::linear(30.0).ticks, [0.0, 10.0, 20.0, 30.0]);
        assert_eq!(Axis::linear(1.0).ticks.len(), 6);
    }

    #[test]
    fn spread_values_get_a_log_axis_with_1_2_5_ticks() {
        let a = Axis::fit([0.6, 3.0, 52.0], 0.1);
        assert!(a.log);
        assert_eq!(a.lo, 0.5);
        assert_eq!(a.ticks, [0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0]);
        assert!(a.hi > 52.0);
        // Many decades: powers of ten only.
        let a = Axis::fit([0.03, 1000.0], 0.1);
        assert_eq!(a.ticks, [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]);
        assert!((a.pos(1000.0) - 3.0).abs() < 1e-12 && a.pos(0.0) == a.pos(a.lo));
    }

    #[test]
    fn labels_have_the_digits_they_need() {
        let got: Vec<String> = [0.0, 0.05, 0.5, 1.0, 1.5, 2.5, 20.0, 1000.0, 12.34]
            .iter()
            .map(|v| label(*v))
            .collect();
        assert_eq!(
            got,
            ["0", "0.05", "0.5", "1", "1.5", "2.5", "20", "1000", "12"]
        );
    }
}
