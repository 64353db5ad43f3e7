//! SVG plots through `plotters`: grouped bars with whiskers ([`BarChart`]) and lines over
//! a logarithmic x axis ([`LineChart`]). Both render to a string, to be written with
//! [`OutDir::write`](crate::output::OutDir::write).

use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};

/// A colour, red, green and blue from 0 to 255.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl From<Rgb> for RGBColor {
    fn from(c: Rgb) -> RGBColor {
        RGBColor(c.0, c.1, c.2)
    }
}

/// One bar: its height and a whisker from `low` to `high`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    /// Height of the bar.
    pub value: f64,
    /// Bottom of the whisker.
    pub low: f64,
    /// Top of the whisker (drawn up to the chart's top at most).
    pub high: f64,
}

/// One series of bars, one bar per category.
#[derive(Debug, Clone, PartialEq)]
pub struct BarSeries {
    /// The legend's text.
    pub label: String,
    /// Fill colour.
    pub color: Rgb,
    /// The bars, in the order of [`BarChart::categories`].
    pub bars: Vec<Bar>,
}

/// Bars of several series side by side over named categories, labels written vertically,
/// with an optional horizontal reference line and the legend at the upper left.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// Caption.
    pub title: String,
    /// The y axis' description.
    pub y_desc: String,
    /// The x axis' labels, one per group of bars.
    pub categories: Vec<String>,
    /// The series; each has one bar per category.
    pub series: Vec<BarSeries>,
    /// Top of the y axis (its bottom is 0).
    pub y_max: f64,
    /// A horizontal line across the chart at this height.
    pub reference: Option<f64>,
    /// Width and height in pixels.
    pub size: (u32, u32),
}

/// One line of a [`LineChart`]: points joined in order, each marked with a dot.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The legend's text.
    pub label: String,
    /// `(x, y)` points; a series without points is left out (its colour stays reserved).
    pub points: Vec<(f64, f64)>,
}

/// Lines over a logarithmic x axis, coloured from `plotters`' 99-colour palette by their
/// position in [`LineChart::series`], with labelled horizontal reference lines.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// Caption.
    pub title: String,
    /// The x axis' description.
    pub x_desc: String,
    /// The y axis' description.
    pub y_desc: String,
    /// The x axis' range (logarithmic: both ends above 0).
    pub x_range: Range<f64>,
    /// The y axis' range.
    pub y_range: Range<f64>,
    /// Horizontal black lines, each `(legend text, height)`.
    pub references: Vec<(String, f64)>,
    /// The lines.
    pub series: Vec<Line>,
    /// Width and height in pixels.
    pub size: (u32, u32),
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// Draws with `draw` on a white SVG canvas of `size` and returns the SVG text; any drawing
/// error becomes [`Error::Plot`] naming `title`.
fn render(
    title: &str,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> DrawResult,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let drawn = root
            .fill(&WHITE)
            .map_err(Into::into)
            .and_then(|_| draw(&root))
            .and_then(|_| root.present().map_err(Into::into));
        drawn.map_err(|e| Error::Plot {
            title: title.to_string(),
            reason: e.to_string(),
        })?;
    }
    Ok(svg)
}

/// The caption and margin every chart has.
fn builder<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    margin: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 18)).margin(margin);
    b
}

/// The legend, boxed in black on a translucent white background.
fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

impl BarChart {
    /// The chart as SVG text.
    pub fn to_svg(&self) -> Result<String> {
        render(&self.title, self.size, |root| self.draw(root))
    }

    fn draw(&self, root: &DrawingArea<SVGBackend, Shift>) -> DrawResult {
        let n = self.categories.len();
        let mut chart = builder(root, &self.title, 10)
            .x_label_area_size(170)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..self.y_max)?;
        let label = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                self.categories[i as usize].clone()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&label)
            .x_label_style(
                ("sans-serif", 11)
                    .into_font()
                    .transform(FontTransform::Rotate90),
            )
            .y_desc(self.y_desc.as_str())
            .draw()?;
        // The series share each category's 0.8 of width.
        let width = 0.8 / self.series.len().max(1) as f64;
        for (k, s) in self.series.iter().enumerate() {
            let color = RGBColor::from(s.color);
            let left = |i: usize| i as f64 - 0.4 + width * k as f64;
            let bars = s.bars.iter().enumerate().map(|(i, b)| {
                Rectangle::new([(left(i), 0.0), (left(i) + width, b.value)], color.filled())
            });
            chart
                .draw_series(bars)?
                .label(s.label.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
            let whiskers = s.bars.iter().enumerate().map(|(i, b)| {
                let x = left(i) + width / 2.0;
                PathElement::new(vec![(x, b.low), (x, b.high.min(self.y_max))], BLACK)
            });
            chart.draw_series(whiskers)?;
        }
        if let Some(y) = self.reference {
            let line = PathElement::new(vec![(-0.5, y), (n as f64 - 0.5, y)], BLACK.mix(0.5));
            chart.draw_series(std::iter::once(line))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}

impl LineChart {
    /// The chart as SVG text.
    pub fn to_svg(&self) -> Result<String> {
        render(&self.title, self.size, |root| self.draw(root))
    }

    fn draw(&self, root: &DrawingArea<SVGBackend, Shift>) -> DrawResult {
        let (x, y) = (self.x_range.clone(), self.y_range.clone());
        let mut chart = builder(root, &self.title, 12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x.clone().log_scale(), y)?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc.as_str())
            .y_desc(self.y_desc.as_str())
            .draw()?;
        for (label, y) in &self.references {
            let line = LineSeries::new([(x.start, *y), (x.end, *y)], BLACK.stroke_width(1));
            chart
                .draw_series(line)?
                .label(label.as_str())
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK));
        }
        for (i, s) in self.series.iter().enumerate() {
            if s.points.is_empty() {
                continue;
            }
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))?
                .label(s.label.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
            chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
        legend(&mut chart, SeriesLabelPosition::MiddleRight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_render_with_labels_and_legend() {
        let bar = |v: f64| Bar {
            value: v,
            low: v * 0.9,
            high: v * 1.1,
        };
        let chart = BarChart {
            title: "time over baseline".into(),
            y_desc: "time / baseline".into(),
            categories: vec!["saxpy none".into(), "saxpy l2_d4".into()],
            series: vec![
                BarSeries {
                    label: "Rust".into(),
                    color: Rgb(222, 110, 40),
                    bars: vec![bar(1.0), bar(1.1)],
                },
                BarSeries {
                    label: "CUDA".into(),
                    color: Rgb(60, 120, 200),
                    bars: vec![bar(1.0), bar(9.0)],
                },
            ],
            y_max: 2.0,
            reference: Some(1.0),
            size: (800, 600),
        };
        let svg = chart.to_svg().unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("saxpy l2_d4") && svg.contains("CUDA"));
    }

    #[test]
    fn lines_render_and_skip_empty_series() {
        let chart = LineChart {
            title: "cold GB/s".into(),
            x_desc: "probed %".into(),
            y_desc: "GB/s".into(),
            x_range: 0.8..120.0,
            y_range: 0.0..60.0,
            references: vec![("pinned 50.0 GB/s".into(), 50.0)],
            series: vec![
                Line {
                    label: "faults".into(),
                    points: vec![(1.0, 5.0), (100.0, 20.0)],
                },
                Line {
                    label: "unused".into(),
                    points: vec![],
                },
            ],
            size: (900, 560),
        };
        let svg = chart.to_svg().unwrap();
        assert!(svg.contains("faults") && svg.contains("pinned 50.0 GB/s"));
        assert!(!svg.contains("unused"));
    }

    #[test]
    fn drawing_errors_name_the_plot() {
        let e = render("cold GB/s", (10, 10), |_| Err("no room".into())).unwrap_err();
        assert_eq!(e.to_string(), "plotting \"cold GB/s\": no room");
    }
}
