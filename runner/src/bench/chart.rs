//! The comparison as SVG: one group of horizontal bars per row of the table
//! (vkcopy, CUDA, CUDA pageable), throughput in GB/s on a log scale, and round
//! trips in a panel of their own in microseconds.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::bench::compare::Row;
use crate::bench::doc::BenchResult;
use crate::bench::sizes;

const SERIES: [(&str, RGBColor); 3] = [
    ("vkcopy", RGBColor(31, 119, 180)),
    (
        "CUDA (pinned; device for device_to_device)",
        RGBColor(214, 39, 40),
    ),
    ("CUDA pageable", RGBColor(255, 127, 14)),
];
const ROW_HEIGHT: u32 = 42;
const PANEL_EXTRA: u32 = 110;

/// Draws `rows` into an SVG file at `path`.
pub fn draw(rows: &[Row], title: &str, path: &Path) -> Result<(), String> {
    if rows.is_empty() {
        return Err("nothing to draw: no vkcopy results".into());
    }
    let (latency, throughput): (Vec<&Row>, Vec<&Row>) = rows.iter().partition(|r| r.is_latency());
    let panel = |n: usize| {
        if n == 0 {
            0
        } else {
            PANEL_EXTRA + ROW_HEIGHT * n as u32
        }
    };
    let top = panel(throughput.len());
    let height = 40 + top + panel(latency.len());
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let root = SVGBackend::new(path, (1100, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| err(&e))?;
    let (upper, lower) = root.split_vertically(top);
    if !throughput.is_empty() {
        bars(&upper, &throughput, false).map_err(|e| err(&e))?;
    }
    if !latency.is_empty() {
        bars(&lower, &latency, true).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawError = DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>;

/// One panel: a group of bars per row, the first row at the top.
fn bars(area: &Area, rows: &[&Row], latency: bool) -> Result<(), DrawError> {
    let figures: Vec<[Option<f64>; 3]> = rows
        .iter()
        .map(|r| {
            let f = |b: Option<&BenchResult>| {
                b.map(|b| {
                    if latency {
                        b.best_seconds * 1e6
                    } else {
                        b.best_gbps
                    }
                })
                .filter(|v| *v > 0.0)
            };
            [
                f(Some(&r.vkcopy)),
                f(r.cuda.as_ref()),
                f(r.pageable.as_ref()),
            ]
        })
        .collect();
    let (lo, hi) = decades(figures.iter().flatten().flatten().copied());
    // Three segments per row, one per series; the first row at the top.
    let n = rows.len();
    let segment = |i: usize, k: usize| 3 * (n - 1 - i) + (2 - k);
    let label = |y: &SegmentValue<usize>| match y {
        SegmentValue::CenterOf(j) if j % 3 == 1 && *j < 3 * n => {
            let v = &rows[n - 1 - j / 3].vkcopy;
            format!("{} {} {}", v.path, v.host_memory, sizes::format(v.bytes))
        }
        _ => String::new(),
    };
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .margin_right(40)
        .x_label_area_size(40)
        .y_label_area_size(240)
        .build_cartesian_2d((lo..hi).log_scale(), (0..3 * n).into_segmented())?;
    let x_desc = if latency {
        "microseconds per round trip (upload then readback), best run, log scale"
    } else {
        "GB/s (1e9 bytes/s), best run by the host clock, log scale"
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("path, host memory, size")
        .y_labels(3 * n)
        .y_label_formatter(&label)
        .disable_y_mesh()
        .draw()?;
    for (k, (name, color)) in SERIES.iter().enumerate() {
        let bar = |i: usize, v: f64| {
            let j = segment(i, k);
            let mut r = Rectangle::new(
                [
                    (lo, SegmentValue::Exact(j)),
                    (v, SegmentValue::Exact(j + 1)),
                ],
                color.filled(),
            );
            r.set_margin(1, 1, 0, 0);
            r
        };
        let series: Vec<(usize, f64)> = figures
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f[k].map(|v| (i, v)))
            .collect();
        if series.is_empty() {
            continue;
        }
        chart
            .draw_series(series.iter().map(|&(i, v)| bar(i, v)))?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
        let style =
            TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        chart.draw_series(series.iter().map(|&(i, v)| {
            let at = (v, SegmentValue::CenterOf(segment(i, k)));
            let text = if latency {
                format!(" {v:.1} us")
            } else {
                format!(" {v:.2}")
            };
            Text::new(text, at, style.clone())
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// An axis range of whole powers of ten around `values`, at least three decades
/// wide (plotters labels a log axis legibly by decades), with room on the right
/// for the figures and the legend.
fn decades(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let max = values.clone().fold(f64::MIN_POSITIVE, f64::max);
    let min = values.fold(max, f64::min);
    let hi = 10f64.powf((max.log10() + 0.7).ceil());
    let lo = 10f64.powf((min.log10() - 0.5).floor()).min(hi / 1000.0);
    (lo, hi)
}
