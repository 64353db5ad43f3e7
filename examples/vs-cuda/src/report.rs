//! The results: rows, the Markdown table, the CSV and the plot, written through
//! `lookahead-bench`.

use lookahead::launch::autotune::Variant;
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::plot::{Bar, BarChart, BarSeries, Rgb};
use lookahead_bench::stats::{gb_per_s, median_range, quantile, Summary};
use lookahead_bench::table::Table;
use vs_cuda_kernels::is_macro_variant;

use crate::Res;

/// Timing summary of one variant in one language (milliseconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub summary: Summary,
    pub p25: f64,
    pub p75: f64,
}

impl Timing {
    /// The summary of some launch times; `None` when there are none.
    pub fn of(ms: &[f64]) -> Option<Timing> {
        Some(Timing {
            summary: Summary::of(ms)?,
            p25: quantile(ms, 0.25)?,
            p75: quantile(ms, 0.75)?,
        })
    }

    pub fn median(&self) -> f64 {
        self.summary.median
    }
}

/// One row of the results.
pub struct Row {
    pub kernel: &'static str,
    pub variant: &'static str,
    pub bytes: f64,
    pub rust: Timing,
    pub cuda: Timing,
    pub regs: (i32, i32),
    pub check: (String, String),
    pub ok: bool,
    /// For `m_auto`: what each language settled on.
    pub auto: Option<AutoRow>,
}

/// How a `level = auto` variant settled.
#[derive(Clone, Copy)]
pub struct AutoRow {
    pub rust: Variant,
    pub cuda: Variant,
    /// Launches (all real, on the benchmark's inputs) before the choice was made.
    pub rust_launches: usize,
    pub cuda_launches: usize,
    /// Median milliseconds of (plain, `l2`) the choice was made from.
    pub rust_medians: [Option<f32>; 2],
    pub cuda_medians: [Option<f32>; 2],
}

impl Row {
    /// `hand` or `#[prefetch_next]`.
    pub fn written(&self) -> &'static str {
        if is_macro_variant(self.variant) {
            "#[prefetch_next]"
        } else {
            "hand"
        }
    }

    /// The variant, with what `m_auto` settled on.
    pub fn label(&self) -> String {
        match &self.auto {
            Some(a) if a.rust == a.cuda => format!("{} -> {}", self.variant, a.rust),
            Some(a) => format!("{} -> Rust {}, CUDA {}", self.variant, a.rust, a.cuda),
            None => self.variant.to_string(),
        }
    }

    /// The no-hint row this row is compared with: `none` for hand-written variants,
    /// `m_none` for the macro's.
    fn base_variant(&self) -> &'static str {
        if is_macro_variant(self.variant) {
            "m_none"
        } else {
            "none"
        }
    }
}

/// What the results were measured on and with.
#[derive(Clone)]
pub struct Meta {
    pub header: RunHeader,
    pub rust_ptx: String,
    pub cuda_ptx: String,
    pub nvrtc: String,
    pub seed: u64,
    pub reps: usize,
    pub warmup: usize,
}

impl Meta {
    /// The device, as the header describes it.
    pub(crate) fn device(&self) -> String {
        self.header
            .device
            .as_ref()
            .map_or_else(|| "unknown device".into(), |d| d.describe())
    }

    /// The driver, as the header describes it.
    pub(crate) fn driver(&self) -> String {
        self.header
            .device
            .as_ref()
            .map_or_else(|| "unknown driver".into(), |d| d.driver())
    }
}

/// The no-hint row `r` is compared with (`none` or `m_none` of the same kernel).
fn base_row<'a>(rows: &'a [Row], r: &'a Row) -> &'a Row {
    rows.iter()
        .find(|b| b.kernel == r.kernel && b.variant == r.base_variant())
        .unwrap_or(r)
}

/// The run header, the table of every row and the `level = auto` notes.
pub fn table(meta: &Meta, rows: &[Row]) -> String {
    let mut t = meta.header.markdown();
    t += &format!("- Rust: {}\n- CUDA C++: {}\n", meta.rust_ptx, meta.cuda_ptx);
    t += &format!(
        "- median of {} event-timed launches after {} warm-up launches, [min, max]; seed {}\n\n",
        meta.reps, meta.warmup, meta.seed
    );
    t += "Rows written `hand` are the hand-written kernels (raw pointers); rows written \
          `#[prefetch_next]` (`m_*`) are `#[kernel]`s over slices whose hint the macro \
          generated, compared with their own `m_none`. `m_auto -> X` is `level = auto`: the \
          variant its launcher settled on by measurement.\n\n";
    t += &results_table(rows).to_markdown();
    t += &auto_notes(rows);
    t
}

fn results_table(rows: &[Row]) -> Table {
    let mut table = Table::new([
        "kernel",
        "written",
        "variant",
        "Rust ms [min, max]",
        "CUDA ms [min, max]",
        "Rust / CUDA",
        "Rust vs none",
        "CUDA vs none",
        "Rust GB/s",
        "regs Rust/CUDA",
        "checks",
    ]);
    let pct = |x: f64, b: f64| format!("{:+.1}%", (x / b - 1.0) * 100.0);
    for r in rows {
        let base = base_row(rows, r);
        table.push([
            r.kernel.to_string(),
            r.written().to_string(),
            r.label(),
            median_range(&r.rust.summary, 1.0, 4),
            median_range(&r.cuda.summary, 1.0, 4),
            format!("{:.3}", r.rust.median() / r.cuda.median()),
            pct(r.rust.median(), base.rust.median()),
            pct(r.cuda.median(), base.cuda.median()),
            format!("{:.0}", gb_per_s(r.bytes, r.rust.median() * 1e-3)),
            format!("{}/{}", r.regs.0, r.regs.1),
            (if r.ok { "pass" } else { "FAIL" }).to_string(),
        ]);
    }
    table
}

/// One line per `m_auto` row: what each language settled on, after how many launches.
fn auto_notes(rows: &[Row]) -> String {
    let autos: Vec<(&Row, AutoRow)> = rows.iter().filter_map(|r| r.auto.map(|a| (r, a))).collect();
    if autos.is_empty() {
        return String::new();
    }
    let mut t =
        "\n`level = auto` (target: never more than 2% slower than no hint):\n\n".to_string();
    let ms = |m: Option<f32>| m.map_or("-".to_string(), |v| format!("{v:.4}"));
    for (r, a) in autos {
        let base = base_row(rows, r);
        t += &format!(
            "- {} m_auto: Rust settled on {} after {} launches (medians plain {} ms, l2 {} ms), \
             {:+.1}% vs m_none; CUDA on {} after {} launches (plain {} ms, l2 {} ms), {:+.1}% vs \
             m_none\n",
            r.kernel,
            a.rust,
            a.rust_launches,
            ms(a.rust_medians[0]),
            ms(a.rust_medians[1]),
            (r.rust.median() / base.rust.median() - 1.0) * 100.0,
            a.cuda,
            a.cuda_launches,
            ms(a.cuda_medians[0]),
            ms(a.cuda_medians[1]),
            (r.cuda.median() / base.cuda.median() - 1.0) * 100.0,
        );
    }
    t
}

/// Every number, one line per variant and language.
fn csv(meta: &Meta, rows: &[Row]) -> Res<String> {
    let mut csv = Table::new([
        "kernel",
        "written",
        "variant",
        "lang",
        "auto_choice",
        "tuning_launches",
        "median_ms",
        "min_ms",
        "p25_ms",
        "p75_ms",
        "max_ms",
        "bytes",
        "gb_per_s",
        "regs",
        "check_ok",
        "device",
        "driver",
        "ptx",
        "nvrtc",
        "seed",
        "reps",
    ]);
    let (device, driver) = (meta.device(), meta.driver());
    for r in rows {
        let (rust_auto, cuda_auto) = match r.auto {
            Some(a) => (
                (a.rust.name(), a.rust_launches.to_string()),
                (a.cuda.name(), a.cuda_launches.to_string()),
            ),
            None => (
                (String::new(), String::new()),
                (String::new(), String::new()),
            ),
        };
        for (lang, t, regs, ptx, auto) in [
            ("rust", r.rust, r.regs.0, &meta.rust_ptx, &rust_auto),
            ("cuda", r.cuda, r.regs.1, &meta.cuda_ptx, &cuda_auto),
        ] {
            let s = t.summary;
            csv.push([
                r.kernel.to_string(),
                r.written().to_string(),
                r.variant.to_string(),
                lang.to_string(),
                auto.0.to_string(),
                auto.1.clone(),
                format!("{:.5}", s.median),
                format!("{:.5}", s.min),
                format!("{:.5}", t.p25),
                format!("{:.5}", t.p75),
                format!("{:.5}", s.max),
                format!("{:.0}", r.bytes),
                format!("{:.1}", gb_per_s(r.bytes, s.median * 1e-3)),
                regs.to_string(),
                r.ok.to_string(),
                device.clone(),
                driver.clone(),
                ptx.clone(),
                meta.nvrtc.clone(),
                meta.seed.to_string(),
                meta.reps.to_string(),
            ]);
        }
    }
    Ok(csv.to_csv()?)
}

/// Writes `vs_cuda.md` (table and checks), `vs_cuda.csv` (every number) and `vs_cuda.svg`.
pub fn write_outputs(out: &OutDir, meta: &Meta, rows: &[Row]) -> Res<()> {
    let mut md = String::from("# Rust (lookahead-builder) versus CUDA C++ (NVRTC): results\n\n");
    md += "Written by `examples/vs-cuda`; explained in \
           [docs/rust-vs-cuda.md](../docs/rust-vs-cuda.md). Plot: [vs_cuda.svg](vs_cuda.svg), \
           every number: [vs_cuda.csv](vs_cuda.csv).\n\n";
    md += &table(meta, rows);
    md += "\nChecks (first launch of each variant, fresh random inputs, outputs poisoned with \
           NaN):\n\n";
    for r in rows {
        md += &format!(
            "- {} {}: Rust {}; CUDA {}\n",
            r.kernel,
            r.label(),
            r.check.0,
            r.check.1
        );
    }
    out.write("vs_cuda.md", md)?;
    out.write("vs_cuda.csv", csv(meta, rows)?)?;
    out.write("vs_cuda.svg", plot(meta, rows).to_svg()?)?;
    Ok(())
}

/// Bars: each variant's median time over the CUDA no-hint median of the same kernel,
/// Rust and CUDA side by side, with whiskers from min to max.
fn plot(meta: &Meta, rows: &[Row]) -> BarChart {
    let base = |r: &Row| base_row(rows, r).cuda.median();
    let y_max = rows
        .iter()
        .map(|r| r.rust.summary.max.max(r.cuda.summary.max) / base(r))
        .fold(1.2f64, f64::max)
        .min(4.0)
        * 1.05;
    let series = |label: &str, color: Rgb, lang: fn(&Row) -> Timing| BarSeries {
        label: label.into(),
        color,
        bars: rows
            .iter()
            .map(|r| {
                let s = lang(r).summary;
                Bar {
                    value: s.median / base(r),
                    low: s.min / base(r),
                    high: s.max / base(r),
                }
            })
            .collect(),
    };
    BarChart {
        title: format!(
            "Rust vs CUDA C++ per hint, time / CUDA no-hint time of the same family (hand / m_* \
             #[prefetch_next]; lower is better) - {}, driver {}",
            meta.device(),
            meta.driver()
        ),
        y_desc: "time / CUDA no-hint time".into(),
        categories: rows
            .iter()
            .map(|r| format!("{} {}", r.kernel, r.label()))
            .collect(),
        series: vec![
            series("Rust (lookahead-builder PTX)", Rgb(222, 110, 40), |r| {
                r.rust
            }),
            series("CUDA C++ (NVRTC -O3)", Rgb(60, 120, 200), |r| r.cuda),
        ],
        y_max,
        reference: Some(1.0),
        size: ((300 + 28 * rows.len() as u32).max(1400), 760),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookahead::launch::autotune::Level;
    use lookahead_bench::header::Device;

    fn timing(m: f64) -> Timing {
        Timing::of(&[m * 0.98, m * 0.99, m, m, m * 1.01, m * 1.03]).unwrap()
    }

    fn row(kernel: &'static str, variant: &'static str, r: f64, c: f64) -> Row {
        Row {
            kernel,
            variant,
            bytes: 1e9,
            rust: timing(r),
            cuda: timing(c),
            regs: (16, 18),
            check: ("PASS".into(), "PASS".into()),
            ok: true,
            auto: None,
        }
    }

    #[test]
    fn timings_are_order_statistics() {
        let t = Timing::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        let s = t.summary;
        assert_eq!(
            (s.min, t.p25, s.median, t.p75, s.max),
            (1.0, 2.0, 3.0, 4.0, 5.0)
        );
        assert_eq!(Timing::of(&[]), None);
    }

    fn meta() -> Meta {
        Meta {
            header: RunHeader {
                device: Some(Device {
                    name: "test device".into(),
                    compute_capability: 90,
                    sms: 132,
                    driver_release: Some("580.1".into()),
                    cuda_version: (13, 0),
                }),
                host: "test host".into(),
                date: "2026-01-01T00:00:00Z".into(),
                command: "vs_cuda --reps 3".into(),
            },
            rust_ptx: "PTX ISA 8.0".into(),
            cuda_ptx: "PTX ISA 9.0, by NVRTC".into(),
            nvrtc: "13.0".into(),
            seed: 1,
            reps: 3,
            warmup: 1,
        }
    }

    fn rows() -> Vec<Row> {
        let mut auto = row("saxpy", "m_auto", 2.0, 2.1);
        auto.auto = Some(AutoRow {
            rust: Variant::PLAIN,
            cuda: Variant::new(Level::L2, 0),
            rust_launches: 12,
            cuda_launches: 12,
            rust_medians: [Some(2.0), Some(2.2)],
            cuda_medians: [Some(2.3), Some(2.1)],
        });
        vec![
            row("saxpy", "none", 1.0, 1.0),
            row("saxpy", "l2_d4", 1.1, 1.05),
            row("saxpy", "m_none", 2.0, 2.0),
            auto,
        ]
    }

    #[test]
    fn writes_table_csv_and_plot() {
        let dir = std::env::temp_dir().join(format!("vs_cuda_test_{}", std::process::id()));
        let out = OutDir::create(&dir).unwrap();
        let rows = rows();
        write_outputs(&out, &meta(), &rows).unwrap();
        let md = std::fs::read_to_string(dir.join("vs_cuda.md")).unwrap();
        assert!(
            md.contains("- device: test device (sm_90, 132 SMs)\n- driver: 580.1 (CUDA 13.0)\n"),
            "{md}"
        );
        assert!(md.contains("- command: `vs_cuda --reps 3`"), "{md}");
        assert!(md.contains("| saxpy | hand | l2_d4 | 1.1000"), "{md}");
        // Macro rows are compared with m_none, and say what `auto` settled on.
        assert!(
            md.contains("| saxpy | #[prefetch_next] | m_auto -> Rust plain, CUDA l2 | 2.0000"),
            "{md}"
        );
        assert!(md.contains("| 0.952 | +0.0% | +5.0% |"), "{md}");
        assert!(
            md.contains("saxpy m_auto: Rust settled on plain after 12 launches"),
            "{md}"
        );
        let csv = std::fs::read_to_string(dir.join("vs_cuda.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 2 * rows.len());
        assert!(
            csv.contains("saxpy,#[prefetch_next],m_auto,cuda,l2,12,"),
            "{csv}"
        );
        // Cells with commas are quoted.
        assert!(
            csv.contains(
                ",\"test device (sm_90, 132 SMs)\",580.1 (CUDA 13.0),\"PTX ISA 9.0, \
                              by NVRTC\",13.0,1,3\n"
            ),
            "{csv}"
        );
        let svg = std::fs::read_to_string(dir.join("vs_cuda.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("saxpy l2_d4"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
