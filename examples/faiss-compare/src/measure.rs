//! Our side, on the data set FAISS's side reads: the index build, resident batch latency
//! (launched and as a graph), resident throughput, and cold and warm searches under our
//! Unified Memory policies, each timed on the host around the call as `faiss_side` times
//! FAISS's `search`, each checked for the neighbours it must find.

use std::time::Instant;

use lookahead::Gpu;
use lookahead_ivf::cpu;
use lookahead_ivf::data::Vectors;
use lookahead_ivf::gpu::{assign_on_gpu, GpuIndex, ScanMethod, SearchParams, Submit};
use lookahead_ivf::index::IvfLayout;
use lookahead_uvm::{Policy, UvmRuntime};

use crate::export::DataSet;
use crate::rows::Row;
use crate::Res;

/// Batches before the timed ones, as `faiss_side` warms up.
pub const WARMUP_BATCHES: usize = 20;

/// Latency batch sizes, as `faiss_side` measures them.
pub const BATCH_SIZES: [usize; 4] = [1, 4, 16, 64];

/// Query counts of the throughput searches.
pub const THROUGHPUT_QUERIES: [usize; 2] = [4096, 65536];

/// The policies measured cold and warm: the GPU-driven pull (our fastest from host memory),
/// `Auto`'s choice, and plain page faults (what FAISS's Unified Memory mode does).
pub const COLD_POLICIES: [Policy; 3] = [Policy::GpuPull, Policy::Auto, Policy::Faults];

/// A row of ours from a set of timings (seconds).
pub fn row(measure: &str, variant: &str, queries: usize, secs: &[f64], recall10: f64) -> Row {
    let mut s = secs.to_vec();
    s.sort_by(f64::total_cmp);
    // Nearest rank, as faiss_side's quantile.
    let q = |p: f64| s[((p * (s.len() - 1) as f64) + 0.5) as usize];
    let (p50, p99) = if s.is_empty() {
        (0.0, 0.0)
    } else {
        (q(0.5), q(0.99))
    };
    Row {
        system: "lookahead".into(),
        measure: measure.into(),
        variant: variant.into(),
        queries: queries as u64,
        p50_ms: p50 * 1e3,
        p99_ms: p99 * 1e3,
        qps: if p50 > 0.0 { queries as f64 / p50 } else { 0.0 },
        recall10,
        seconds: p50,
    }
}

/// The `i`-th batch of `n` queries of the pool: `faiss_side`'s formula, so both sides time
/// the same queries in the same order.
pub fn pool_batch(pool: &Vectors, i: usize, n: usize) -> Vectors {
    let start = (i * n) % (pool.len() - n).max(1);
    Vectors {
        dim: pool.dim,
        data: pool.data[start * pool.dim..(start + n) * pool.dim].to_vec(),
    }
}

/// Our build, timed in its two steps as FAISS's: k-means on a sample (`iterations` rounds,
/// assignments on the GPU), then every vector assigned and the lists uploaded.
pub fn build(
    gpu: &Gpu,
    base: &Vectors,
    sample: &Vectors,
    nlist: usize,
    seed: u64,
) -> Res<(GpuIndex, Vec<Row>)> {
    let t = Instant::now();
    let centroids = cpu::kmeans_with(sample, nlist, 8, seed, |c, v| assign_on_gpu(gpu, c, v))?;
    let train = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let assign = assign_on_gpu(gpu, &centroids, base)?;
    let layout = IvfLayout::from_assignment(base.dim, centroids, &assign);
    let index = GpuIndex::new(gpu, layout, base)?;
    let add = t.elapsed().as_secs_f64();
    let rows = vec![
        row("build", "own_train", base.len(), &[train], 0.0),
        row("build", "own_train_add", base.len(), &[train + add], 0.0),
    ];
    Ok((index, rows))
}

/// What a measurement needs.
pub struct Ours<'a> {
    /// The index, lists in managed memory.
    pub index: &'a mut GpuIndex,
    /// The Unified Memory machinery the policies use.
    pub rt: &'a UvmRuntime,
    /// The data set.
    pub ds: &'a DataSet,
    /// Timed batches per latency row.
    pub batches: usize,
    /// Repetitions of each throughput, cold and warm search.
    pub reps: usize,
}

impl Ours<'_> {
    fn params(&self, policy: Policy) -> SearchParams {
        SearchParams {
            nprobe: self.ds.nprobe,
            policy,
            expected_passes: 2.0,
            max_blocks: 0,
            pull_copy_every: 0,
            scan: ScanMethod::Auto,
        }
    }

    /// Resident batches back to back, launched and as a graph, each batch's neighbours
    /// checked against the full search of the same queries.
    pub fn latency(&mut self) -> Res<Vec<Row>> {
        self.index.lists_mut().make_resident()?;
        let max = BATCH_SIZES.iter().copied().max().unwrap_or(1);
        let mut batch = self.index.batch_search(max, self.params(Policy::Faults))?;
        let mut rows = Vec::new();
        for n in BATCH_SIZES {
            let qs: Vec<Vectors> = (0..WARMUP_BATCHES + self.batches)
                .map(|i| pool_batch(&self.ds.queries, i, n))
                .collect();
            let want: Vec<Vec<u32>> = qs
                .iter()
                .map(|q| {
                    Ok(self
                        .index
                        .search(q, self.params(Policy::Faults), self.rt)?
                        .ids)
                })
                .collect::<Res<_>>()?;
            for (submit, name) in [(Submit::Launches, "launched"), (Submit::Graph, "graph")] {
                let mut secs = Vec::with_capacity(self.batches);
                for (i, q) in qs.iter().enumerate() {
                    let t = Instant::now();
                    let (_, ids) = self.index.search_batch(&mut batch, q, submit)?;
                    let s = t.elapsed().as_secs_f64();
                    if ids != want[i] {
                        return Err(format!(
                            "{name} batch {i} of {n}: not the full search's neighbours"
                        )
                        .into());
                    }
                    if i >= WARMUP_BATCHES {
                        secs.push(s);
                    }
                }
                rows.push(row("latency", name, n, &secs, 0.0));
            }
        }
        Ok(rows)
    }

    /// Resident searches of the pool's first 4,096 and 65,536 queries, with recall@10 of
    /// the first queries against the exact neighbours.
    pub fn throughput(&mut self) -> Res<Vec<Row>> {
        self.index.lists_mut().make_resident()?;
        let mut rows = Vec::new();
        for n in THROUGHPUT_QUERIES {
            let q = pool_batch(&self.ds.queries, 0, n.min(self.ds.queries.len()));
            let p = self.params(Policy::Faults);
            let first = self.index.search(&q, p, self.rt)?;
            let mut secs = Vec::with_capacity(self.reps);
            for _ in 0..self.reps {
                let t = Instant::now();
                let out = self.index.search(&q, p, self.rt)?;
                secs.push(t.elapsed().as_secs_f64());
                if out.ids != first.ids {
                    return Err(format!("{n} queries: repeated searches differ").into());
                }
            }
            let recall = recall_at_10(&first.ids, &self.ds.exact, ivf_kernels::K);
            rows.push(row("throughput", "resident", q.len(), &secs, recall));
        }
        Ok(rows)
    }

    /// Each probed fraction under each policy: every list page on the host, the cold batch,
    /// then the warm batch; set-up (`prepare`: the mapping, the pull's cache) is not timed,
    /// as FAISS's index is built before it is searched. Both batches must find the resident
    /// search's neighbours.
    pub fn cold_and_warm(&mut self) -> Res<Vec<Row>> {
        let mut rows = Vec::new();
        for (name, b) in &self.ds.cold_sets {
            self.index.lists_mut().make_resident()?;
            let p = self.params(Policy::Faults);
            let want = (
                self.index.search(&b.cold, p, self.rt)?.ids,
                self.index.search(&b.warm, p, self.rt)?.ids,
            );
            for policy in COLD_POLICIES {
                let p = self.params(policy);
                let (mut cold, mut warm) = (Vec::new(), Vec::new());
                for _ in 0..self.reps {
                    self.index.lists_mut().prepare(policy)?;
                    self.index.lists_mut().evict_to_host(self.rt)?;
                    let t = Instant::now();
                    let c = self.index.search(&b.cold, p, self.rt)?;
                    cold.push(t.elapsed().as_secs_f64());
                    let t = Instant::now();
                    let w = self.index.search(&b.warm, p, self.rt)?;
                    warm.push(t.elapsed().as_secs_f64());
                    if (c.ids.as_slice(), w.ids.as_slice())
                        != (want.0.as_slice(), want.1.as_slice())
                    {
                        return Err(
                            format!("{name} under {policy}: not the resident neighbours").into(),
                        );
                    }
                }
                let v = format!("{name}:{policy}");
                rows.push(row("unified_cold", &v, b.cold.len(), &cold, 0.0));
                rows.push(row("unified_warm", &v, b.warm.len(), &warm, 0.0));
            }
        }
        Ok(rows)
    }
}

/// Recall@10: of each query's first 10 ids in `ids` (`k` per query), the share among its
/// exact 10 nearest, over the queries `exact` holds.
pub fn recall_at_10(ids: &[u32], exact: &[Vec<u32>], k: usize) -> f64 {
    // `cpu::recall` compares ids only: the distances of these hits are never read.
    let hits = |row: &[u32]| -> Vec<cpu::Hit> { row.iter().map(|&id| (0.0, id)).collect() };
    let n = exact.len().min(ids.len() / k.max(1));
    let found: Vec<_> = (0..n).map(|q| hits(&ids[q * k..(q + 1) * k])).collect();
    let truth: Vec<_> = exact[..n].iter().map(|e| hits(e)).collect();
    cpu::recall(&found, &truth, 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank_as_faiss_side_takes_them() {
        let secs: Vec<f64> = (1..=100).map(|i| i as f64 / 1e3).collect();
        let r = row("latency", "graph", 4, &secs, 0.0);
        // round(0.5 * 99) = 50 -> the 51st value; round(0.99 * 99) = 98 -> the 99th.
        assert_eq!((r.p50_ms, r.p99_ms), (51.0, 99.0));
        assert!((r.qps - 4.0 / 0.051).abs() < 1e-9);
    }

    #[test]
    fn pool_batches_follow_faiss_sides_formula() {
        let pool = Vectors {
            dim: 2,
            data: (0..20).map(|i| i as f32).collect(),
        };
        // 10 queries, batches of 4: starts (i * 4) % 6 = 0, 4, 2, 0.
        let starts: Vec<f32> = (0..4)
            .map(|i| pool_batch(&pool, i, 4).data[0] / 2.0)
            .collect();
        assert_eq!(starts, vec![0.0, 4.0, 2.0, 0.0]);
    }

    #[test]
    fn recall_counts_only_the_exact_ten_and_catches_a_wrong_id() {
        let exact = vec![(0..10).collect::<Vec<u32>>()];
        let mut ids: Vec<u32> = (0..10).rev().collect();
        assert_eq!(recall_at_10(&ids, &exact, 10), 1.0);
        ids[3] = 99;
        assert_eq!(recall_at_10(&ids, &exact, 10), 0.9);
    }
}
