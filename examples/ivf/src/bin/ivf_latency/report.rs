//! The report: a line per configuration as it is measured, the table (Markdown and CSV),
//! and the targets met or missed.

use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::table::Table;
use lookahead_uvm::Policy;

use crate::measure::{Arrival, Row};
use crate::{Args, Res};

/// Writes the Markdown report and the CSV into `out`, then prints the report.
pub fn write(out: &OutDir, header: &RunHeader, args: &Args, rows: &[Row]) -> Res<()> {
    let md = markdown(header, args, rows);
    out.write(
        "ivf_latency.md",
        format!(
            "# Small-batch IVF latency with CUDA graphs\n\nWritten by \
             `examples/ivf/src/bin/ivf_latency/`; explained in \
             [docs/graphs.md](../docs/graphs.md).\n\n{md}"
        ),
    )?;
    out.write("ivf_latency.csv", table(rows).to_csv()?)?;
    println!("\n{md}");
    Ok(())
}

fn arrival_name(a: Arrival) -> String {
    match a {
        Arrival::BackToBack => "back to back".into(),
        Arrival::Every(p) => format!("every {:.0} us", p.as_secs_f64() * 1e6),
    }
}

fn policy_name(p: Policy) -> &'static str {
    match p {
        Policy::Faults => "resident",
        _ => "gpu-pull (warm)",
    }
}

/// One configuration on one line: p50 and p99 launched -> as a graph, and the queueing.
pub fn summary(r: &Row) -> String {
    let (l, g) = (&r.launches.latencies, &r.graph.latencies);
    format!(
        "{:<16} {:>3} queries, {:<16}: p50 {:.1} -> {:.1} us ({:.2}x), p99 {:.1} -> {:.1} us, \
         queueing {:.1} -> {:.1} us{}",
        policy_name(r.policy),
        r.size,
        arrival_name(r.arrival),
        l.quantile(0.5) * 1e6,
        g.quantile(0.5) * 1e6,
        l.quantile(0.5) / g.quantile(0.5),
        l.quantile(0.99) * 1e6,
        g.quantile(0.99) * 1e6,
        r.launches.queueing * 1e6,
        r.graph.queueing * 1e6,
        if r.same { "" } else { "  RESULTS DIFFER" }
    )
}

fn table(rows: &[Row]) -> Table {
    let mut t = Table::new([
        "search",
        "queries",
        "arrival",
        "launches p50 us",
        "graph p50 us",
        "p50 launches / graph",
        "launches p99 us",
        "graph p99 us",
        "p99 graph / launches",
        "launches queries/s",
        "graph queries/s",
        "launches queueing p50 us",
        "graph queueing p50 us",
        "same results",
        "full search p50 us",
    ]);
    for r in rows {
        let (l, g) = (&r.launches.latencies, &r.graph.latencies);
        let (lp50, gp50) = (l.quantile(0.5), g.quantile(0.5));
        let (lp99, gp99) = (l.quantile(0.99), g.quantile(0.99));
        t.push([
            policy_name(r.policy).to_string(),
            r.size.to_string(),
            arrival_name(r.arrival),
            format!("{:.1}", lp50 * 1e6),
            format!("{:.1}", gp50 * 1e6),
            format!("{:.2}", lp50 / gp50),
            format!("{:.1}", lp99 * 1e6),
            format!("{:.1}", gp99 * 1e6),
            format!("{:.2}", gp99 / lp99),
            format!("{:.0}", r.launches.qps),
            format!("{:.0}", r.graph.qps),
            format!("{:.1}", r.launches.queueing * 1e6),
            format!("{:.1}", r.graph.queueing * 1e6),
            (if r.same { "yes" } else { "NO" }).to_string(),
            r.full
                .as_ref()
                .map_or_else(|| "-".into(), |f| format!("{:.1}", f.quantile(0.5) * 1e6)),
        ]);
    }
    t
}

/// The report: header, set-up, the table, and the targets met or missed.
fn markdown(header: &RunHeader, args: &Args, rows: &[Row]) -> String {
    let small = rows.iter().filter(|r| r.size <= 16);
    let p50_ratio = |r: &Row| r.launches.latencies.quantile(0.5) / r.graph.latencies.quantile(0.5);
    let p50_met = small.clone().all(|r| p50_ratio(r) >= 1.5);
    let p99_met = small
        .clone()
        .all(|r| r.graph.latencies.quantile(0.99) <= r.launches.latencies.quantile(0.99));
    let worst = small.map(p50_ratio).fold(f64::INFINITY, f64::min);
    format!(
        "{}\n\
         - index: {:.2} GiB, {} dims, {} lists, nprobe {}; {} timed batches per row after {} \
         warm-up; fixed rate: every {} x the launched back-to-back p50\n\
         - latency: from a batch's arrival to its neighbours in host memory (outputs poisoned in \
         mapped host memory, queries copied in, coarse, plan, scan, and the merge writing the \
         neighbours into that host memory)\n\
         - queueing: the host's time to queue a batch's work, before waiting for it \
         (`BatchSearch::last_queue_time`)\n\
         \n\
         {}\n\
         - target p50 of 1-16-query batches >= 1.5x lower with graphs: {} (lowest {:.2}x)\n\
         - target p99 no worse with graphs (1-16 queries): {}\n\
         - same results with and without graphs on every batch: {}\n",
        header.markdown(),
        args.gib,
        args.dim,
        args.nlist,
        args.nprobe,
        args.batches,
        args.warmup,
        args.rate_factor,
        table(rows).to_markdown(),
        if p50_met { "met" } else { "missed" },
        worst,
        if p99_met { "met" } else { "missed" },
        if rows.iter().all(|r| r.same) {
            "yes"
        } else {
            "NO"
        },
    )
}
