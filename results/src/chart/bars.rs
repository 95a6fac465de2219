//! Horizontal bars grouped by what was measured (a copy path and size), one
//! bar per run in the group, one colour per run, each bar with its figure at
//! its end; panels one above the other, each with its own fitted axis.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{self, Axis};
use super::{colour, Series, FONT, WIDTH};

/// One measured figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// The bar's length.
    pub best: f64,
    /// Drawn as a dot, when given.
    pub median: Option<f64>,
    /// Written at the bar's end.
    pub text: String,
}

/// The bars of one thing measured: a value per series, `None` where that run
/// did not measure it.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Beside the group, left of the axis.
    pub label: String,
    /// One per series, in the series' order.
    pub values: Vec<Option<Value>>,
}

/// A panel of groups on one axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// Under the axis: the unit and what the bars are.
    pub axis: String,
    /// Top to bottom.
    pub groups: Vec<Group>,
}

const BAR: u32 = 15;
const GAP: u32 = 9;
const PANEL_EXTRA: u32 = 64;
const LEGEND_LINE: u32 = 20;
const CHAR_PX: f64 = 6.6;

/// Draws the panels under `title` as SVG text. Series are named in a legend
/// above the panels (none for one unnamed series); a median dot is explained
/// there when any value has one.
pub fn svg(title: &str, series: &[Series], panels: &[Panel]) -> Result<String, String> {
    let panels: Vec<&Panel> = panels.iter().filter(|p| !p.groups.is_empty()).collect();
    if panels.is_empty() {
        return Err("nothing to draw".into());
    }
    // Only the series a panel has values of get a bar row in it.
    let rows = |p: &Panel| -> Vec<usize> {
        (0..series.len())
            .filter(|&k| {
                p.groups
                    .iter()
                    .any(|g| g.values.get(k).is_some_and(Option::is_some))
            })
            .collect()
    };
    let heights: Vec<u32> = panels
        .iter()
        .map(|p| {
            let n = rows(p).len().max(1) as u32;
            PANEL_EXTRA + p.groups.len() as u32 * (n * BAR + GAP)
        })
        .collect();
    let medians = panels
        .iter()
        .flat_map(|p| &p.groups)
        .flat_map(|g| &g.values)
        .any(|v| v.as_ref().is_some_and(|v| v.median.is_some()));
    let legend = legend_entries(series, medians);
    let legend_lines = legend_layout(&legend).len() as u32;
    let top = 34 + legend_lines * LEGEND_LINE;
    let height = top + heights.iter().sum::<u32>() + 10;
    let label_chars = panels
        .iter()
        .flat_map(|p| &p.groups)
        .map(|g| g.label.chars().count())
        .max()
        .unwrap_or(10);
    let label_px = ((label_chars as f64 * CHAR_PX) as u32 + 16).clamp(120, WIDTH / 2);
    let mut text = String::new();
    {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let root = SVGBackend::with_string(&mut text, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        root.draw(&Text::new(
            title.to_owned(),
            (12, 10),
            (FONT, 17).into_font().style(FontStyle::Bold),
        ))
        .map_err(|e| err(&e))?;
        super::draw_legend(&root, &legend_layout(&legend), 36).map_err(|e| err(&e))?;
        let (_, mut rest) = root.split_vertically(top);
        for (p, h) in panels.iter().zip(&heights) {
            let (area, below) = rest.split_vertically(*h);
            panel(&area, p, &rows(p), label_px).map_err(|e| err(&e))?;
            rest = below;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(text)
}

/// The legend's entries: a colour per named series, then what a dot is.
fn legend_entries(series: &[Series], medians: bool) -> Vec<(String, Option<RGBColor>)> {
    let mut out: Vec<(String, Option<RGBColor>)> = series
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.name.is_empty())
        .map(|(k, s)| (s.name.clone(), Some(colour(k))))
        .collect();
    if medians {
        out.push(("bar and figure: best run; dot: median run".into(), None));
    }
    out
}

/// Legend entries in lines that fit the width.
fn legend_layout(entries: &[(String, Option<RGBColor>)]) -> Vec<Vec<(String, Option<RGBColor>)>> {
    let mut lines: Vec<Vec<(String, Option<RGBColor>)>> = Vec::new();
    let mut used = f64::MAX;
    for e in entries {
        let w = 30.0 + e.0.chars().count() as f64 * CHAR_PX;
        if used + w > f64::from(WIDTH) - 24.0 {
            lines.push(Vec::new());
            used = 0.0;
        }
        used += w;
        if let Some(line) = lines.last_mut() {
            line.push(e.clone());
        }
    }
    lines
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    p: &Panel,
    rows: &[usize],
    label_px: u32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let n = rows.len().max(1);
    let values = p
        .groups
        .iter()
        .flat_map(|g| g.values.iter().flatten())
        .flat_map(|v| std::iter::once(v.best).chain(v.median));
    let text_chars = p
        .groups
        .iter()
        .flat_map(|g| g.values.iter().flatten())
        .map(|v| v.text.chars().count())
        .max()
        .unwrap_or(4);
    let plot_px = f64::from(WIDTH.saturating_sub(label_px + 40).max(100));
    let room = ((text_chars as f64 + 2.0) * CHAR_PX / plot_px).min(0.5);
    let x = Axis::fit(values, room);
    // Rows from the top: group g's series row r spans [top - 1, top).
    let per = n as f64 + GAP as f64 / BAR as f64;
    let total = p.groups.len() as f64 * per;
    let row_top = |g: usize, r: usize| total - g as f64 * per - r as f64;
    let centers: Vec<f64> = (0..p.groups.len())
        .map(|g| row_top(g, 0) - n as f64 / 2.0)
        .collect();
    let mut chart = ChartBuilder::on(area)
        .margin_left(8)
        .margin_right(24)
        .margin_top(8)
        .x_label_area_size(44)
        .y_label_area_size(label_px)
        .build_cartesian_2d(x.coord(), axis::Ticked::new(0.0..total, centers.clone()))?;
    let ticks = x.clone();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(BLACK.mix(0.12))
        .x_desc(p.axis.as_str())
        .x_label_formatter(&|pos| axis::label(ticks.value(*pos)))
        .y_label_formatter(&|pos| {
            centers
                .iter()
                .position(|c| (c - pos).abs() < 1e-6)
                .map(|g| p.groups[g].label.clone())
                .unwrap_or_default()
        })
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .draw()?;
    let start = x.pos(x.lo);
    let figure = TextStyle::from((FONT, 11).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (g, group) in p.groups.iter().enumerate() {
        for (r, &k) in rows.iter().enumerate() {
            let Some(Some(v)) = group.values.get(k) else {
                continue;
            };
            let (hi, lo) = (row_top(g, r) - 0.08, row_top(g, r) - 0.92);
            let end = x.pos(v.best);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(start, lo), (end, hi)],
                colour(k).mix(0.85).filled(),
            )))?;
            let mut last = end;
            if let Some(m) = v.median {
                let at = x.pos(m);
                last = last.max(at);
                // A median past the bar hangs from it, so that the figure
                // written after the dot still reads as the bar's.
                if at > end {
                    let y = (hi + lo) / 2.0;
                    chart.draw_series(std::iter::once(PathElement::new(
                        [(end, y), (at, y)],
                        BLACK.mix(0.5),
                    )))?;
                }
                chart.draw_series(std::iter::once(Circle::new(
                    (at, (hi + lo) / 2.0),
                    3,
                    BLACK.filled(),
                )))?;
            }
            // Leading spaces collapse in SVG: the figure is set off in pixels.
            chart.draw_series(std::iter::once(
                EmptyElement::at((last, (hi + lo) / 2.0))
                    + Text::new(v.text.clone(), (7, 0), figure.clone()),
            ))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(label: &str, values: &[Option<f64>]) -> Group {
        Group {
            label: label.into(),
            values: values
                .iter()
                .map(|v| {
                    v.map(|best| Value {
                        best,
                        median: Some(best * 0.9),
                        text: format!("{best:.2} GB/s"),
                    })
                })
                .collect(),
        }
    }

    #[test]
    fn bars_are_grouped_with_a_colour_per_run_and_no_empty_row() {
        let series = [
            Series {
                name: "run A".into(),
            },
            Series {
                name: "run B".into(),
            },
        ];
        let panels = [Panel {
            axis: "GB/s".into(),
            groups: vec![
                group("readback 64 MiB", &[Some(9.4), Some(5.8)]),
                group("upload 64 MiB", &[Some(7.1), None]),
            ],
        }];
        let svg = svg("t", &series, &panels).unwrap();
        // Three bars: two runs of the readback, one of the upload.
        let fill = |k: usize| {
            let RGBColor(r, g, b) = colour(k);
            format!("fill=\"#{r:02X}{g:02X}{b:02X}\"")
        };
        assert_eq!(svg.matches(&fill(0)).count(), 2 + 1, "{svg}");
        assert_eq!(svg.matches(&fill(1)).count(), 1 + 1);
        let texts = super::super::texts(&svg);
        for t in [
            "9.40 GB/s",
            "5.80 GB/s",
            "7.10 GB/s",
            "readback 64 MiB",
            "run B",
        ] {
            assert!(texts.iter().any(|x| x == t), "{t} in {texts:?}");
        }
        // Ticks fitted to 5.8-9.4: a linear axis from 0 in steps of 2.
        let ticks: Vec<&str> = texts
            .iter()
            .map(String::as_str)
            .filter(|t| t.parse::<f64>().is_ok())
            .collect();
        assert_eq!(ticks, ["0", "2", "4", "6", "8", "10", "12"]);
        assert!(texts.iter().any(|t| t.contains("dot: median")));
    }

    #[test]
    fn nothing_to_draw_is_an_error() {
        let e = svg(
            "t",
            &[],
            &[Panel {
                axis: "x".into(),
                groups: vec![],
            }],
        )
        .unwrap_err();
        assert_eq!(e, "nothing to draw");
    }
}
