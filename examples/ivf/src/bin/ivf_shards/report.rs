//! What the run measured, and the Markdown, CSV and short table it is written as.

use lookahead_bench::table::{Align, Table};
use lookahead_ivf::shard::merge::bytes_per_rank;

use crate::build::Size;

/// A batch's `K` nearest per query: distances and ids.
pub(crate) type Answer = (Vec<f32>, Vec<u32>);

/// A cold batch: every shard's copy empty.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cold {
    /// Wall seconds, queries handed over to merged answer.
    pub seconds: f64,
    /// Bytes of the probed lists, all shards.
    pub needed_bytes: u64,
    /// The pinned copy rate of every GPU copying at once, summed, GB/s.
    pub pinned_sum: f64,
}

impl Cold {
    /// Needed bytes over the batch's time, GB/s.
    pub fn gbps(&self) -> f64 {
        self.needed_bytes as f64 / self.seconds / 1e9
    }

    /// That as a share of the summed pinned rate.
    pub fn of_pinned(&self) -> f64 {
        self.gbps() / self.pinned_sum
    }
}

/// One configuration's batches.
#[derive(Debug, Clone, Default)]
pub(crate) struct Measured {
    /// What ran: `one GPU`, `NCCL all-gather, one process`, ...
    pub mode: String,
    /// GPUs (shards).
    pub gpus: usize,
    /// The cold batch, where one ran.
    pub cold: Option<Cold>,
    /// Warm batches' wall seconds.
    pub warm: Vec<f64>,
    /// Warm batches' gather seconds (collective or peer copies, with waits).
    pub gather: Vec<f64>,
    /// Warm batches' host merge seconds.
    pub host_merge: Vec<f64>,
    /// Batches compared with the one-GPU answer, and how many were the same.
    pub checked: usize,
    /// See `checked`.
    pub same: usize,
    /// One all-gather of a batch's results alone, seconds.
    pub all_gather_alone: Option<f64>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        f64::NAN
    } else {
        s[s.len() / 2]
    }
}

impl Measured {
    /// Queries a second over the warm batches (median batch).
    pub fn qps(&self, queries: usize) -> f64 {
        queries as f64 / median(&self.warm)
    }
}

/// Everything measured for one index size.
#[derive(Debug, Default)]
pub(crate) struct SizeReport {
    pub size: Option<Size>,
    pub vectors: usize,
    pub bytes: u64,
    /// Bytes per shard, and the largest over the mean.
    pub shares: Vec<u64>,
    pub imbalance: f64,
    /// Seconds to fill and to register the host memory (this process).
    pub fill_register: (f64, f64),
    /// Pinned GB/s of each GPU alone and while all copy.
    pub pinned_alone: Vec<f64>,
    pub pinned_together: Vec<f64>,
    /// How the one GPU read the whole index.
    pub one_gpu_reads: String,
    /// Every configuration, or why it failed.
    pub runs: Vec<Result<Measured, String>>,
    pub recall: Option<f64>,
}

/// The columns of a size's table.
const COLUMNS: [&str; 12] = [
    "index",
    "configuration",
    "GPUs",
    "cold batch s",
    "cold GB/s",
    "of summed pinned",
    "warm batch ms",
    "warm queries/s",
    "vs one GPU",
    "gather ms",
    "merge ms",
    "same top-k",
];

/// A cell: `x.yz` or `-`.
fn cell(v: Option<f64>, decimals: usize) -> String {
    v.filter(|x| x.is_finite())
        .map_or("-".into(), |x| format!("{x:.decimals$}"))
}

impl SizeReport {
    /// The one-GPU configuration's warm throughput, the baseline.
    fn one_gpu_qps(&self) -> Option<f64> {
        let q = self.size?.queries;
        self.runs
            .iter()
            .flatten()
            .find(|m| m.gpus == 1)
            .map(|m| m.qps(q))
    }

    /// Each configuration's cells, in the columns of [`SizeReport::table`].
    fn rows(&self) -> Vec<Vec<String>> {
        let q = self.size.map_or(0, |s| s.queries);
        let base = self.one_gpu_qps();
        let name = self.size.map_or("-", |s| s.name).to_string();
        self.runs
            .iter()
            .map(|run| match run {
                Ok(m) => vec![
                    name.clone(),
                    m.mode.clone(),
                    m.gpus.to_string(),
                    cell(m.cold.map(|c| c.seconds), 3),
                    cell(m.cold.map(|c| c.gbps()), 1),
                    m.cold
                        .map_or("-".into(), |c| format!("{:.0}%", 100.0 * c.of_pinned())),
                    cell(Some(median(&m.warm) * 1e3), 2),
                    cell(Some(m.qps(q)), 0),
                    cell(base.map(|b| m.qps(q) / b), 2),
                    cell(Some(median(&m.gather) * 1e3), 3),
                    cell(Some(median(&m.host_merge) * 1e3), 3),
                    format!("{}/{}", m.same, m.checked),
                ],
                Err(e) => {
                    let mut r = vec![name.clone(), format!("failed: {e}")];
                    r.resize(COLUMNS.len(), "-".into());
                    r
                }
            })
            .collect()
    }

    /// The table of every configuration.
    pub fn table(&self) -> Table {
        let mut t = Table::new(COLUMNS);
        for c in 2..COLUMNS.len() {
            t = t.align(c, Align::Right);
        }
        for row in self.rows() {
            t.push(row);
        }
        t
    }

    /// The notes under the table: sizes, shares, rates, recall, the merge's bytes and time.
    pub fn notes(&self) -> String {
        let Some(size) = self.size else {
            return String::new();
        };
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let mut s = format!(
            "- {} index: {:.1} GiB of lists ({} vectors of {} bytes, {} lists), in host memory \
             (filled in {:.1} s, registered in {:.1} s); a batch is {} queries x {} probes\n",
            size.name,
            gib(self.bytes),
            self.vectors,
            self.bytes / self.vectors.max(1) as u64,
            size.nlist,
            self.fill_register.0,
            self.fill_register.1,
            size.queries,
            size.nprobe
        );
        let shares: Vec<String> = self
            .shares
            .iter()
            .map(|b| format!("{:.2} GiB", gib(*b)))
            .collect();
        s += &format!(
            "- shards by bytes: {} (largest {:.4}x the mean)\n",
            shares.join(", "),
            self.imbalance
        );
        s += &format!(
            "- pinned host-to-device GB/s, each GPU alone: {}; all at once: {} = {:.1} summed\n",
            list(&self.pinned_alone, ", "),
            list(&self.pinned_together, " + "),
            self.pinned_together.iter().sum::<f64>()
        );
        s += &format!("- one GPU reads the whole index: {}\n", self.one_gpu_reads);
        if let Some(r) = self.recall {
            s += &format!("- recall@10 of the one-GPU answer against brute force: {r:.4}\n");
        }
        s += &self.merge_notes(size);
        s
    }

    fn merge_notes(&self, size: Size) -> String {
        let mut s = String::new();
        let per_rank = bytes_per_rank(size.queries);
        for m in self.runs.iter().flatten() {
            if let Some(t) = m.all_gather_alone {
                s += &format!(
                    "- {}: one batch's merge moves {} bytes a rank ({} queries x 10 x (4 + 4)), \
                     {} ranks; an all-gather of them alone takes {:.1} us, the host merge {:.1} us\n",
                    m.mode,
                    per_rank,
                    size.queries,
                    m.gpus,
                    t * 1e6,
                    median(&m.host_merge) * 1e6
                );
            }
        }
        s
    }
}

fn list(v: &[f64], sep: &str) -> String {
    let parts: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
    parts.join(sep)
}

/// The Markdown file: what ran on what, the table of each size, and its notes.
pub(crate) fn document(
    header: &lookahead_bench::header::RunHeader,
    set: &lookahead_multi::GpuSet,
    topology: &lookahead_multi::Topology,
    peers: usize,
    peer_gbps: Option<f64>,
    reports: &[SizeReport],
) -> crate::Res<String> {
    let mut md = String::from("# The IVF search sharded over several GPUs\n\n");
    md += "Written by `ivf_shards` (`examples/ivf/src/bin/ivf_shards`); explained in \
           [docs/multi-gpu.md](../docs/multi-gpu.md). Every batch's answer is compared bit \
           for bit with one GPU's search of the whole index (`same top-k`).\n\n";
    md += &header.markdown();
    for d in &topology.devices {
        md += &format!("- GPU {}: {} ({})\n", d.position, d.name, d.pci_bus_id);
    }
    md += &format!(
        "- GPUs of the run: {}; peer access enabled on {peers} ordered pairs\n",
        set.len()
    );
    for line in topology.summary().lines() {
        md += &format!("- {line}\n");
    }
    if let Some(g) = peer_gbps {
        md += &format!("- peer copy GPU 1 -> GPU 0 (cuMemcpyPeerAsync, 1 GiB): {g:.1} GB/s\n");
    }
    md += &match lookahead_multi::nccl::version() {
        Ok((a, b, c)) => format!("- NCCL {a}.{b}.{c}\n"),
        Err(e) => format!("- NCCL: {e}\n"),
    };
    md += "- cold: every shard's device copy empty, the lists read over each GPU's own host \
           link; GB/s = bytes of the probed lists over the batch's wall time; warm: the copies \
           full, median of the batches; gather: the merge's collective or copies, with the \
           wait for the slowest shard; merge: the host's merge of the gathered lists\n\n";
    for r in reports {
        md += &r.table().to_markdown();
        md += "\n";
        md += &r.notes();
        md += "\n";
    }
    Ok(md)
}

/// The few lines printed last: each configuration's cold share, warm speed-up and check.
pub(crate) fn short_table(reports: &[SizeReport]) -> String {
    let mut t = Table::new([
        "index",
        "configuration",
        "cold of pinned",
        "warm q/s",
        "vs 1 GPU",
        "same",
    ]);
    for c in 2..6 {
        t = t.align(c, Align::Right);
    }
    for r in reports {
        for row in r.rows() {
            t.push([
                row[0].clone(),
                row[1].clone(),
                row[5].clone(),
                row[7].clone(),
                row[8].clone(),
                row[11].clone(),
            ]);
        }
        if let Some(recall) = r.recall {
            t.push([
                r.size.map_or("-", |s| s.name).to_string(),
                format!("recall@10 {recall:.4}"),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
    }
    t.to_markdown()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size() -> Size {
        Size {
            name: "small",
            gib: 1.0,
            nlist: 64,
            queries: 1000,
            nprobe: 8,
        }
    }

    fn run(mode: &str, gpus: usize, warm_s: f64, cold: Option<Cold>) -> Measured {
        Measured {
            mode: mode.into(),
            gpus,
            cold,
            warm: vec![warm_s * 2.0, warm_s, warm_s * 0.5],
            gather: vec![1e-4; 3],
            host_merge: vec![2e-5; 3],
            checked: 4,
            same: 4,
            all_gather_alone: (gpus > 1).then_some(3e-5),
        }
    }

    #[test]
    fn rows_give_throughput_against_one_gpu_and_cold_against_pinned() {
        let cold = Cold {
            seconds: 0.5,
            needed_bytes: 45_000_000_000,
            pinned_sum: 100.0,
        };
        let report = SizeReport {
            size: Some(size()),
            vectors: 10,
            bytes: 5120,
            runs: vec![
                Ok(run("one GPU", 1, 0.1, None)),
                Ok(run("NCCL", 2, 0.05, Some(cold))),
                Err("rank 1 failed: exited with status 3".into()),
            ],
            ..Default::default()
        };
        let rows = report.rows();
        // Median warm batch 0.1 s for 1000 queries: 10000 q/s; half the time: 2.00x.
        assert_eq!(rows[0][7], "10000");
        assert_eq!(rows[1][8], "2.00");
        assert_eq!(rows[1][4], "90.0");
        assert_eq!(rows[1][5], "90%");
        assert_eq!(rows[1][11], "4/4");
        assert!(rows[2][1].contains("rank 1 failed"), "{:?}", rows[2]);
        assert_eq!(rows[2].len(), COLUMNS.len());
        let notes = report.notes();
        assert!(notes.contains("moves 80000 bytes a rank"), "{notes}");
        let short = short_table(std::slice::from_ref(&report));
        assert!(short.contains("| small | NCCL |"), "{short}");
    }
}
