//! The report: the set-up, the table of rows, the resident and pull lines, the targets met
//! or missed, as Markdown; every number as CSV; cold GB/s against probed fraction as SVG.

use std::fmt::Write as _;

use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::plot::{Line, LineChart};
use lookahead_bench::stats::{gb_per_s, median_range, Summary};
use lookahead_bench::table::Table;
use lookahead_uvm::{MachineProfile, Policy, ServiceReport};

use crate::measure::{Built, Found, Row};
use crate::{Args, Res, GIB};

/// What the report says beside the rows.
pub struct ReportContext<'a> {
    pub args: &'a Args,
    pub header: &'a RunHeader,
    pub built: &'a Built,
    /// The pinned host-to-device copy rate of this run, GB/s.
    pub pinned: f64,
    pub profile: &'a MachineProfile,
    pub service: Option<ServiceReport>,
}

/// Prints the Markdown report and writes it, the CSV and the plot into `out`.
pub fn write(out: &OutDir, c: &ReportContext, found: &Found) -> Res<()> {
    let md = markdown(c, found);
    println!("\n{md}");
    out.write(
        "ivf_bench.md",
        format!(
            "# IVF policy benchmark\n\nWritten by `examples/ivf/src/bin/ivf_bench/`; explained in \
             [docs/unified-memory.md](../docs/unified-memory.md).\n\n{md}"
        ),
    )?;
    out.write("ivf_bench.csv", results_csv(&found.rows, c.pinned)?)?;
    out.write(
        "ivf_bench.svg",
        plot(&found.rows, c.pinned, c.header).to_svg()?,
    )?;
    Ok(())
}

/// `every 4th SM`.
fn every_nth_sm(n: u32) -> String {
    match n {
        1 => "every SM".to_string(),
        2 => "every 2nd SM".to_string(),
        3 => "every 3rd SM".to_string(),
        n => format!("every {n}th SM"),
    }
}

/// The run header and what else the numbers depend on, as Markdown list items.
fn setup_lines(c: &ReportContext, found: &Found) -> String {
    let (args, gib) = (c.args, c.built.index.index_bytes() as f64 / GIB);
    let lens = c.built.list_lens;
    let mut md = c.header.markdown();
    md += &format!(
        "- index: {gib:.2} GiB of managed memory, {} lists ({} to {} vectors), dim {}, \
         nprobe {}, {} queries per hot cluster\n",
        args.nlist, lens.min, lens.max, args.dim, args.nprobe, args.queries_per_cluster
    );
    md += &format!("- pinned cudaMemcpy H2D (same run): {:.1} GB/s\n", c.pinned);
    let copy_every = match args.pull_copy_every {
        0 => ivf_kernels::PULL_COPY_EVERY_NTH_SM,
        n => n,
    };
    md += &format!(
        "- gpu-pull: the warps on {} copy (and block 0's first warp); the mapping {} the host \
         as preferred location\n",
        every_nth_sm(copy_every),
        if args.prefer_host {
            "sets"
        } else {
            "does not set"
        }
    );
    md += &format!("- probe (same run): {}\n", c.profile.summary());
    if let Some(m) = Summary::of(&found.mapping_s) {
        md += &format!(
            "- set-up for the policies that read through a GPU mapping (accessed-by advice on \
             all {gib:.2} GiB, and for gpu-pull and auto the pull cache; once per index, before \
             the cold searches of remote-map, gpu-pull and auto, not in their times): \
             {:.0} ms [{:.0}, {:.0}]\n",
            m.median * 1e3,
            m.min * 1e3,
            m.max * 1e3
        );
    }
    if !found.recall_note.is_empty() {
        md += &format!("- {}\n", found.recall_note);
    }
    if let Some(r) = &c.service {
        md += &format!(
            "- prefetch service ({} threads): {} requests, {:.2} GB, {} failed\n",
            args.service_threads,
            r.requests,
            r.bytes as f64 / 1e9,
            r.failed
        );
    }
    md += &format!(
        "- each cell: median of {} (cold search after moving every list to the host and \
         emptying the pull cache; warm search of a second batch right after); wall time of the \
         whole search (queries up, results back)\n\
         - lists asked: lists requested from the host (gpu-requests) or copied by the kernel \
         (gpu-pull); arrived: of those, read after their data arrived (gpu-pull: read from the \
         cache)\n",
        args.reps
    );
    md
}

/// The whole Markdown report.
fn markdown(c: &ReportContext, found: &Found) -> String {
    let rows = &found.rows;
    let mut md = setup_lines(c, found);
    md += "\n";
    md += &results_table(rows, c.pinned).to_markdown();
    md += &resident_lines(rows);
    md += &pull_lines(rows);
    md += &format!("\n## Targets, from this run\n\n{}", targets(rows, c.pinned));
    md
}

/// The cold median of the faults policy at the same aimed fraction.
fn faults_at(rows: &[Row], target: f64) -> Option<f64> {
    rows.iter()
        .find(|x| x.policy == Policy::Faults && x.target == target)
        .map(|x| x.cold.median)
}

fn results_table(rows: &[Row], pinned: f64) -> Table {
    let mut t = Table::new([
        "aimed %",
        "probed %",
        "policy",
        "ran",
        "needed MB",
        "cold ms [min, max]",
        "cold GB/s",
        "% of pinned",
        "x faults",
        "warm ms",
        "resident ms",
        "warm / resident",
        "lists asked (cold / warm)",
        "arrived / timed out",
        "same top-k",
    ]);
    for r in rows {
        let g = r.cold_gbps();
        t.push([
            r.target.to_string(),
            format!("{:.1}", r.percent),
            r.policy.name().to_string(),
            r.chosen.name().to_string(),
            format!("{:.0}", r.needed_bytes as f64 / 1e6),
            median_range(&r.cold, 1e3, 1),
            format!("{g:.1}"),
            format!("{:.0}%", g / pinned * 100.0),
            faults_at(rows, r.target)
                .map_or_else(|| "-".into(), |f| format!("{:.1}", f / r.cold.median)),
            format!("{:.2}", r.warm.median * 1e3),
            format!("{:.2}", r.resident.median * 1e3),
            format!("{:.2}", r.warm.median / r.resident.median),
            format!("{} / {}", r.requested.cold, r.requested.warm),
            format!("{} / {}", r.arrived.arrived, r.arrived.timed_out),
            (if r.same_top_k { "yes" } else { "NO" }).to_string(),
        ]);
    }
    t
}

fn results_csv(rows: &[Row], pinned: f64) -> lookahead_bench::Result<String> {
    let mut t = Table::new([
        "aimed_percent",
        "probed_percent",
        "policy",
        "ran",
        "needed_bytes",
        "cold_s",
        "cold_min_s",
        "cold_max_s",
        "cold_gbps",
        "pinned_gbps",
        "warm_s",
        "resident_s",
        "resident_gpu_s",
        "resident_scan_s",
        "asked_cold",
        "probed_lists",
        "asked_warm",
        "arrived",
        "timed_out",
        "cold_scan_s",
        "same_topk",
        "pull_copy_s",
        "cold_reps_s",
    ]);
    let s6 = |x: f64| format!("{x:.6}");
    for r in rows {
        let reps: Vec<String> = r.cold_reps.iter().map(|x| s6(*x)).collect();
        t.push([
            r.target.to_string(),
            format!("{:.3}", r.percent),
            r.policy.name().to_string(),
            r.chosen.name().to_string(),
            r.needed_bytes.to_string(),
            s6(r.cold.median),
            s6(r.cold.min),
            s6(r.cold.max),
            format!("{:.3}", r.cold_gbps()),
            format!("{pinned:.3}"),
            s6(r.warm.median),
            s6(r.resident.median),
            s6(r.resident_gpu_s),
            s6(r.resident_scan_s),
            r.requested.cold.to_string(),
            r.requested.probed.to_string(),
            r.requested.warm.to_string(),
            r.arrived.arrived.to_string(),
            r.arrived.timed_out.to_string(),
            s6(r.cold_scan_s),
            r.same_top_k.to_string(),
            s6(r.pull_copy_s),
            reps.join(";"),
        ]);
    }
    t.to_csv()
}

/// One line per aimed fraction: the resident searches' wall, GPU and scan times.
fn resident_lines(rows: &[Row]) -> String {
    let mut md = "\nResident searches (batch two, every list on the GPU), median: wall time, of \
                  which GPU time from the coarse kernel to the merge, of which the scan kernel:\n\n"
        .to_string();
    let mut seen = Vec::new();
    for r in rows {
        if !seen.contains(&r.target) {
            seen.push(r.target);
            md += &format!(
                "- aimed {}%: {:.2} ms wall, {:.2} ms GPU, {:.2} ms scan\n",
                r.target,
                r.resident.median * 1e3,
                r.resident_gpu_s * 1e3,
                r.resident_scan_s * 1e3
            );
        }
    }
    md
}

/// One line per cold search that pulled: the kernel's own copy against the whole search.
fn pull_lines(rows: &[Row]) -> String {
    let pulls: Vec<&Row> = rows.iter().filter(|r| r.pull_copy_s > 0.0).collect();
    if pulls.is_empty() {
        return String::new();
    }
    let mut md = "\nGPU-driven pull, cold: the kernel's own copy (first copy warp's start to last \
                  one's end, GPU clock, median) against the whole search, and every repetition's \
                  search time:\n\n"
        .to_string();
    for r in pulls {
        let reps: Vec<String> = r
            .cold_reps
            .iter()
            .map(|x| format!("{:.2}", x * 1e3))
            .collect();
        md += &format!(
            "- {}% {}: copy {:.2} ms = {:.1} GB/s, search {:.2} ms; repetitions {}\n",
            r.target,
            r.policy.name(),
            r.pull_copy_s * 1e3,
            gb_per_s(r.needed_bytes as f64, r.pull_copy_s),
            r.cold.median * 1e3,
            reps.join(", ")
        );
    }
    md
}

/// A target's verdict for `row`'s policy: met only when its numbers reach the target and
/// its searches found the resident search's neighbours; a fast wrong answer misses.
fn verdict(reached: bool, row: &Row) -> &'static str {
    match (reached, row.same_top_k) {
        (_, false) => "MISSED (its top-k differs from the resident search's)",
        (true, true) => "met",
        (false, true) => "MISSED",
    }
}

/// The benchmark's targets, each with the numbers that decide it: from 6% probed up, the
/// fastest GPU-driven policy (gpu-requests, gpu-pull, auto) moves the cold batch's lists at
/// 85% of the pinned rate or more, and 3x as fast as faults; auto is within 5% of the best
/// single policy cold and warm, and its warm batch within 10% of the all-resident time. A
/// target is met only by a policy whose neighbours are the resident search's.
fn targets(rows: &[Row], pinned: f64) -> String {
    let mut out = String::new();
    let mut aims: Vec<f64> = rows.iter().map(|r| r.target).collect();
    aims.dedup();
    let row = |aim: f64, p: Policy| rows.iter().find(|r| r.target == aim && r.policy == p);
    let gb = Row::cold_gbps;
    for aim in &aims {
        let (Some(f), best) = (
            row(*aim, Policy::Faults),
            [Policy::GpuRequests, Policy::GpuPull, Policy::Auto]
                .iter()
                .filter_map(|&p| row(*aim, p))
                .max_by(|a, b| gb(a).total_cmp(&gb(b))),
        ) else {
            continue;
        };
        let Some(b) = best else { continue };
        let share = gb(b) / pinned;
        let speedup = f.cold.median / b.cold.median;
        let _ = writeln!(
            out,
            "- {:.1}% probed: {} cold {:.1} GB/s = {:.0}% of pinned (target 85% from 6% up: {}), \
             {:.1}x faults (target 3x: {})",
            b.percent,
            b.policy.name(),
            gb(b),
            share * 100.0,
            if b.percent >= 6.0 {
                verdict(share >= 0.85, b)
            } else {
                "n/a"
            },
            speedup,
            verdict(speedup >= 3.0, b)
        );
        if let Some(a) = row(*aim, Policy::Auto) {
            out += &auto_lines(rows, a);
        }
        if let Some(h) = row(*aim, Policy::KernelHints) {
            let _ = writeln!(
                out,
                "  - kernel-hints (in-kernel hints only): cold {:.1} GB/s, {:.2}x faults",
                gb(h),
                f.cold.median / h.cold.median
            );
        }
    }
    out
}

/// Auto's targets at its row's fraction: against the best single policy, cold and warm, and
/// its warm batch against the all-resident time.
fn auto_lines(rows: &[Row], a: &Row) -> String {
    let concrete = rows
        .iter()
        .filter(|r| r.target == a.target && r.policy != Policy::Auto);
    let best_cold = concrete
        .clone()
        .map(|r| r.cold.median)
        .fold(f64::INFINITY, f64::min);
    let best_warm = concrete
        .map(|r| r.warm.median)
        .fold(f64::INFINITY, f64::min);
    let (c, w) = (a.cold.median / best_cold, a.warm.median / best_warm);
    let warm = a.warm.median / a.resident.median;
    format!(
        "  - auto ran {}: cold {c:.2}x the best single policy, warm {w:.2}x (target at most \
         1.05: {})\n  - auto's warm batch {warm:.2}x the all-resident time (target at most \
         1.10: {})\n",
        a.chosen.name(),
        verdict(c <= 1.05 && w <= 1.05, a),
        verdict(warm <= 1.10, a)
    )
}

/// Cold effective GB/s against probed fraction, one line per policy, and the pinned rate.
fn plot(rows: &[Row], pinned: f64, header: &RunHeader) -> LineChart {
    let min_x = rows
        .iter()
        .map(|r| r.percent)
        .fold(100.0, f64::min)
        .max(0.05)
        * 0.8;
    let max_x = rows.iter().map(|r| r.percent).fold(1.0, f64::max) * 1.2;
    let max_y = rows.iter().map(Row::cold_gbps).fold(pinned, f64::max) * 1.1;
    let series = Policy::CONCRETE
        .iter()
        .chain([Policy::Auto].iter())
        .map(|policy| Line {
            label: policy.name().to_string(),
            points: rows
                .iter()
                .filter(|r| r.policy == *policy)
                .map(|r| (r.percent, r.cold_gbps()))
                .collect(),
        })
        .collect();
    let device = header.device.as_ref().map_or_else(
        || "unknown device".into(),
        |d| format!("{}, driver {}", d.name, d.driver()),
    );
    LineChart {
        title: format!("IVF cold search, effective GB/s on needed bytes ({device})"),
        x_desc: "probed fraction of the index (%)".into(),
        y_desc: "GB/s".into(),
        x_range: min_x..max_x,
        y_range: 0.0..max_y,
        references: [(1.0, "pinned memcpy"), (0.85, "85% of pinned")]
            .iter()
            .map(|(level, label)| {
                (
                    format!("{label} {:.1} GB/s", pinned * level),
                    pinned * level,
                )
            })
            .collect(),
        series,
        size: (900, 560),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Arrivals, Requested};

    fn summary(ms: f64) -> Summary {
        Summary::of(&[ms * 0.9e-3, ms * 1e-3, ms * 1.2e-3]).unwrap()
    }

    fn row(target: f64, policy: Policy, cold_ms: f64) -> Row {
        Row {
            target,
            percent: target + 0.5,
            policy,
            chosen: if policy == Policy::Auto {
                Policy::GpuPull
            } else {
                policy
            },
            needed_bytes: 1_000_000_000,
            cold: summary(cold_ms),
            warm: summary(cold_ms / 4.0),
            resident: summary(10.0),
            requested: Requested {
                cold: 5,
                probed: 6,
                warm: 1,
            },
            arrived: Arrivals {
                arrived: 4,
                timed_out: 0,
            },
            cold_scan_s: 0.01,
            cold_reps: vec![cold_ms * 1e-3; 3],
            pull_copy_s: if policy == Policy::GpuPull {
                0.015
            } else {
                0.0
            },
            resident_gpu_s: 0.008,
            resident_scan_s: 0.005,
            same_top_k: true,
        }
    }

    fn rows() -> Vec<Row> {
        vec![
            row(12.0, Policy::Faults, 100.0),
            row(12.0, Policy::GpuPull, 20.0),
            row(12.0, Policy::Auto, 20.5),
        ]
    }

    #[test]
    fn table_and_csv_have_a_line_per_row() {
        let rows = rows();
        let md = results_table(&rows, 50.0).to_markdown();
        // 1 GB in 20 ms: 50 GB/s, all of pinned, 5x faults.
        let want = "| 12 | 12.5 | gpu-pull | gpu-pull | 1000 | 20.0 [18.0, 24.0] | 50.0 | 100% | \
                    5.0 | 5.00 | 10.00 | 0.50 | 5 / 1 | 4 / 0 | yes |";
        assert!(md.contains(want), "{md}");
        let csv = results_csv(&rows, 50.0).unwrap();
        assert_eq!(csv.lines().count(), 1 + rows.len());
        assert!(
            csv.lines()
                .nth(2)
                .unwrap()
                .ends_with(",4,0,0.010000,true,0.015000,0.020000;0.020000;0.020000"),
            "{csv}"
        );
        assert!(
            csv.lines().nth(2).unwrap().contains(",5,6,1,4,0,"),
            "asked cold, probed, asked warm, arrived, timed out: {csv}"
        );
        assert!(pull_lines(&rows).contains("- 12% gpu-pull: copy 15.00 ms = 66.7 GB/s"));
        assert!(
            resident_lines(&rows).contains("- aimed 12%: 10.00 ms wall, 8.00 ms GPU, 5.00 ms scan")
        );
    }

    #[test]
    fn targets_say_met_or_missed() {
        let t = targets(&rows(), 50.0);
        let want = "- 12.5% probed: gpu-pull cold 50.0 GB/s = 100% of pinned (target 85% from 6% \
                    up: met), 5.0x faults (target 3x: met)";
        assert!(t.contains(want), "{t}");
        assert!(
            t.contains("auto ran gpu-pull: cold 1.02x the best single policy"),
            "{t}"
        );
        assert!(
            t.contains("auto's warm batch 0.51x the all-resident time (target at most 1.10: met)"),
            "{t}"
        );
        assert!(targets(&rows(), 100.0).contains("50% of pinned (target 85% from 6% up: MISSED)"));
    }

    #[test]
    fn a_policy_with_other_neighbours_meets_no_target() {
        let mut rows = rows();
        for r in rows.iter_mut().filter(|r| r.policy != Policy::Faults) {
            r.same_top_k = false;
        }
        let t = targets(&rows, 50.0);
        let differs = "MISSED (its top-k differs from the resident search's)";
        let want = format!(
            "- 12.5% probed: gpu-pull cold 50.0 GB/s = 100% of pinned (target 85% from 6% up: \
             {differs}), 5.0x faults (target 3x: {differs})"
        );
        assert!(t.contains(&want), "{t}");
        assert!(
            t.contains(&format!("(target at most 1.05: {differs})"))
                && t.contains(&format!("(target at most 1.10: {differs})")),
            "{t}"
        );
        assert!(!t.contains("met"), "{t}");
    }

    #[test]
    fn plot_names_every_measured_policy() {
        let header = RunHeader::host_only();
        let svg = plot(&rows(), 50.0, &header).to_svg().unwrap();
        assert!(svg.contains("gpu-pull") && svg.contains("pinned memcpy 50.0 GB/s"));
        assert!(
            !svg.contains("remote-map"),
            "policies without rows stay out of the legend"
        );
        assert_eq!(every_nth_sm(4), "every 4th SM");
        assert_eq!(every_nth_sm(1), "every SM");
    }
}
