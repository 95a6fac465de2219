//! Lines against a size on a log axis: a ratio per copy path, with reference
//! levels (parity, targets) drawn across, each named at its right end.

use plotters::prelude::*;

use super::axis::{self, Axis};
use super::{colour, FONT, WIDTH};

/// One line: points (x, y), drawn in x order.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// In the legend.
    pub name: String,
    /// Positive x and y.
    pub points: Vec<(f64, f64)>,
}

/// A level drawn across the chart, up to `until` on the x axis when given.
#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    /// The y value.
    pub y: f64,
    /// Written at the level's right end.
    pub label: String,
    /// Dashed (a target) or solid (parity).
    pub dashed: bool,
    /// The level applies up to this x.
    pub until: Option<f64>,
}

impl Level {
    /// A solid level across the chart (parity).
    pub fn solid(y: f64, label: &str) -> Level {
        Level {
            y,
            label: label.into(),
            dashed: false,
            until: None,
        }
    }

    /// A dashed level (a target), across the chart or up to `until`.
    pub fn target(y: f64, label: &str, until: Option<f64>) -> Level {
        Level {
            dashed: true,
            until,
            ..Level::solid(y, label)
        }
    }
}

/// What the chart shows.
pub struct Spec<'a> {
    /// Above the chart.
    pub title: &'a str,
    /// Under the x axis.
    pub x_desc: &'a str,
    /// Beside the y axis.
    pub y_desc: &'a str,
    /// An x tick's label (a size: `4 KiB`).
    pub x_label: &'a dyn Fn(f64) -> String,
}

const HEIGHT: u32 = 620;
const LEGEND_PX: u32 = 270;

/// Draws `lines` and `levels` as SVG text: x on a log axis with a tick at each
/// x of the data, y on a log axis fitted to the data and the levels.
pub fn svg(spec: &Spec, lines: &[Line], levels: &[Level]) -> Result<String, String> {
    let xs: Vec<f64> = {
        let mut xs: Vec<f64> = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .filter(|x| *x > 0.0)
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        xs
    };
    if xs.is_empty() {
        return Err("nothing to draw".into());
    }
    let ys = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(levels.iter().map(|l| l.y));
    // Ratios are drawn on a log axis whatever their spread: 0.5x and 2x lie
    // as far from parity.
    let (lo, hi) = ys.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        if v > 0.0 {
            (lo.min(v), hi.max(v))
        } else {
            (lo, hi)
        }
    });
    if hi <= 0.0 {
        return Err("nothing to draw: no positive value".into());
    }
    let y = Axis::log(lo / 1.15, hi * 1.15);
    let y = with_levels(y, levels);
    let (x_lo, x_hi) = (xs[0] / 1.5, xs[xs.len() - 1] * 1.5);
    // At most 12 size ticks: every n-th size of the data.
    let every = xs.len().div_ceil(12);
    let x_ticks: Vec<f64> = xs.iter().step_by(every).map(|x| x.log10()).collect();
    let mut text = String::new();
    {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let root = SVGBackend::with_string(&mut text, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        root.draw(&Text::new(
            spec.title.to_owned(),
            (12, 10),
            (FONT, 17).into_font().style(FontStyle::Bold),
        ))
        .map_err(|e| err(&e))?;
        let (_, body) = root.split_vertically(36);
        let (plot, side) = body.split_horizontally(WIDTH - LEGEND_PX);
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(
                axis::Ticked::new(x_lo.log10()..x_hi.log10(), x_ticks),
                y.coord(),
            )
            .map_err(|e| err(&e))?;
        let yt = y.clone();
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.12))
            .x_desc(spec.x_desc)
            .y_desc(spec.y_desc)
            .x_label_formatter(&|p| {
                // The size of the data at that tick, not 10^log10 of it.
                let x = xs.iter().copied().find(|x| (x.log10() - p).abs() < 1e-9);
                (spec.x_label)(x.unwrap_or(10f64.powf(*p)))
            })
            .y_label_formatter(&|p| axis::label(yt.value(*p)))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(|e| err(&e))?;
        let right = x_hi.log10();
        for level in levels {
            let end = level.until.map_or(right, |u| (u * 1.2).log10().min(right));
            let at = y.pos(level.y);
            let pts = [(x_lo.log10(), at), (end, at)];
            let style = ShapeStyle::from(&BLACK.mix(0.7)).stroke_width(1);
            if level.dashed {
                chart
                    .draw_series(DashedLineSeries::new(pts, 6, 4, style))
                    .map_err(|e| err(&e))?;
            } else {
                chart
                    .draw_series(LineSeries::new(pts, style))
                    .map_err(|e| err(&e))?;
            }
        }
        for (k, line) in lines.iter().enumerate() {
            let mut pts: Vec<(f64, f64)> = line
                .points
                .iter()
                .filter(|p| p.0 > 0.0 && p.1 > 0.0)
                .map(|p| (p.0.log10(), y.pos(p.1)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = colour(k);
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(|e| err(&e))?;
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))
                .map_err(|e| err(&e))?;
        }
        let entries: Vec<Vec<(String, Option<RGBColor>)>> = lines
            .iter()
            .enumerate()
            .map(|(k, l)| vec![(l.name.clone(), Some(colour(k)))])
            .collect();
        super::draw_legend(&side, &entries, 18).map_err(|e| err(&e))?;
        // The levels below the lines' entries, each with its line's look.
        for (i, level) in levels.iter().enumerate() {
            let y = 18 + 20 * (lines.len() + 1 + i) as i32 + 6;
            let style = ShapeStyle::from(&BLACK.mix(0.7)).stroke_width(1);
            let dashes: &[(i32, i32)] = if level.dashed {
                &[(14, 18), (22, 26)]
            } else {
                &[(14, 26)]
            };
            for (a, b) in dashes {
                side.draw(&PathElement::new(vec![(*a, y), (*b, y)], style))
                    .map_err(|e| err(&e))?;
            }
            side.draw(&Text::new(level.label.clone(), (34, y - 6), (FONT, 13)))
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(text)
}

/// `y` with each level's value among its ticks (and within its range).
fn with_levels(mut y: Axis, levels: &[Level]) -> Axis {
    for l in levels {
        if l.y > 0.0 && !y.ticks.iter().any(|t| (t / l.y - 1.0).abs() < 0.03) {
            y.ticks.push(l.y);
        }
    }
    y.ticks.sort_by(f64::total_cmp);
    // Ticks closer than a twentieth of the axis to a level's tick give way to it.
    let span = y.pos(y.hi) - y.pos(y.lo);
    let levels: Vec<f64> = levels.iter().map(|l| y.pos(l.y)).collect();
    let pos = |v: f64| if y.log { v.log10() } else { v };
    y.ticks.retain(|t| {
        let p = pos(*t);
        levels.iter().any(|l| (l - p).abs() < 1e-9)
            || levels.iter().all(|l| (l - p).abs() > span / 20.0)
    });
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ratio_chart_has_a_tick_per_size_and_its_levels() {
        let lines = [
            Line {
                name: "readback".into(),
                points: vec![
                    (4096.0, 0.66),
                    (1048576.0, 0.83),
                    ((1u64 << 30) as f64, 0.95),
                ],
            },
            Line {
                name: "upload".into(),
                points: vec![(4096.0, 15.6), (1048576.0, 0.84)],
            },
        ];
        let levels = [
            Level::solid(1.0, "parity"),
            Level::target(0.9, "target 0.9x", None),
        ];
        let spec = Spec {
            title: "ratio",
            x_desc: "bytes",
            y_desc: "CUDA / vkcopy",
            x_label: &|x| format!("{}K", x as u64 / 1024),
        };
        let svg = svg(&spec, &lines, &levels).unwrap();
        let texts = super::super::texts(&svg);
        for t in [
            "4K",
            "1024K",
            "1048576K",
            "0.9",
            "1",
            "parity",
            "target 0.9x",
            "upload",
        ] {
            assert!(texts.iter().any(|x| x == t), "{t} in {texts:?}");
        }
    }
}
