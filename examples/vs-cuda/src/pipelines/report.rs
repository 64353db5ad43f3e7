//! The pipeline table: every entry in both languages, against the run's copy rate or the
//! GPU's FP32 peak; Markdown and CSV.

use lookahead_bench::output::OutDir;
use lookahead_bench::stats::{gb_per_s, median_range};
use lookahead_bench::table::Table;

use crate::report::{Meta, Timing};
use crate::tuner::TunerRow;
use crate::Res;

/// One entry measured in both languages.
pub struct PipeRow {
    pub kernel: &'static str,
    pub kind: &'static str,
    pub stages: u32,
    pub grid: u32,
    pub bytes: f64,
    pub flops: f64,
    pub rust: Timing,
    pub cuda: Timing,
    pub regs: (i32, i32),
    pub check: [String; 2],
    pub ok: bool,
}

/// The run and its two yardsticks.
pub struct PipeMeta {
    pub meta: Meta,
    /// Device-to-device copy of 1 GiB, GB/s counting bytes read and written.
    pub copy_gbps: f64,
    /// FP32 peak, GFLOP/s.
    pub peak_gflops: f64,
}

impl PipeRow {
    /// What the Rust entry reaches: `(rate, share)`, GB/s and % of the copy rate for a
    /// streaming kernel, GFLOP/s and % of the FP32 peak for the GEMM.
    fn reach(&self, m: &PipeMeta, t: &Timing) -> (String, String) {
        let s = t.median() * 1e-3;
        if self.flops > 0.0 {
            let g = self.flops / s / 1e9;
            (
                format!("{g:.0} GFLOP/s"),
                format!("{:.1}% of FP32 peak", 100.0 * g / m.peak_gflops),
            )
        } else {
            let g = gb_per_s(self.bytes, s);
            (
                format!("{g:.0} GB/s"),
                format!("{:.1}% of copy", 100.0 * g / m.copy_gbps),
            )
        }
    }
}

/// One line for the console.
pub fn print_row(r: &PipeRow) {
    println!(
        "  {:<12} {:<8} s{}  rust {:>8.4} ms  cuda {:>8.4} ms  rust/cuda {:>5.3}  regs {}/{}  grid {}  {}",
        r.kernel,
        r.kind,
        r.stages,
        r.rust.median(),
        r.cuda.median(),
        r.rust.median() / r.cuda.median(),
        r.regs.0,
        r.regs.1,
        r.grid,
        if r.ok { "checks pass" } else { "CHECK FAILED" }
    );
    if !r.ok {
        println!("    rust {}\n    cuda {}", r.check[0], r.check[1]);
    }
}

fn table(m: &PipeMeta, rows: &[PipeRow]) -> Table {
    let mut t = Table::new([
        "kernel",
        "copy",
        "stages",
        "Rust ms [min, max]",
        "CUDA ms [min, max]",
        "Rust / CUDA",
        "Rust",
        "Rust share",
        "CUDA share",
        "regs Rust/CUDA",
        "grid",
        "checks",
    ]);
    for r in rows {
        let (rate, share) = r.reach(m, &r.rust);
        t.push([
            r.kernel.to_string(),
            r.kind.to_string(),
            r.stages.to_string(),
            median_range(&r.rust.summary, 1.0, 4),
            median_range(&r.cuda.summary, 1.0, 4),
            format!("{:.3}", r.rust.median() / r.cuda.median()),
            rate,
            share,
            r.reach(m, &r.cuda).1,
            format!("{}/{}", r.regs.0, r.regs.1),
            r.grid.to_string(),
            (if r.ok { "pass" } else { "FAIL" }).to_string(),
        ]);
    }
    t
}

fn csv(m: &PipeMeta, rows: &[PipeRow]) -> Res<String> {
    let mut csv = Table::new([
        "kernel",
        "copy",
        "stages",
        "lang",
        "median_ms",
        "min_ms",
        "p25_ms",
        "p75_ms",
        "max_ms",
        "bytes",
        "flops",
        "grid",
        "regs",
        "check_ok",
        "copy_gbps",
        "peak_gflops",
        "device",
        "driver",
        "seed",
        "reps",
    ]);
    let (device, driver) = (m.meta.device(), m.meta.driver());
    for r in rows {
        for (lang, t, regs) in [("rust", r.rust, r.regs.0), ("cuda", r.cuda, r.regs.1)] {
            let s = t.summary;
            csv.push([
                r.kernel.to_string(),
                r.kind.to_string(),
                r.stages.to_string(),
                lang.to_string(),
                format!("{:.5}", s.median),
                format!("{:.5}", s.min),
                format!("{:.5}", t.p25),
                format!("{:.5}", t.p75),
                format!("{:.5}", s.max),
                format!("{:.0}", r.bytes),
                format!("{:.0}", r.flops),
                r.grid.to_string(),
                regs.to_string(),
                r.ok.to_string(),
                format!("{:.1}", m.copy_gbps),
                format!("{:.0}", m.peak_gflops),
                device.clone(),
                driver.clone(),
                m.meta.seed.to_string(),
                m.meta.reps.to_string(),
            ]);
        }
    }
    Ok(csv.to_csv()?)
}

/// The `stages = auto, copy = auto` kernels: each tuner's choice against its candidates
/// measured exhaustively (Rust only: the tuner is the typed launcher's).
fn tuned_section(tuned: &[TunerRow], reps: usize) -> String {
    let mut md = String::from(
        "\n## `stages = auto, copy = auto`: the tuner against exhaustive measurement\n\n",
    );
    md += &format!(
        "`<kernel>_tuned` is each kernel written once with `stages = auto, copy = auto`: an entry per \
         (copy, stages) candidate (`cp_async` or `bulk_portable`, 2 to 4 stages) and the plain one, \
         which stages through registers (`load_store`). All at one launch shape (the problem's grid, \
         or for the grid-stride kernels the blocks every candidate keeps resident). Exhaustive: \
         median of {reps} event-timed launches per candidate after one warm-up, candidates taking \
         turns, the L2 flushed before each, as the tuner flushes. The tuner starts from no \
         decision; its launches, and the time from the first to its choice, are the tuning cost. \
         Target: the choice within {:.0}% of the best candidate. Every number: \
         [vs_cuda_pipelines_tuned.csv](vs_cuda_pipelines_tuned.csv).\n\n",
        crate::tuner::TARGET * 100.0
    );
    md += &crate::tuner::details(tuned);
    md
}

/// Writes `vs_cuda_pipelines.md` (header, yardsticks, table, checks, the tuned kernels),
/// `vs_cuda_pipelines.csv` (every number) and `vs_cuda_pipelines_tuned.csv`.
pub fn write_outputs(out: &OutDir, m: &PipeMeta, rows: &[PipeRow], tuned: &[TunerRow]) -> Res<()> {
    let mut md = String::from("# Pipelined kernels, Rust versus CUDA C++: results\n\n");
    md += "Written by `vs_cuda_pipelines` (`examples/vs-cuda`); explained in [docs/guide.md](../docs/guide.md) (asynchronous copies) and [docs/rust-vs-cuda.md](../docs/rust-vs-cuda.md). Every number: [vs_cuda_pipelines.csv](vs_cuda_pipelines.csv).\n\n";
    md += &m.meta.header.markdown();
    md += &format!(
        "- Rust: {}\n- CUDA C++: {}\n- median of {} event-timed launches after {} warm-up launches, [min, max]; seed {}\n",
        m.meta.rust_ptx, m.meta.cuda_ptx, m.meta.reps, m.meta.warmup, m.meta.seed
    );
    md += &format!(
        "- device-to-device copy of 1 GiB in this run: {:.0} GB/s counting bytes read and written; FP32 peak (SMs x FP32 lanes x 2 x max clock): {:.0} GFLOP/s\n\n",
        m.copy_gbps, m.peak_gflops
    );
    md += "Streaming kernels' share is of the copy rate (bytes each must read and write at least); the GEMM's of the FP32 peak. `grid`: blocks launched (the streaming kernels: as many as both languages keep resident).\n\n";
    md += &table(m, rows).to_markdown();
    md += "\nChecks (first launch of each entry, outputs poisoned with NaN):\n\n";
    for r in rows {
        md += &format!(
            "- {} {} s{}: Rust {}; CUDA {}\n",
            r.kernel, r.kind, r.stages, r.check[0], r.check[1]
        );
    }
    if !tuned.is_empty() {
        md += &tuned_section(tuned, m.meta.reps);
        out.write(
            "vs_cuda_pipelines_tuned.csv",
            crate::tuner::csv(&m.meta.header, tuned)?,
        )?;
    }
    out.write("vs_cuda_pipelines.md", md)?;
    out.write("vs_cuda_pipelines.csv", csv(m, rows)?)?;
    Ok(())
}
