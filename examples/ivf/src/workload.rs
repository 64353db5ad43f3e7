//! What the IVF programs search: the clustered data set, the query batches they time, and
//! the index trained and built from the data on the GPU.
//!
//! - [`clustered`]: the data set every program generates, from a seed.
//! - [`Batches::aimed_at`]: a cold batch whose queries probe about a given share of the
//!   lists, and a warm batch of other queries over the lists the cold one probes
//!   ([`warm_batch`]), for the policy benchmark.
//! - [`near_random_clusters`]: a small batch near a few clusters drawn at random, for the
//!   latency benchmark.
//! - [`build_index`]: centroids trained on a sample, every vector assigned on the GPU, the
//!   lists uploaded into managed memory.
//! - [`recall`]: a search's recall against brute force.

use lookahead::Gpu;
use rand::rngs::StdRng;
use rand::Rng;
use rayon::prelude::*;

use crate::cpu;
use crate::data::{Clusters, Vectors};
use crate::gpu::{assign_on_gpu, GpuIndex, SearchOutcome};
use crate::index::IvfLayout;

/// The programs' data set: `clusters` Gaussian clusters of `dim` floats (centres uniform in
/// `[-4, 4]` per coordinate, points at standard deviation 1 around them) from `seed`.
pub fn clustered(dim: usize, clusters: usize, seed: u64) -> Clusters {
    Clusters {
        dim,
        clusters,
        spread: 4.0,
        sigma: 1.0,
        seed,
    }
}

/// The clusters that queries aimed at `percent` of `nlist` lists come from, `nprobe` lists
/// per query: `percent * nlist / nprobe` of them (1 to `nlist`), spread evenly over the
/// cluster numbers.
pub fn hot_clusters(nlist: usize, nprobe: usize, percent: f64) -> Vec<usize> {
    let hot = ((nlist as f64 * percent / 100.0 / nprobe as f64).round() as usize).clamp(1, nlist);
    (0..hot).map(|i| (i * nlist) / hot).collect()
}

/// The two batches of one probed fraction: cold queries from its hot clusters, and warm
/// ones whose lists the cold batch probes.
pub struct Batches {
    /// Queries near the hot clusters, searched after every list is moved to the host.
    pub cold: Vectors,
    /// As many other queries, each probing only lists that `cold` probes.
    pub warm: Vectors,
}

impl Batches {
    /// The batches of the `round`-th fraction a benchmark measures, aimed at `percent` of
    /// the lists of `layout` (built from `spec`'s data) with `nprobe` probes per query:
    /// `queries_per_cluster` cold queries per hot cluster ([`hot_clusters`]; random stream
    /// `100 + 2 round`), and as many warm ones ([`warm_batch`], from stream
    /// `101 + 2 round`). Each round's streams are its own, so every fraction gets fresh
    /// queries and a run is repeatable.
    pub fn aimed_at(
        spec: &Clusters,
        layout: &IvfLayout,
        percent: f64,
        nprobe: usize,
        queries_per_cluster: usize,
        round: u64,
    ) -> Batches {
        let hot = hot_clusters(spec.clusters, nprobe, percent);
        let cold = spec.points(hot.len() * queries_per_cluster, 100 + round * 2, Some(&hot));
        let warm = warm_batch(spec, layout, &cold, &hot, nprobe, 101 + round * 2);
        Batches { cold, warm }
    }
}

/// A second batch of as many queries as `first`, near the same clusters, whose `nprobe`
/// lists are all among the lists `first` probes: different queries over data the first
/// batch made warm. Candidates are drawn in rounds and kept when they qualify (the lists
/// are found on the CPU with the same arithmetic as the coarse kernel).
pub fn warm_batch(
    spec: &Clusters,
    layout: &IvfLayout,
    first: &Vectors,
    hot: &[usize],
    nprobe: usize,
    stream: u64,
) -> Vectors {
    let dim = layout.dim;
    let lists_of = |q: &[f32]| cpu::nearest(&layout.centroids, dim, q, nprobe);
    let mut probed = vec![false; layout.nlist()];
    for l in (0..first.len())
        .into_par_iter()
        .flat_map_iter(|i| lists_of(first.row(i)))
        .collect::<Vec<u32>>()
    {
        probed[l as usize] = true;
    }
    let mut out = Vec::with_capacity(first.data.len());
    for round in 0..64 {
        let candidates = spec.points(first.len(), stream + 1000 * round, Some(hot));
        let keep: Vec<usize> = (0..candidates.len())
            .into_par_iter()
            .filter(|&i| {
                lists_of(candidates.row(i))
                    .iter()
                    .all(|&l| probed[l as usize])
            })
            .collect();
        for i in keep {
            if out.len() < first.data.len() {
                out.extend_from_slice(candidates.row(i));
            }
        }
        if out.len() == first.data.len() {
            break;
        }
    }
    // Top up with the first batch's own queries if too few candidates qualified.
    let mut i = 0;
    while out.len() < first.data.len() {
        out.extend_from_slice(first.row(i));
        i += 1;
    }
    Vectors { dim, data: out }
}

/// `n` queries near 4 of `spec`'s clusters drawn with `rng`, from random stream
/// `1000 + stream`: a small batch whose probes share a few lists, as a stream of user
/// queries on related topics would.
pub fn near_random_clusters(spec: &Clusters, rng: &mut StdRng, n: usize, stream: u64) -> Vectors {
    let hot: Vec<usize> = (0..4).map(|_| rng.gen_range(0..spec.clusters)).collect();
    spec.points(n, 1000 + stream, Some(&hot))
}

/// An index of `data` in managed memory on `gpu`: `nlist` centroids trained on `sample`
/// with `iterations` rounds of k-means from `seed` (each round's assignment on the GPU),
/// every vector of `data` assigned to its nearest, and the lists uploaded.
pub fn build_index(
    gpu: &Gpu,
    data: &Vectors,
    sample: &Vectors,
    nlist: usize,
    iterations: usize,
    seed: u64,
) -> lookahead::Result<GpuIndex> {
    let centroids = cpu::kmeans_with(sample, nlist, iterations, seed, |c, v| {
        assign_on_gpu(gpu, c, v)
    })?;
    let assign = assign_on_gpu(gpu, &centroids, data)?;
    let layout = IvfLayout::from_assignment(data.dim, centroids, &assign);
    GpuIndex::new(gpu, layout, data)
}

/// A benchmark's index: `gib` GiB of `dim`-float vectors drawn from [`clustered`] (`nlist`
/// clusters, `seed`), `nlist` lists trained on a sample of 32 per list ([`build_index`], 6
/// rounds). Refused with [`lookahead::Error::OutOfMemory`] (naming `during`) when it would
/// not fit in the GPU's free memory with [`crate::gpu::INDEX_HEADROOM`] to spare.
pub fn clustered_index(
    gpu: &Gpu,
    gib: f64,
    dim: usize,
    nlist: usize,
    seed: u64,
    during: &'static str,
) -> lookahead::Result<(Clusters, GpuIndex)> {
    let n = crate::gpu::vectors_that_fit(gpu, gib, dim, during)?;
    let spec = clustered(dim, nlist, seed);
    let data = spec.points(n, 0, None);
    let sample = spec.points(nlist * 32, 1, None);
    let index = build_index(gpu, &data, &sample, nlist, 6, seed)?;
    println!(
        "index: {} vectors x {dim} dims in {nlist} lists",
        data.len()
    );
    Ok((spec, index))
}

/// Recall@K (K = `ivf_kernels::K`) of the first `n` queries' neighbours in `out` against
/// brute force over `data`.
pub fn recall(data: &Vectors, queries: &Vectors, out: &SearchOutcome, n: usize) -> f64 {
    let k = ivf_kernels::K;
    let n = n.min(queries.len());
    let found: Vec<Vec<cpu::Hit>> = (0..n)
        .map(|q| {
            (0..k)
                .map(|j| (out.dist[q * k + j], out.ids[q * k + j]))
                .collect()
        })
        .collect();
    let exact: Vec<Vec<cpu::Hit>> = (0..n)
        .map(|q| cpu::brute_force(data, queries.row(q), k))
        .collect();
    cpu::recall(&found, &exact, k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn small() -> (Clusters, IvfLayout) {
        let spec = clustered(8, 16, 3);
        let data = spec.points(2000, 0, None);
        let centroids = cpu::kmeans(&data, 16, 4, 3);
        let assign = cpu::assign(&centroids, &data);
        (spec, IvfLayout::from_assignment(8, centroids, &assign))
    }

    #[test]
    fn the_warm_batch_probes_only_lists_the_cold_batch_probes() {
        let (spec, layout) = small();
        let hot = [0, 5];
        let cold = spec.points(20, 100, Some(&hot));
        let warm = warm_batch(&spec, &layout, &cold, &hot, 2, 101);
        assert_eq!(warm.data.len(), cold.data.len());
        let lists = |q: &[f32]| cpu::nearest(&layout.centroids, 8, q, 2);
        let probed: Vec<u32> = (0..cold.len()).flat_map(|i| lists(cold.row(i))).collect();
        for i in 0..warm.len() {
            assert!(lists(warm.row(i)).iter().all(|l| probed.contains(l)));
        }
    }

    #[test]
    fn hot_clusters_cover_the_aimed_share_of_the_lists() {
        // 12% of 2048 lists at 2 probes a query: 123 clusters, evenly spread.
        let hot = hot_clusters(2048, 2, 12.0);
        assert_eq!(hot.len(), 123);
        assert_eq!((hot[0], hot[1], hot[122]), (0, 16, 2031));
        assert_eq!(hot_clusters(2048, 2, 0.001), [0], "at least one");
        assert_eq!(hot_clusters(16, 1, 100.0), (0..16).collect::<Vec<_>>());
    }

    #[test]
    fn aimed_batches_are_the_cold_points_and_their_warm_batch() {
        let (spec, layout) = small();
        let b = Batches::aimed_at(&spec, &layout, 25.0, 2, 3, 1);
        let hot = hot_clusters(16, 2, 25.0);
        assert_eq!(b.cold, spec.points(hot.len() * 3, 102, Some(&hot)));
        assert_eq!(b.warm, warm_batch(&spec, &layout, &b.cold, &hot, 2, 103));
    }

    #[test]
    fn small_batches_come_from_four_clusters() {
        let spec = clustered(4, 64, 7);
        let mut rng = StdRng::seed_from_u64(1);
        let q = near_random_clusters(&spec, &mut rng, 16, 2);
        assert_eq!((q.len(), q.dim), (16, 4));
        let mut again = StdRng::seed_from_u64(1);
        assert_eq!(q, near_random_clusters(&spec, &mut again, 16, 2));
    }
}
