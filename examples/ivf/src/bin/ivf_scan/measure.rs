//! The measurements: the index made resident, then per batch the searches and the read of
//! as many bytes.

use lookahead::Gpu;
use lookahead_bench::stats::median;
use lookahead_ivf::data::Vectors;
use lookahead_ivf::gpu::{time_read, GpuIndex, ScanMethod, SearchOutcome, SearchParams};
use lookahead_ivf::workload::{self, Batches};
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig, UvmRuntime};
use rand::{rngs::StdRng, SeedableRng};

use crate::{Args, Res};

/// One batch: its searches' medians and the read of as many bytes.
pub struct Row {
    pub batch: String,
    /// The scan: `warp` or `tiles`.
    pub scan: &'static str,
    pub queries: usize,
    /// Bytes the pairs read (each pair its list's vectors).
    pub bytes: u64,
    /// (pair, vector) distances computed.
    pub distances: u64,
    pub read_s: f64,
    /// The scan kernel, and the search from the coarse step to the merge.
    pub scan_s: f64,
    pub gpu_s: f64,
    /// Whether every search found the warp scan's neighbours (bit for bit).
    pub same: bool,
}

/// Every row: the small batches, then the large warm one.
pub fn run(gpu: &Gpu, args: &Args) -> Res<Vec<Row>> {
    let (g, d, n, seed) = (args.gib, args.dim, args.nlist, args.seed);
    let (spec, mut index) = workload::clustered_index(gpu, g, d, n, seed, "ivf_scan")?;
    index.lists_mut().make_resident()?;
    let mach = UvmRuntime::new(
        gpu,
        args.nlist,
        MachineProfile::cached_or_probe(gpu)?,
        ServiceConfig::default(),
    )?;
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0x5ca9);
    let mut batches: Vec<(String, Vectors)> = (args.sizes.iter())
        .map(|&s| {
            let q = workload::near_random_clusters(&spec, &mut rng, s, args.seed + s as u64);
            (format!("{s} near 4 clusters"), q)
        })
        .collect();
    if !args.no_warm {
        let layout = index.layout();
        let b = Batches::aimed_at(
            &spec,
            layout,
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
        let batch = Batch {
            name: &name,
            queries: &queries,
        };
        let (row, want) = measure_batch(gpu, &mut index, &mach, args, batch, None)?;
        println!("{}", crate::report::summary(&row));
        rows.push(row);
        let (row, _) = measure_batch(gpu, &mut index, &mach, args, batch, Some(&want))?;
        println!("{}", crate::report::summary(&row));
        rows.push(row);
    }
    Ok(rows)
}

/// A batch of queries and its name in the table.
#[derive(Clone, Copy)]
struct Batch<'a> {
    name: &'a str,
    queries: &'a Vectors,
}

/// One batch by the warp scan (`want` none) or by tiles (compared with `want`, the warp
/// scan's answer): a warm-up and `reps` searches, then `reps` reads of as many bytes.
/// Returns the row and the warm-up's outcome.
fn measure_batch(
    gpu: &Gpu,
    index: &mut GpuIndex,
    mach: &UvmRuntime,
    args: &Args,
    batch: Batch<'_>,
    want: Option<&SearchOutcome>,
) -> Res<(Row, SearchOutcome)> {
    let params = SearchParams {
        nprobe: args.nprobe,
        policy: Policy::Faults,
        expected_passes: 2.0,
        max_blocks: 0,
        pull_copy_every: 0,
        scan: match want {
            None => ScanMethod::Warp,
            Some(_) => ScanMethod::Tiles,
        },
    };
    let queries = batch.queries;
    let first = index.search(queries, params, mach)?;
    let want = want.unwrap_or(&first);
    let mut same = first.ids == want.ids && first.dist == want.dist;
    let (mut scan, mut whole) = (Vec::new(), Vec::new());
    for _ in 0..args.reps {
        let out = index.search(queries, params, mach)?;
        same &= out.ids == want.ids && out.dist == want.dist;
        scan.push(out.scan_seconds);
        whole.push(out.gpu_seconds);
    }
    let (bytes, distances) = scanned(index, &first, args.dim);
    let read_s = median(&time_read(gpu, bytes as usize, args.reps)?).unwrap_or(f64::NAN);
    let row = Row {
        batch: batch.name.to_string(),
        scan: if first.tiled { "tiles" } else { "warp" },
        queries: queries.len(),
        bytes,
        distances,
        read_s,
        scan_s: median(&scan).unwrap_or(f64::NAN),
        gpu_s: median(&whole).unwrap_or(f64::NAN),
        same,
    };
    Ok((row, first))
}

/// The bytes a search's pairs read and the distances they computed.
fn scanned(index: &GpuIndex, out: &SearchOutcome, dim: usize) -> (u64, u64) {
    let layout = index.layout();
    let distances: u64 = (out.list_queries.iter().enumerate())
        .map(|(l, &pairs)| pairs as u64 * layout.list_len(l) as u64)
        .sum();
    (distances * dim as u64 * 4, distances)
}
