//! Throughput plots, SVG, drawn with plotters. Two panels, each with its own
//! axis and a legend: copies above [`LATENCY_BYTES`] as GB/s on a log scale
//! (the paths span orders of magnitude, from reads of BAR-mapped VRAM to
//! device-to-device copies), and small copies, whose time is latency, as
//! microseconds per copy. Bars are the best run, dots the median; one colour
//! per report.

use std::path::Path;

use plotters::prelude::*;

use crate::report::read::{self, Loaded};
use crate::report::Report;

/// Copies of at most this many bytes are drawn as latency, not throughput.
pub const LATENCY_BYTES: u64 = 64 * 1024;

/// One measured copy.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// The report it came from (the legend's entry); empty for a lone report.
    pub series: String,
    /// `case: copy`.
    pub label: String,
    /// Bytes per copy.
    pub bytes: u64,
    /// The fastest run.
    pub best_seconds: f64,
    /// The median run.
    pub median_seconds: f64,
}

impl Bar {
    fn is_latency(&self) -> bool {
        self.bytes <= LATENCY_BYTES
    }

    /// Best and median, in the panel's unit: GB/s, or microseconds.
    fn values(&self) -> (f64, f64) {
        if self.is_latency() {
            (self.best_seconds * 1e6, self.median_seconds * 1e6)
        } else {
            let gbps = |s: f64| {
                if s > 0.0 {
                    self.bytes as f64 / s / 1e9
                } else {
                    0.0
                }
            };
            (gbps(self.best_seconds), gbps(self.median_seconds))
        }
    }

    fn axis_label(&self) -> String {
        if self.series.is_empty() {
            self.label.clone()
        } else {
            format!("{} {}", self.series, self.label)
        }
    }
}

/// The `measure` results of a report, in series `series`.
pub fn bars_from_report(report: &Loaded, series: &str) -> Vec<Bar> {
    let mut out = Vec::new();
    for case in &report.cases {
        for m in &case.measurements {
            out.push(Bar {
                series: series.to_owned(),
                label: format!("{}: {}", case.name, m.what),
                bytes: m.bytes,
                best_seconds: m.best_seconds,
                median_seconds: m.median_seconds.unwrap_or(m.best_seconds),
            });
        }
    }
    out
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws `bars` as SVG text.
pub fn throughput_svg_text(bars: &[Bar], title: &str) -> Result<String, String> {
    if bars.is_empty() {
        return Err("nothing to plot: no measure results".into());
    }
    let (latency, throughput): (Vec<&Bar>, Vec<&Bar>) = bars.iter().partition(|b| b.is_latency());
    let mut series: Vec<&str> = Vec::new();
    for b in bars {
        if !series.contains(&b.series.as_str()) {
            series.push(&b.series);
        }
    }
    let panel_height = |n: usize| if n == 0 { 0 } else { 110 + 28 * n as u32 };
    let (top, bottom) = (panel_height(throughput.len()), panel_height(latency.len()));
    let mut text = String::new();
    {
        let root =
            SVGBackend::with_string(&mut text, (1100, top + bottom + 30)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let root = root
            .titled(title, ("sans-serif", 18))
            .map_err(|e| e.to_string())?;
        let (upper, lower) = root.split_vertically(top);
        if !throughput.is_empty() {
            panel(
                &upper,
                &throughput,
                &series,
                "GB/s (1e9 bytes/s, host clock), log scale",
                "GB/s",
            )?;
        }
        if !latency.is_empty() {
            let area = if throughput.is_empty() {
                &upper
            } else {
                &lower
            };
            panel(
                area,
                &latency,
                &series,
                &format!(
                    "microseconds per copy (host clock), copies of {} KiB or less, log scale",
                    LATENCY_BYTES / 1024
                ),
                "us",
            )?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(text)
}

/// One panel: a bar per copy on a log axis of `unit`, with the legend.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    bars: &[&Bar],
    series: &[&str],
    axis: &str,
    unit: &str,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let values: Vec<(f64, f64)> = bars.iter().map(|b| b.values()).collect();
    let positive = values
        .iter()
        .flat_map(|(a, b)| [*a, *b])
        .filter(|v| *v > 0.0);
    let max = positive.clone().fold(f64::MIN_POSITIVE, f64::max) * 3.0;
    let min = positive.fold(max, f64::min) / 3.0;
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(440)
        .build_cartesian_2d((min..max).log_scale(), (0..bars.len()).into_segmented())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(axis)
        .y_labels(bars.len())
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => bars.get(*i).map(|b| b.axis_label()).unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(|e| err(&e))?;
    for (k, name) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let mine: Vec<usize> = (0..bars.len())
            .filter(|&i| bars[i].series == *name)
            .collect();
        let legend = if name.is_empty() {
            format!("best {unit}")
        } else {
            format!("{name}: best {unit}")
        };
        chart
            .draw_series(mine.iter().map(|&i| {
                let mut bar = Rectangle::new(
                    [
                        (min, SegmentValue::Exact(i)),
                        (values[i].0.max(min), SegmentValue::Exact(i + 1)),
                    ],
                    colour.mix(0.6).filled(),
                );
                bar.set_margin(3, 3, 0, 0);
                bar
            }))
            .map_err(|e| err(&e))?
            .label(legend)
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.mix(0.6).filled())
            });
        chart
            .draw_series(mine.iter().map(|&i| {
                Circle::new(
                    (values[i].1.max(min), SegmentValue::CenterOf(i)),
                    3,
                    BLACK.filled(),
                )
            }))
            .map_err(|e| err(&e))?
            .label(if name.is_empty() {
                format!("median {unit}")
            } else {
                format!("{name}: median {unit}")
            })
            .legend(|(x, y)| Circle::new((x + 7, y), 3, BLACK.filled()));
        chart
            .draw_series(mine.iter().map(|&i| {
                Text::new(
                    format!("{:.3}", values[i].0),
                    (values[i].0.max(min), SegmentValue::CenterOf(i)),
                    ("sans-serif", 12),
                )
            }))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))
}

/// Draws `bars` into an SVG file at `path`.
pub fn throughput_svg(bars: &[Bar], title: &str, path: &Path) -> Result<(), String> {
    let text = throughput_svg_text(bars, title).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The throughput chart of a run, as `throughput.svg`, when it measured copies.
pub fn report_chart(report: &Report) -> Result<Option<(&'static str, Vec<u8>)>, String> {
    let bars = bars_from_report(&read::from_report(report)?, "");
    if bars.is_empty() {
        return Ok(None);
    }
    let title = format!(
        "vkcopy-suite on {}, policy {}",
        report.device.name, report.policy
    );
    throughput_svg_text(&bars, &title).map(|t| Some(("throughput.svg", t.into_bytes())))
}
