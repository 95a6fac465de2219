//! Throughput charts of suite reports ([`crate::chart::bars`]): copies above
//! [`LATENCY_BYTES`] as GB/s, small copies, whose time is latency, as
//! microseconds per copy, each panel on its own fitted axis (log where the
//! paths span orders of magnitude, from reads of BAR-mapped VRAM to
//! device-to-device copies). Bars are grouped by copy, one colour per report;
//! a bar is the best run, its dot the median.

use std::path::{Path, PathBuf};

use crate::chart::bars::{Group, Panel, Value};
use crate::chart::Series;

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

/// Draws `bars` as SVG text: a panel of GB/s and one of microseconds, bars
/// grouped by copy (`case: copy`), one bar and colour per series.
pub fn throughput_svg_text(bars: &[Bar], title: &str) -> Result<String, String> {
    if bars.is_empty() {
        return Err("nothing to plot: no measure results".into());
    }
    let mut names: Vec<&str> = Vec::new();
    for b in bars {
        if !names.contains(&b.series.as_str()) {
            names.push(&b.series);
        }
    }
    let series: Vec<Series> = names
        .iter()
        .map(|n| Series {
            name: (*n).to_owned(),
        })
        .collect();
    let panel = |latency: bool, axis: String| {
        let mine: Vec<&Bar> = bars.iter().filter(|b| b.is_latency() == latency).collect();
        let mut groups: Vec<Group> = Vec::new();
        for b in &mine {
            let k = names.iter().position(|n| *n == b.series).unwrap_or(0);
            // A copy measured twice in one run gets a group of its own.
            let at = groups
                .iter()
                .position(|g| g.label == b.label && g.values[k].is_none());
            let g = match at {
                Some(i) => &mut groups[i],
                None => {
                    groups.push(Group {
                        label: b.label.clone(),
                        values: vec![None; names.len()],
                    });
                    groups.last_mut().expect("just pushed")
                }
            };
            let (best, median) = b.values();
            let text = if latency {
                format!("{best:.1} us")
            } else {
                format!("{best:.2} GB/s")
            };
            g.values[k] = Some(Value {
                best,
                median: Some(median),
                text,
            });
        }
        Panel { axis, groups }
    };
    let panels = [
        panel(
            false,
            "GB/s (1e9 bytes/s), host clock: longer is faster".into(),
        ),
        panel(
            true,
            format!(
                "microseconds per copy (host clock), copies of {} KiB or less: shorter is faster",
                LATENCY_BYTES / 1024
            ),
        ),
    ];
    crate::chart::bars::svg(title, &series, &panels)
}

/// Draws `bars` into an SVG file at `path` and its PNG beside it; returns the
/// files written, and why the PNG is missing when it is.
pub fn throughput_svg(
    bars: &[Bar],
    title: &str,
    path: &Path,
) -> Result<(Vec<PathBuf>, Option<String>), String> {
    let text = throughput_svg_text(bars, title).map_err(|e| format!("{}: {e}", path.display()))?;
    write_chart(path, &text)
}

/// Writes `svg` to `path` and its PNG beside it ([`crate::chart::png::beside`]);
/// returns the files written, and why the PNG is missing when it is.
pub fn write_chart(path: &Path, svg: &str) -> Result<(Vec<PathBuf>, Option<String>), String> {
    std::fs::write(path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
    let png = crate::chart::png::beside(path);
    match crate::chart::png::from_svg(svg) {
        Ok(bytes) => {
            std::fs::write(&png, bytes).map_err(|e| format!("{}: {e}", png.display()))?;
            Ok((vec![path.to_owned(), png], None))
        }
        Err(e) => Ok((
            vec![path.to_owned()],
            Some(format!("{}: {e}", png.display())),
        )),
    }
}

/// The throughput chart of a run, as `throughput.svg` and `throughput.png`,
/// when it measured copies (the PNG left out where there is no font).
pub fn report_chart(report: &Report) -> Result<Vec<(&'static str, Vec<u8>)>, String> {
    let loaded = read::from_report(report).map_err(|e| e.to_string())?;
    let bars = bars_from_report(&loaded, "");
    if bars.is_empty() {
        return Ok(Vec::new());
    }
    let title = format!(
        "vkcopy-suite on {}, policy {}",
        report.device.name, report.policy
    );
    let svg = throughput_svg_text(&bars, &title)?;
    let mut files = Vec::new();
    if let Ok(png) = crate::chart::png::from_svg(&svg) {
        files.push(("throughput.png", png));
    }
    files.push(("throughput.svg", svg.into_bytes()));
    Ok(files)
}
