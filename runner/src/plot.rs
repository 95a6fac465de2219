//! Throughput plots: one horizontal bar per measured copy, GB/s on a log scale
//! (the paths span orders of magnitude, from reads of BAR-mapped VRAM to
//! device-to-device copies). SVG, drawn with plotters.

use std::path::Path;

use plotters::prelude::*;

/// One bar: its label and GB/s (1e9 bytes/s).
pub type Bar = (String, f64);

/// The bars of the `measure` results of a `results.json` report, labelled
/// `prefix` + case + copy.
pub fn bars_from_report(json: &serde_json::Value, prefix: &str) -> Vec<Bar> {
    let mut out = Vec::new();
    for case in json["cases"].as_array().into_iter().flatten() {
        let name = case["name"].as_str().unwrap_or("?");
        for m in case["measurements"].as_array().into_iter().flatten() {
            if let Some(g) = m["gbps"].as_f64() {
                out.push((
                    format!("{prefix}{name}: {}", m["what"].as_str().unwrap_or("?")),
                    g,
                ));
            }
        }
    }
    out
}

/// Draws `bars` into an SVG file at `path`.
pub fn throughput_svg(bars: &[Bar], title: &str, path: &Path) -> Result<(), String> {
    if bars.is_empty() {
        return Err("nothing to plot: no measure results".into());
    }
    let height = 80 + 28 * bars.len() as u32;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let max = bars.iter().map(|b| b.1).fold(1.0f64, f64::max) * 2.0;
    let min = bars
        .iter()
        .map(|b| b.1)
        .filter(|v| *v > 0.0)
        .fold(max, f64::min)
        .min(0.01);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(420)
        .build_cartesian_2d((min..max).log_scale(), (0..bars.len()).into_segmented())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("GB/s (1e9 bytes/s), log scale")
        .y_labels(bars.len())
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => bars.get(*i).map(|b| b.0.clone()).unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(|e| err(&e))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            let mut bar = Rectangle::new(
                [
                    (min, SegmentValue::Exact(i)),
                    (v.max(min), SegmentValue::Exact(i + 1)),
                ],
                BLUE.mix(0.6).filled(),
            );
            bar.set_margin(3, 3, 0, 0);
            bar
        }))
        .map_err(|e| err(&e))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            Text::new(
                format!("{v:.3}"),
                (v.max(min), SegmentValue::CenterOf(i)),
                ("sans-serif", 12),
            )
        }))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}
