//! Charts a reader reads at a glance, drawn with plotters as SVG and
//! rasterised to PNG beside it (so that no browser is needed): grouped bars
//! ([`bars`]) and lines against a size ([`lines`]), on axes fitted to the data
//! ([`axis`]).

pub mod axis;
pub mod bars;
pub mod lines;
pub mod png;

use plotters::prelude::*;

/// Every chart's width in pixels.
pub const WIDTH: u32 = 1100;

/// The font family of all text; the PNG maps it to a system font.
pub const FONT: &str = "sans-serif";

/// A run (or a tool) in a chart: its colour is its place in the list.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// In the legend; empty for a lone run, which needs no legend.
    pub name: String,
}

/// The `k`-th series' colour (Tableau's ten, which print and project apart).
pub fn colour(k: usize) -> RGBColor {
    const TEN: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    TEN[k % TEN.len()]
}

/// Draws legend lines from `top`: a colour square (none for a note) and a name
/// per entry, left to right.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    lines: &[Vec<(String, Option<RGBColor>)>],
    top: i32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    for (i, line) in lines.iter().enumerate() {
        let y = top + 20 * i as i32;
        let mut x = 14;
        for (name, c) in line {
            if let Some(c) = c {
                area.draw(&Rectangle::new([(x, y), (x + 14, y + 12)], c.filled()))?;
                x += 20;
            }
            area.draw(&Text::new(name.clone(), (x, y), (FONT, 13)))?;
            x += 16 + (name.chars().count() as f64 * 6.6) as i32;
        }
    }
    Ok(())
}

/// The texts of an SVG that plotters drew, in order (for tests).
#[cfg(test)]
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            Some(
                t.split_once('>')?
                    .1
                    .split_once("</text>")?
                    .0
                    .trim()
                    .to_owned(),
            )
        })
        .collect()
}
