//! The measurements: the index made resident, then per batch both scan kernels and the
//! read of as many bytes.

use lookahead::Gpu;
use lookahead_ivf::gpu::{
    time_read, vectors_that_fit, GpuIndex, ScanKernel, SearchOutcome, SearchParams,
};
use lookahead_ivf::workload::{self, Batches};
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig, UvmRuntime};
use rand::{rngs::StdRng, SeedableRng};

use crate::{Args, Res};

/// Medians of one kernel's searches of a batch, seconds.
pub struct Kernel {
    pub scan_s: f64,
    pub gpu_s: f64,
}

/// One batch, both kernels, and the read of as many bytes.
pub struct Row {
    pub batch: String,
    pub queries: usize,
    /// Bytes the pairs read (each pair its list's vectors).
    pub bytes: u64,
    /// (pair, vector) distances computed.
    pub distances: u64,
    pub read_s: f64,
    pub warp: Kernel,
    pub staged: Kernel,
    /// Whether every search, both kernels, found the first search's neighbours.
    pub same: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Every row: the small batches, then the large warm one.
pub fn run(gpu: &Gpu, args: &Args) -> Res<Vec<Row>> {
    let n = vectors_that_fit(gpu, args.gib, args.dim, "ivf_scan")?;
    let spec = workload::clustered(args.dim, args.nlist, args.seed);
    let data = spec.points(n, 0, None);
    let sample = spec.points(args.nlist * 32, 1, None);
    let mut index = workload::build_index(gpu, &data, &sample, args.nlist, 6, args.seed)?;
    index.lists_mut().make_resident()?;
    let mach = UvmRuntime::new(
        gpu,
        args.nlist,
        MachineProfile::cached_or_probe(gpu)?,
        ServiceConfig::default(),
    )?;
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0x5ca9);
    let mut batches: Vec<(String, lookahead_ivf::data::Vectors)> = args
        .sizes
        .iter()
        .map(|&s| {
            let q = workload::near_random_clusters(&spec, &mut rng, s, args.seed + s as u64);
            (format!("{s} near 4 clusters"), q)
        })
        .collect();
    if !args.no_warm {
        let b = Batches::aimed_at(
            &spec,
            index.layout(),
            args.warm_percent,
            args.nprobe,
            args.per_cluster,
            0,
        );
        let name = format!(
            "warm, {}% of lists, {} per cluster",
            args.warm_percent, args.per_cluster
        );
        batches.push((name, b.warm));
    }
    let mut rows = Vec::new();
    for (name, queries) in batches {
        let row = measure_batch(gpu, &mut index, &mach, args, name, &queries)?;
        println!("{}", crate::report::summary(&row));
        rows.push(row);
    }
    Ok(rows)
}

fn params(args: &Args, scan: ScanKernel) -> SearchParams {
    SearchParams {
        nprobe: args.nprobe,
        policy: Policy::Faults,
        expected_passes: 2.0,
        max_blocks: 0,
        pull_copy_every: 0,
        scan,
    }
}

/// One batch: a warm-up and `reps` searches with each kernel, alternating, then the read.
fn measure_batch(
    gpu: &Gpu,
    index: &mut GpuIndex,
    mach: &UvmRuntime,
    args: &Args,
    batch: String,
    queries: &lookahead_ivf::data::Vectors,
) -> Res<Row> {
    let first = index.search(queries, params(args, ScanKernel::Warp), mach)?;
    let mut same = true;
    let mut times = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    for rep in 0..=args.reps {
        for (k, scan) in [ScanKernel::Warp, ScanKernel::Staged]
            .into_iter()
            .enumerate()
        {
            let out = index.search(queries, params(args, scan), mach)?;
            same &= out.ids == first.ids && out.dist == first.dist;
            if rep > 0 {
                times[k].0.push(out.scan_seconds);
                times[k].1.push(out.gpu_seconds);
            }
        }
    }
    let (bytes, distances) = scanned(index, &first, args.dim);
    let read_s = median(time_read(gpu, bytes as usize, args.reps)?);
    let [warp, staged] = times.map(|(scan, whole)| Kernel {
        scan_s: median(scan),
        gpu_s: median(whole),
    });
    Ok(Row {
        batch,
        queries: queries.len(),
        bytes,
        distances,
        read_s,
        warp,
        staged,
        same,
    })
}

/// The bytes a search's pairs read and the distances they computed.
fn scanned(index: &GpuIndex, out: &SearchOutcome, dim: usize) -> (u64, u64) {
    let layout = index.layout();
    let distances: u64 = (out.list_queries.iter().enumerate())
        .map(|(l, &pairs)| pairs as u64 * layout.list_len(l) as u64)
        .sum();
    (distances * dim as u64 * 4, distances)
}
