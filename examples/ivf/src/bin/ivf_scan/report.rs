//! The report: a line per batch as it is measured, the table (Markdown and CSV), and the
//! targets met or missed.

use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::table::Table;

use crate::measure::Row;
use crate::{Args, Res};

/// GB/s of `bytes` in `s` seconds.
fn rate(bytes: u64, s: f64) -> f64 {
    bytes as f64 / s / 1e9
}

/// One batch on one line.
pub fn summary(r: &Row) -> String {
    format!(
        "{:<36} {:<5} {:>6} queries, {:>8.1} MB: read {:.0} GB/s; scan {:.1} us ({:.0}% of the read's rate){}",
        r.batch,
        r.scan,
        r.queries,
        r.bytes as f64 / 1e6,
        rate(r.bytes, r.read_s),
        r.scan_s * 1e6,
        100.0 * r.read_s / r.scan_s,
        if r.same { "" } else { "  RESULTS DIFFER" }
    )
}

fn table(rows: &[Row], dim: usize) -> Table {
    let mut t = Table::new([
        "batch",
        "scan",
        "queries",
        "bytes scanned MB",
        "read_sum GB/s",
        "scan us",
        "scan GB/s",
        "scan % of read",
        "FP32 TFLOP/s",
        "search us",
        "same results",
    ]);
    for r in rows {
        let flops = 2.0 * dim as f64 * r.distances as f64;
        t.push([
            r.batch.clone(),
            r.scan.to_string(),
            r.queries.to_string(),
            format!("{:.1}", r.bytes as f64 / 1e6),
            format!("{:.0}", rate(r.bytes, r.read_s)),
            format!("{:.1}", r.scan_s * 1e6),
            format!("{:.0}", rate(r.bytes, r.scan_s)),
            format!("{:.0}", 100.0 * r.read_s / r.scan_s),
            format!("{:.1}", flops / r.scan_s / 1e12),
            format!("{:.1}", r.gpu_s * 1e6),
            (if r.same { "yes" } else { "NO" }).to_string(),
        ]);
    }
    t
}

/// The targets, from this run's rows: small batches by the warp scan (what
/// `ScanMethod::Auto` runs for them), the large batch by tiles against the warp scan.
fn targets(rows: &[Row], dim: usize) -> String {
    let lowest = (rows.iter().filter(|r| r.queries <= 64 && r.scan == "warp"))
        .map(|r| r.read_s / r.scan_s)
        .reduce(f64::min);
    let large = |scan: &str| rows.iter().find(|r| r.queries > 64 && r.scan == scan);
    let tflops = large("tiles").map(|r| 2.0 * dim as f64 * r.distances as f64 / r.scan_s / 1e12);
    let speedup = large("tiles")
        .zip(large("warp"))
        .map(|(t, w)| w.scan_s / t.scan_s);
    // A target without a batch of its size in the run is not judged.
    let judged = |value: Option<f64>, met: fn(f64) -> bool, shown: fn(f64) -> String| {
        value.map_or_else(
            || "not measured (no such batch in this run)".to_string(),
            |v| format!("{} ({})", if met(v) { "met" } else { "missed" }, shown(v)),
        )
    };
    format!(
        "- target: batches of up to 64 queries (warp scan) scan at >= 90% of read_sum's rate \
         over as many bytes: {}\n\
         - target: the large warm batch's scan (tiles) at >= 20 TFLOP/s of FP32 distance \
         work: {}\n\
         - target: the large warm batch's scan (tiles) >= 4x faster than the warp scan: {}\n\
         - same neighbours in every search of a batch, by either scan: {}\n",
        judged(
            lowest,
            |v| v >= 0.9,
            |v| format!("lowest {:.0}%", 100.0 * v)
        ),
        judged(tflops, |v| v >= 20.0, |v| format!("{v:.1} TFLOP/s")),
        judged(speedup, |v| v >= 4.0, |v| format!("{v:.2}x")),
        if rows.iter().all(|r| r.same) {
            "yes"
        } else {
            "NO"
        },
    )
}

/// Writes the Markdown report and the CSV into `out`, then prints the report.
pub fn write(out: &OutDir, header: &RunHeader, args: &Args, rows: &[Row]) -> Res<()> {
    let md = format!(
        "{}\n\
         - index: {:.2} GiB, {} dims, {} lists, nprobe {}, every list resident; medians of {} \
         searches (after one warm-up) and of {} reads\n\
         - bytes scanned: for each (query, probed list) pair, the list's vectors (pairs that \
         share a list count it again: such reads can come from L2, hence shares above 100%); \
         read_sum reads as many bytes of device memory once (a plain read-only reduction, \
         `ivf_kernels::read_sum`)\n\
         - scan: `warp`, a warp per work item computing every distance (`ivf_kernels::scan`); \
         `tiles`, lower bounds from tiles of dot products (`ivf_kernels::tile_bounds`), then \
         exact distances where a bound can still beat a query's K-th \
         (`ivf_kernels::bounded_scan`); same results: bit for bit those of the warp scan\n\
         - scan us: CUDA events around the scan's kernels; search us: coarse to merge; FP32 \
         TFLOP/s: 2 x dim flops per (pair, vector) over the scan's time\n\
         \n\
         {}\n\
         {}",
        header.markdown(),
        args.gib,
        args.dim,
        args.nlist,
        args.nprobe,
        args.reps,
        args.reps,
        table(rows, args.dim).to_markdown(),
        targets(rows, args.dim),
    );
    out.write(
        "ivf_scan.md",
        format!(
            "# The IVF scan against a streaming read\n\nWritten by \
             `examples/ivf/src/bin/ivf_scan/`; explained in \
             [docs/ivf-scan.md](../docs/ivf-scan.md).\n\n{md}"
        ),
    )?;
    out.write("ivf_scan.csv", table(rows, args.dim).to_csv()?)?;
    println!("\n{md}");
    Ok(())
}
