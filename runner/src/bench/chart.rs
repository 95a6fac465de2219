//! The comparison with CUDA as charts ([`crate::chart`]), each an SVG with its
//! PNG beside it: the ratio of CUDA's time to vkcopy's against the size, one
//! line per path, with parity and the targets marked (what a reader wants
//! first); and the figures as bars grouped by path, host memory and size, one
//! colour per tool, throughput in GB/s and round trips in microseconds.

use std::path::{Path, PathBuf};

use crate::bench::compare::Row;
use crate::bench::sizes;
use crate::chart::bars::{Group, Panel, Value};
use crate::chart::lines::{Level, Line, Spec};
use crate::chart::Series;

const SERIES: [&str; 3] = [
    "vkcopy",
    "CUDA (pinned; device for device_to_device)",
    "CUDA pageable",
];

/// The levels the ratio chart marks: parity, and the speed targets.
fn levels() -> Vec<Level> {
    vec![
        Level::solid(1.0, "1.0: as fast as CUDA"),
        Level::target(0.9, "target 0.9x", None),
        Level::target(
            3.0,
            "target for uploads up to 64 KiB: 3x",
            Some(64.0 * 1024.0),
        ),
    ]
}

/// Draws both charts of `rows`: the bars into `path`, the ratios into
/// `<path>_ratio.svg`; each with its PNG. Returns the files written and, when
/// a PNG could not be made, why.
pub fn draw(rows: &[Row], title: &str, path: &Path) -> Result<(Vec<PathBuf>, Vec<String>), String> {
    if rows.is_empty() {
        return Err("nothing to draw: no vkcopy results".into());
    }
    let (mut files, mut missing) = (Vec::new(), Vec::new());
    let mut write = |p: &Path, svg: String| -> Result<(), String> {
        let (f, m) = crate::plot::write_chart(p, &svg)?;
        files.extend(f);
        missing.extend(m);
        Ok(())
    };
    write(path, bars(rows, title)?)?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("bench");
    let ratio = path.with_file_name(format!("{stem}_ratio.svg"));
    if let Some(svg) = ratios(rows, title)? {
        write(&ratio, svg)?;
    }
    Ok((files, missing))
}

/// The ratio chart, when any row has CUDA's figure.
fn ratios(rows: &[Row], title: &str) -> Result<Option<String>, String> {
    let mut lines: Vec<Line> = Vec::new();
    for r in rows {
        let Some(ratio) = r.ratio() else { continue };
        let name = format!("{} ({})", r.vkcopy.path, r.vkcopy.host_memory);
        let point = (r.vkcopy.bytes as f64, ratio);
        match lines.iter_mut().find(|l| l.name == name) {
            Some(l) => l.points.push(point),
            None => lines.push(Line {
                name,
                points: vec![point],
            }),
        }
    }
    if lines.is_empty() {
        return Ok(None);
    }
    let title = format!("{title}: CUDA's time / vkcopy's (above 1, vkcopy is faster)");
    let spec = Spec {
        title: &title,
        x_desc: "bytes per copy (log scale)",
        y_desc: "CUDA's best time / vkcopy's best time (log scale)",
        x_label: &|x| sizes::format(x.round() as u64),
    };
    crate::chart::lines::svg(&spec, &lines, &levels()).map(Some)
}

/// The bars: a group per row, a bar per tool that measured it.
fn bars(rows: &[Row], title: &str) -> Result<String, String> {
    let series: Vec<Series> = SERIES
        .iter()
        .map(|s| Series {
            name: (*s).to_owned(),
        })
        .collect();
    let panel = |latency: bool, axis: &str| Panel {
        axis: axis.to_owned(),
        groups: rows
            .iter()
            .filter(|r| r.is_latency() == latency)
            .map(|r| {
                let v = |b: Option<&crate::bench::doc::BenchResult>| {
                    let b = b?;
                    let best = if latency {
                        b.best_seconds * 1e6
                    } else {
                        b.best_gbps
                    };
                    (best > 0.0).then(|| Value {
                        best,
                        median: None,
                        text: r.figure(b),
                    })
                };
                Group {
                    label: format!(
                        "{} {} {}",
                        r.vkcopy.path,
                        r.vkcopy.host_memory,
                        sizes::format(r.vkcopy.bytes)
                    ),
                    values: vec![
                        v(Some(&r.vkcopy)),
                        v(r.cuda.as_ref()),
                        v(r.pageable.as_ref()),
                    ],
                }
            })
            .collect(),
    };
    let panels = [
        panel(false, "GB/s (1e9 bytes/s), best run by the host clock"),
        panel(
            true,
            "microseconds per round trip (upload then readback), best run",
        ),
    ];
    crate::chart::bars::svg(title, &series, &panels)
}
