//! The results: one table per workload (cold batch, steady state, the cache's rates and
//! hit rate, the targets), every batch in CSV, and a plot of batch times.

use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::plot::{Line, LineChart};
use lookahead_bench::stats::{median_range, Summary};
use lookahead_bench::table::Table;
use lookahead_cache::{CacheStats, Eviction};

use crate::modes::{Mode, ModeRun};
use crate::Res;

/// What the run was.
pub struct Meta {
    pub header: RunHeader,
    pub pinned_gbps: f64,
    pub seed: u64,
    pub data_bytes: usize,
    pub cache_bytes: usize,
    pub args: String,
    /// The cache's eviction policy in every run but the eviction sweep's.
    pub eviction: Eviction,
}

/// One workload: its name, the cache's page size in its main table, what it measured.
pub type Workload<'a> = (&'a str, usize, crate::Measured);

/// The steady state: the second half of the batches.
fn steady(run: &ModeRun) -> &[f64] {
    &run.ms[run.ms.len() / 2..]
}

fn steady_summary(run: &ModeRun) -> Summary {
    Summary::of(steady(run)).expect("at least 2 batches")
}

fn find(runs: &[ModeRun], mode: Mode) -> Option<&ModeRun> {
    runs.iter().find(|r| r.mode == mode)
}

/// The cache's counters over the steady batches.
fn steady_stats(run: &ModeRun) -> CacheStats {
    let s = &run.stats[run.stats.len() / 2..];
    s.iter().fold(CacheStats::default(), |a, b| CacheStats {
        hits: a.hits + b.hits,
        misses: a.misses + b.misses,
        evictions: a.evictions + b.evictions,
        bytes_loaded: a.bytes_loaded + b.bytes_loaded,
        waits: a.waits + b.waits,
    })
}

/// The cache's numbers the targets are about, as lines.
fn targets(meta: &Meta, page: usize, m: &crate::Measured) -> String {
    let runs = &m.runs;
    let Some(cache) = find(runs, Mode::Cache) else {
        return String::new();
    };
    let mut t = String::new();
    let (cold_ms, cold) = cache.cold_median();
    let cold_gbps = cold.gb_per_s(cold_ms / 1e3);
    t += &format!(
        "- cold batch (median of {} cold starts): {:.1} MB loaded at {:.1} GB/s, {:.0}% of the pinned copy rate ({:.1} GB/s) (target >= 85%)\n",
        cache.cold.len(),
        cold.bytes_loaded as f64 / 1e6,
        cold_gbps,
        100.0 * cold_gbps / meta.pinned_gbps,
        meta.pinned_gbps
    );
    t += &format!(
        "- the same cold batch against copying {page}-byte pages from random places of the host memory with no cache ({:.1} GB/s in this run, 64 MiB of distinct pages a timing): {:.0}%\n",
        m.random_page_gbps,
        100.0 * cold_gbps / m.random_page_gbps
    );
    let st = steady_stats(cache);
    let n = steady(cache).len() as f64;
    let cache_ms = steady_summary(cache).median;
    t += &format!(
        "- steady state: hit rate {:.1}%, {:.1} MB loaded per batch\n",
        st.hit_rate() * 100.0,
        st.bytes_loaded as f64 / n / 1e6
    );
    if let Some(res) = find(runs, Mode::Resident) {
        let model = steady_summary(res).median
            + st.bytes_loaded as f64 / n / (meta.pinned_gbps * 1e9) * 1e3;
        t += &format!(
            "- steady batch {cache_ms:.3} ms against all-resident + missed bytes / pinned rate = {model:.3} ms: {:+.0}% (target within 15%)\n",
            (cache_ms / model - 1.0) * 100.0
        );
    }
    if let Some(z) = find(runs, Mode::ZeroCopy) {
        t += &format!(
            "- steady state against zero-copy: {:.2}x faster (target >= 3x where data is reused)\n",
            steady_summary(z).median / cache_ms
        );
    }
    if let Some(u) = find(runs, Mode::UvmFaults) {
        let total = |r: &ModeRun| r.ms.iter().sum::<f64>();
        t += &format!(
            "- against Unified Memory faults: cold batch {:.2}x faster, all batches {:.2}x (target >= 5x)\n",
            u.cold_median().0 / cold_ms,
            total(u) / total(cache)
        );
    }
    t += &format!(
        "- every batch's output equal to the CPU reference's (computed from the host data): {}\n",
        if runs.iter().all(|r| r.identical) {
            "yes, in every mode"
        } else {
            "NO (see the table)"
        }
    );
    t
}

/// One workload's table.
fn table(runs: &[ModeRun]) -> String {
    let mut t = Table::new([
        "mode",
        "cold batch ms (median)",
        "steady ms [min, max]",
        "vs zero-copy",
        "cold GB/s loaded",
        "steady hit rate",
        "same output",
    ]);
    let zero = find(runs, Mode::ZeroCopy).map(|z| steady_summary(z).median);
    for r in runs {
        let s = steady_summary(r);
        let (cold_ms, cold_stats) = r.cold_median();
        let (cold, hits) = match r.mode.uses_cache() {
            true => (
                format!("{:.1}", cold_stats.gb_per_s(cold_ms / 1e3)),
                format!("{:.1}%", steady_stats(r).hit_rate() * 100.0),
            ),
            false => ("-".into(), "-".into()),
        };
        t.push([
            r.mode.name().to_string(),
            format!("{cold_ms:.3}"),
            median_range(&s, 1.0, 3),
            zero.map_or("-".into(), |z| format!("{:.2}x", z / s.median)),
            cold,
            hits,
            (if r.identical { "yes" } else { "NO" }).to_string(),
        ]);
    }
    t.to_markdown()
}

/// The cache at every page size measured: the main one and the sweep's.
fn sweep_table(page: usize, m: &crate::Measured) -> String {
    let main = find(&m.runs, Mode::Cache).map(|r| (page, r));
    let mut all: Vec<(usize, &ModeRun)> = (main.into_iter())
        .chain(m.sweep.iter().map(|(b, r)| (*b, r)))
        .collect();
    all.sort_by_key(|(b, _)| *b);
    let rows = all
        .into_iter()
        .map(|(b, r)| (format!("{} KiB", b as f64 / 1024.0), r));
    cache_table("page", rows)
}

/// The cache at the main page size under each eviction policy measured.
fn eviction_table(eviction: Eviction, m: &crate::Measured) -> String {
    let main = find(&m.runs, Mode::Cache).map(|r| (eviction, r));
    let others = m.by_eviction.iter().map(|(e, r)| (*e, r));
    cache_table(
        "eviction",
        main.into_iter()
            .chain(others)
            .map(|(e, r)| (e.to_string(), r)),
    )
}

/// One line per cache run, named in the first column (`first` its heading).
fn cache_table<'a>(first: &str, rows: impl Iterator<Item = (String, &'a ModeRun)>) -> String {
    let mut t = Table::new([
        first,
        "cold batch ms (median)",
        "steady ms [min, max]",
        "cold GB/s loaded",
        "steady hit rate",
        "steady MB loaded per batch",
        "same output",
    ]);
    for (name, r) in rows {
        let st = steady_stats(r);
        let (cold_ms, cold) = r.cold_median();
        t.push([
            name,
            format!("{cold_ms:.3}"),
            median_range(&steady_summary(r), 1.0, 3),
            format!("{:.1}", cold.gb_per_s(cold_ms / 1e3)),
            format!("{:.1}%", st.hit_rate() * 100.0),
            format!(
                "{:.1}",
                st.bytes_loaded as f64 / steady(r).len() as f64 / 1e6
            ),
            (if r.identical { "yes" } else { "NO" }).to_string(),
        ]);
    }
    t.to_markdown()
}

/// Every workload's table, target lines and page-size table.
pub fn tables(meta: &Meta, workloads: &[Workload]) -> String {
    let mut md = String::new();
    for (name, page, m) in workloads {
        md += &format!(
            "\n## {name} (cache pages of {} KiB)\n\n{}\n{}\nThe cache by page size:\n\n{}",
            *page as f64 / 1024.0,
            table(&m.runs),
            targets(meta, *page, m),
            sweep_table(*page, m)
        );
        if !m.by_eviction.is_empty() {
            md += &format!(
                "\nThe cache by eviction policy (pages of {} KiB):\n\n{}",
                *page as f64 / 1024.0,
                eviction_table(meta.eviction, m)
            );
        }
    }
    md
}

/// Every batch of every run, one line each.
fn csv(meta: &Meta, workloads: &[Workload]) -> Res<String> {
    let mut t = Table::new([
        "workload",
        "mode",
        "page_bytes",
        "eviction",
        "batch",
        "ms",
        "hits",
        "misses",
        "evictions",
        "bytes_loaded",
        "pinned_gbps",
        "device",
        "driver",
        "seed",
    ]);
    let (device, driver) = match &meta.header.device {
        Some(d) => (d.describe(), d.driver()),
        None => ("-".into(), "-".into()),
    };
    for (name, page, m) in workloads {
        let main = (m.runs.iter().map(|r| (*page, meta.eviction, r)))
            .chain(m.sweep.iter().map(|(b, r)| (*b, meta.eviction, r)));
        let runs = main.chain(m.by_eviction.iter().map(|(e, r)| (*page, *e, r)));
        for (bytes, eviction, r) in runs {
            let cache = r.mode.uses_cache();
            for (b, ms) in r.ms.iter().enumerate() {
                let s = r.stats.get(b).copied().unwrap_or_default();
                t.push([
                    name.to_string(),
                    r.mode.name().to_string(),
                    (if r.mode == Mode::Cache {
                        bytes.to_string()
                    } else {
                        "-".into()
                    }),
                    (if cache {
                        eviction.to_string()
                    } else {
                        "-".into()
                    }),
                    (b + 1).to_string(),
                    format!("{ms:.4}"),
                    s.hits.to_string(),
                    s.misses.to_string(),
                    s.evictions.to_string(),
                    s.bytes_loaded.to_string(),
                    format!("{:.2}", meta.pinned_gbps),
                    device.clone(),
                    driver.clone(),
                    meta.seed.to_string(),
                ]);
            }
        }
    }
    Ok(t.to_csv()?)
}

/// The file a workload's plot goes to: `host_cache_<its name, in snake case>.svg`.
fn plot_file(name: &str) -> String {
    let slug: String = (name.to_lowercase().chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("host_cache_{slug}.svg")
}

/// A workload's batch times, one line per mode.
fn plot((name, _, m): &Workload) -> Res<String> {
    let series: Vec<Line> = (m.runs.iter())
        .map(|r| Line {
            label: r.mode.name().to_string(),
            points: r
                .ms
                .iter()
                .enumerate()
                .map(|(b, ms)| ((b + 1) as f64, *ms))
                .collect(),
        })
        .collect();
    let y_max = m
        .runs
        .iter()
        .flat_map(|r| r.ms.iter().copied())
        .fold(0.0, f64::max)
        * 1.05;
    let batches = m.runs.first().map_or(2, |r| r.ms.len()) as f64;
    Ok(LineChart {
        title: format!("{name}: batch time from a cold start"),
        x_desc: "batch".into(),
        y_desc: "ms".into(),
        x_range: 1.0..batches,
        y_range: 0.0..y_max.max(1e-3),
        references: Vec::new(),
        series,
        size: (900, 560),
    }
    .to_svg()?)
}

/// Writes `host_cache.md`, `host_cache.csv` and a plot per workload.
pub fn write(out: &OutDir, meta: &Meta, workloads: &[Workload]) -> Res<()> {
    let plots: Vec<String> = (workloads.iter())
        .map(|(name, _, _)| format!("[{name}]({})", plot_file(name)))
        .collect();
    let mut md = format!("# Data in host memory through the GPU-driven cache\n\nWritten by `host_cache_bench` (`examples/host-cache`); every batch: [host_cache.csv](host_cache.csv); each workload's batches: {}. Explained in [docs/host-cache.md](../docs/host-cache.md).\n\n", plots.join(", "));
    md += &meta.header.markdown();
    md += &format!(
        "- data: {:.2} GiB in pinned host memory; cache: {} MiB of device memory\n- pinned host-to-device copy rate, this run: {:.1} GB/s\n- {}; seed {}\n- cold batch: batch 1 from a cold start (empty cache, managed pages on the host), the median of {} cold starts; steady = median of the second half of the batches\n",
        meta.data_bytes as f64 / (1u64 << 30) as f64,
        meta.cache_bytes >> 20,
        meta.pinned_gbps,
        meta.args,
        meta.seed,
        crate::modes::COLD_STARTS
    );
    md += &tables(meta, workloads);
    out.write("host_cache.md", md)?;
    out.write("host_cache.csv", csv(meta, workloads)?)?;
    for w in workloads {
        out.write(&plot_file(w.0), plot(w)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_workload_plots_to_its_own_file() {
        assert_eq!(super::plot_file("row gather"), "host_cache_row_gather.svg");
        assert_eq!(
            super::plot_file("IVF list scan"),
            "host_cache_ivf_list_scan.svg"
        );
    }
}
