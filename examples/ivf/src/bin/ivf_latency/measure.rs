//! The measurements: per policy and batch size, the reference neighbours, then the batches
//! back to back and at a fixed rate, each submitted launch by launch and as a graph.

use std::time::{Duration, Instant};

use lookahead::Gpu;
use lookahead_ivf::data::{Clusters, Vectors};
use lookahead_ivf::gpu::{BatchSearch, GpuIndex, ScanMethod, SearchParams, Submit};
use lookahead_ivf::workload;
use lookahead_uvm::{Policy, UvmRuntime};

use crate::{Args, Res};

/// How batches arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    BackToBack,
    /// One batch every this long.
    Every(Duration),
}

/// Latencies of one configuration, seconds, sorted.
pub struct Latencies(Vec<f64>);

impl Latencies {
    /// The `q`-quantile (nearest rank).
    pub fn quantile(&self, q: f64) -> f64 {
        let i = ((self.0.len() - 1) as f64 * q).round() as usize;
        self.0[i]
    }
}

/// One way of submitting a configuration's batches, measured.
pub struct Submitted {
    /// From each batch's arrival to its neighbours on the host.
    pub latencies: Latencies,
    /// Queries per second over the timed batches.
    pub qps: f64,
    /// The host's time to queue a batch's work, p50, seconds.
    pub queueing: f64,
}

/// One configuration's numbers, both ways of submitting.
pub struct Row {
    pub policy: Policy,
    pub size: usize,
    pub arrival: Arrival,
    pub launches: Submitted,
    pub graph: Submitted,
    /// Whether every batch, both ways, found the reference neighbours.
    pub same: bool,
    /// Back to back only: the full `GpuIndex::search` (policy choice, per-step events,
    /// statistics read back) on the same batches.
    pub full: Option<Latencies>,
}

/// The data set and the index (lists in managed memory), refused when it would not fit in
/// the GPU's free memory with 2 GiB to spare.
pub fn build_index(gpu: &Gpu, args: &Args) -> Res<(Clusters, GpuIndex)> {
    let (g, d, n, seed) = (args.gib, args.dim, args.nlist, args.seed);
    Ok(workload::clustered_index(
        gpu,
        g,
        d,
        n,
        seed,
        "ivf_latency",
    )?)
}

fn params(args: &Args, policy: Policy) -> SearchParams {
    SearchParams {
        nprobe: args.nprobe,
        policy,
        expected_passes: 2.0,
        max_blocks: 0,
        pull_copy_every: 0,
        scan: ScanMethod::Auto,
    }
}

/// Every batch size's rows under `policy` (its lists resident for `Faults`, on the host for
/// the pull, which caches them while the references are found), each printed as measured.
pub fn policy(
    index: &mut GpuIndex,
    mach: &mut UvmRuntime,
    pools: &[Vec<Vectors>],
    policy: Policy,
    args: &Args,
) -> Res<Vec<Row>> {
    match policy {
        Policy::Faults => index.lists_mut().make_resident()?,
        _ => index.lists_mut().evict_to_host(mach)?,
    }
    let max = args.sizes.iter().copied().max().unwrap_or(1);
    let mut batch = index.batch_search(max, params(args, policy))?;
    let mut rows = Vec::new();
    for (pool, &size) in pools.iter().zip(&args.sizes) {
        let reference = references(index, &mut batch, mach, pool, params(args, policy))?;
        let mut b2b = measure(
            index,
            &mut batch,
            pool,
            &reference,
            Arrival::BackToBack,
            args,
        )?;
        b2b.full = Some(full_search(index, mach, pool, params(args, policy), args)?);
        let launched_p50 = b2b.launches.latencies.quantile(0.5);
        let period = Duration::from_secs_f64(launched_p50 * args.rate_factor);
        let fixed = measure(
            index,
            &mut batch,
            pool,
            &reference,
            Arrival::Every(period),
            args,
        )?;
        for mut row in [b2b, fixed] {
            (row.policy, row.size) = (policy, size);
            println!("{}", crate::report::summary(&row));
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The launched batches' neighbours (warming the pull's cache too), each of the first ten
/// checked against the full search.
fn references(
    index: &mut GpuIndex,
    batch: &mut BatchSearch,
    mach: &mut UvmRuntime,
    pool: &[Vectors],
    params: SearchParams,
) -> Res<Vec<Vec<u32>>> {
    let mut want = Vec::with_capacity(pool.len());
    for (i, q) in pool.iter().enumerate() {
        let (_, ids) = index.search_batch(batch, q, Submit::Launches)?;
        if i < 10 {
            let full = index.search(q, params, mach)?;
            if full.ids != ids {
                return Err(format!(
                    "batch {i} of {} queries: the batch search differs from the full search",
                    q.len()
                )
                .into());
            }
        }
        want.push(ids);
    }
    Ok(want)
}

/// Both ways of submitting, one configuration: latencies from arrival to results on the
/// host, throughput, and whether every batch gave the reference neighbours.
fn measure(
    index: &mut GpuIndex,
    batch: &mut BatchSearch,
    pool: &[Vectors],
    want: &[Vec<u32>],
    arrival: Arrival,
    args: &Args,
) -> lookahead::Result<Row> {
    let mut same = true;
    let mut one = |submit: Submit, same: &mut bool| -> lookahead::Result<Submitted> {
        for q in &pool[..args.warmup] {
            index.search_batch(batch, q, submit)?;
        }
        let mut lat = Vec::with_capacity(args.batches);
        let mut queue = Vec::with_capacity(args.batches);
        let start = Instant::now();
        for (i, q) in pool[args.warmup..].iter().enumerate() {
            let arrives = match arrival {
                Arrival::BackToBack => Instant::now(),
                Arrival::Every(p) => start + p * i as u32,
            };
            while Instant::now() < arrives {
                std::hint::spin_loop();
            }
            let (_, ids) = index.search_batch(batch, q, submit)?;
            lat.push(arrives.elapsed().as_secs_f64());
            queue.push(batch.last_queue_time().as_secs_f64());
            *same &= ids == want[args.warmup + i];
        }
        let queries: usize = pool[args.warmup..].iter().map(Vectors::len).sum();
        let qps = queries as f64 / start.elapsed().as_secs_f64();
        lat.sort_by(f64::total_cmp);
        queue.sort_by(f64::total_cmp);
        Ok(Submitted {
            latencies: Latencies(lat),
            qps,
            queueing: Latencies(queue).quantile(0.5),
        })
    };
    let launches = one(Submit::Launches, &mut same)?;
    let graph = one(Submit::Graph, &mut same)?;
    Ok(Row {
        policy: Policy::Faults,
        size: 0,
        arrival,
        launches,
        graph,
        same,
        full: None,
    })
}

/// Back-to-back latencies of the full search on the timed batches.
fn full_search(
    index: &mut GpuIndex,
    mach: &mut UvmRuntime,
    pool: &[Vectors],
    params: SearchParams,
    args: &Args,
) -> lookahead::Result<Latencies> {
    let mut lat = Vec::with_capacity(args.batches);
    for q in &pool[args.warmup..] {
        let t = Instant::now();
        index.search(q, params, mach)?;
        lat.push(t.elapsed().as_secs_f64());
    }
    lat.sort_by(f64::total_cmp);
    Ok(Latencies(lat))
}
