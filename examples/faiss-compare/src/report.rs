//! The side-by-side: FAISS's rows joined with ours, one line per comparison with the ratio
//! (FAISS's time over ours: above 1 we are faster), as Markdown, CSV and an SVG of the
//! ratios.

use lookahead_bench::plot::{Bar, BarChart, BarSeries, Rgb};
use lookahead_bench::table::{Align, Table};

use crate::rows::Row;

/// One comparison: a FAISS row and the matching row of ours.
pub struct Pair<'a> {
    /// What is compared, e.g. `latency p50, 16 queries, graph`.
    pub what: String,
    /// FAISS's row.
    pub faiss: &'a Row,
    /// Ours.
    pub ours: &'a Row,
    /// FAISS's time over ours, at the median (above 1: ours is faster).
    pub speedup: f64,
}

fn find<'a>(
    rows: &'a [Row],
    system: &str,
    measure: &str,
    variant: &str,
    queries: Option<u64>,
) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.system == system
            && r.measure == measure
            && r.variant == variant
            && queries.is_none_or(|q| r.queries == q)
    })
}

fn pair<'a>(what: String, faiss: &'a Row, ours: &'a Row) -> Pair<'a> {
    let speedup = if ours.median_s() > 0.0 {
        faiss.median_s() / ours.median_s()
    } else {
        0.0
    };
    Pair {
        what,
        faiss,
        ours,
        speedup,
    }
}

/// Every comparison the two row sets allow, in the table's order: build, latency (each of
/// our two ways of submitting against FAISS's search), throughput, cold and warm (each of
/// our policies against FAISS's Unified Memory mode).
pub fn pairs<'a>(faiss: &'a [Row], ours: &'a [Row]) -> Vec<Pair<'a>> {
    let mut out = Vec::new();
    for variant in ["own_train", "own_train_add"] {
        if let (Some(f), Some(o)) = (
            find(faiss, "faiss", "build", variant, None),
            find(ours, "lookahead", "build", variant, None),
        ) {
            out.push(pair(
                format!("build: {}", variant.replace('_', " ").replace("own ", "")),
                f,
                o,
            ));
        }
    }
    for f in faiss.iter().filter(|r| r.measure == "latency") {
        for way in ["graph", "launched"] {
            if let Some(o) = find(ours, "lookahead", "latency", way, Some(f.queries)) {
                out.push(pair(
                    format!("latency, {} queries, ours {way}", f.queries),
                    f,
                    o,
                ));
            }
        }
    }
    for f in faiss.iter().filter(|r| r.measure == "throughput") {
        if let Some(o) = find(ours, "lookahead", "throughput", "resident", Some(f.queries)) {
            out.push(pair(format!("throughput, {} queries", f.queries), f, o));
        }
    }
    for f in faiss.iter().filter(|r| r.measure.starts_with("unified_")) {
        let prefix = format!("{}:", f.variant);
        for o in ours
            .iter()
            .filter(|o| o.measure == f.measure && o.variant.starts_with(&prefix))
        {
            let policy = &o.variant[prefix.len()..];
            let temp = f.measure.trim_start_matches("unified_");
            out.push(pair(
                format!("{temp} {}, {} queries, ours {policy}", f.variant, f.queries),
                f,
                o,
            ));
        }
    }
    out
}

fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn recall(r: &Row) -> String {
    if r.recall10 > 0.0 {
        format!("{:.4}", r.recall10)
    } else {
        "-".into()
    }
}

/// The comparison table: times in ms (p50 and p99 where a row has them), queries per
/// second, recall, and the ratio.
pub fn table(pairs: &[Pair]) -> Table {
    let mut t = Table::new([
        "comparison",
        "FAISS p50 ms",
        "FAISS p99 ms",
        "ours p50 ms",
        "ours p99 ms",
        "FAISS q/s",
        "ours q/s",
        "recall FAISS / ours",
        "FAISS / ours",
    ]);
    for c in 1..9 {
        t = t.align(c, Align::Right);
    }
    for p in pairs {
        let latency = p.faiss.p99_ms > 0.0;
        t.push([
            p.what.clone(),
            ms(p.faiss.median_s() * 1e3),
            if latency {
                ms(p.faiss.p99_ms)
            } else {
                "-".into()
            },
            ms(p.ours.median_s() * 1e3),
            if latency {
                ms(p.ours.p99_ms)
            } else {
                "-".into()
            },
            if p.faiss.qps > 0.0 {
                format!("{:.0}", p.faiss.qps)
            } else {
                "-".into()
            },
            if p.ours.qps > 0.0 {
                format!("{:.0}", p.ours.qps)
            } else {
                "-".into()
            },
            format!("{} / {}", recall(p.faiss), recall(p.ours)),
            format!("{:.2}x", p.speedup),
        ]);
    }
    t
}

/// The ratios as bars (log-free: ratios above the chart's top are clipped to it, with the
/// value in the label).
pub fn chart(pairs: &[Pair]) -> BarChart {
    let y_max = pairs
        .iter()
        .map(|p| p.speedup)
        .fold(1.0, f64::max)
        .min(20.0)
        * 1.1;
    BarChart {
        title: "FAISS GPU's time over Lookahead's, same data (above 1: Lookahead faster)".into(),
        y_desc: "FAISS / Lookahead".into(),
        categories: pairs
            .iter()
            .map(|p| format!("{} ({:.2}x)", p.what, p.speedup))
            .collect(),
        series: vec![BarSeries {
            label: "ratio at the median".into(),
            color: Rgb(31, 119, 180),
            bars: pairs
                .iter()
                .map(|p| {
                    let v = p.speedup.min(y_max);
                    Bar {
                        value: v,
                        low: v,
                        high: v,
                    }
                })
                .collect(),
        }],
        y_max,
        reference: Some(1.0),
        size: (1400, 900),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(system: &str, measure: &str, variant: &str, queries: u64, secs: f64) -> Row {
        Row {
            system: system.into(),
            measure: measure.into(),
            variant: variant.into(),
            queries,
            p50_ms: secs * 1e3,
            p99_ms: secs * 1.1e3,
            qps: queries as f64 / secs,
            recall10: 0.0,
            seconds: secs,
        }
    }

    #[test]
    fn rows_pair_by_measure_variant_and_queries_with_faiss_over_ours() {
        let mut faiss = vec![
            r("faiss", "latency", "resident", 16, 0.2),
            r("faiss", "latency", "resident", 64, 0.3),
            r("faiss", "unified_cold", "cold6", 64, 0.03),
            r("faiss", "build", "own_train_add", 100, 2.0),
        ];
        // FAISS's side writes a latency row's p50 and no seconds.
        faiss[0].seconds = 0.0;
        let ours = vec![
            r("lookahead", "latency", "graph", 16, 0.1),
            r("lookahead", "latency", "launched", 16, 0.05),
            r("lookahead", "latency", "graph", 64, 0.6),
            r("lookahead", "unified_cold", "cold6:gpu-pull", 64, 0.01),
            r("lookahead", "unified_cold", "cold25:gpu-pull", 256, 0.01),
            r("lookahead", "build", "own_train_add", 100, 4.0),
        ];
        let p = pairs(&faiss, &ours);
        let got: Vec<(String, f64)> = p.iter().map(|p| (p.what.clone(), p.speedup)).collect();
        let want = [
            ("build: train add", 0.5),
            ("latency, 16 queries, ours graph", 2.0),
            ("latency, 16 queries, ours launched", 4.0),
            ("latency, 64 queries, ours graph", 0.5),
            ("cold cold6, 64 queries, ours gpu-pull", 3.0),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((w, x), (g, y)) in want.iter().zip(&got) {
            assert_eq!(w, g);
            assert!((x - y).abs() < 1e-9, "{g}: {y} != {x}");
        }
        let md = table(&p).to_markdown();
        assert_eq!(md.lines().count(), 2 + want.len());
        assert!(
            md.contains("| latency, 16 queries, ours graph | 200 |"),
            "{md}"
        );
    }
}
