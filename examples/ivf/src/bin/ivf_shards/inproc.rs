//! One index size in this process: one GPU's search of the whole index, the shards with the
//! NCCL all-gather (a thread per GPU), the same shards gathered by peer copies, recall.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::CudaStream;
use lookahead::{DriverContext, Gpu};
use lookahead_bench::output::OutDir;
use lookahead_ivf::cpu;
use lookahead_ivf::data::Vectors;
use lookahead_ivf::gpu::{Reads, ShardIndex};
use lookahead_ivf::shard::exact::exact_top_k;
use lookahead_ivf::shard::ranks::{PeerGather, RankSearch};
use lookahead_multi::{Communicator, GpuSet};

use crate::build::{self, Size, Whole};
use crate::report::{Answer, Cold, Measured, SizeReport};
use crate::run::{measured, run_rank, same_answer, RankRun};
use crate::{rank, rates, Args, Res};

/// Bytes each GPU copies to time its pinned rate.
pub(crate) const PINNED_BYTES: usize = 2 << 30;
/// Device memory the one-GPU search leaves free beside a copy of the whole index.
const ONE_GPU_HEADROOM: usize = 4 << 30;

/// What the in-process runs share across sizes: a stream per GPU, and the communicators on
/// them (or why NCCL could not be set up).
pub(crate) struct State {
    streams: Vec<Arc<CudaStream>>,
    comms: Result<Vec<Communicator>, String>,
}

impl State {
    pub fn new(set: &GpuSet, args: &Args) -> Res<State> {
        let mut streams = Vec::new();
        for gpu in set.gpus() {
            gpu.bind_to_thread()?;
            streams.push(gpu.context().new_stream().during("cuStreamCreate")?);
        }
        let timeout = Duration::from_secs(args.timeout_s);
        let comms =
            Communicator::init_all(set.gpus(), &streams, timeout).map_err(|e| e.to_string());
        if let Err(e) = &comms {
            println!("NCCL in this process: {e}");
        }
        Ok(State { streams, comms })
    }
}

/// Everything measured for `size` in this process; a failure ends the size's report with it.
pub(crate) fn run_size(
    args: &Args,
    size: &Size,
    set: &GpuSet,
    state: &mut State,
    out: &OutDir,
) -> SizeReport {
    let mut report = SizeReport {
        size: Some(*size),
        ..Default::default()
    };
    if let Err(e) = measure(args, size, set, state, out, &mut report) {
        println!("{} index: {e}", size.name);
        report.runs.push(Err(e.to_string()));
    }
    report
}

fn measure(
    args: &Args,
    size: &Size,
    set: &GpuSet,
    state: &mut State,
    out: &OutDir,
    report: &mut SizeReport,
) -> Res<()> {
    let t = Instant::now();
    let whole = build::whole(args, size, set.gpus())?;
    println!("  built in {:.1} s", t.elapsed().as_secs_f64());
    report.vectors = whole.layout.len();
    report.bytes = whole.lists.num_bytes() as u64;
    report.shares = (0..set.len()).map(|r| whole.partition.bytes(r)).collect();
    report.imbalance = whole.partition.imbalance();
    report.fill_register = whole.lists.times();
    let batch = size.batch(args);
    let regions: Vec<&[f32]> = (0..set.len())
        .map(|r| &whole.lists.host()[whole.partition.floats(r)])
        .collect();
    let (alone, together) = rates::pinned_rates(set, &regions, PINNED_BYTES)?;
    let pinned_sum: f64 = together.iter().sum();
    report.pinned_alone = alone.clone();
    report.pinned_together = together;
    let (reference, one) = one_gpu(args, size, set.gpu(0), &whole, &batch, alone[0])?;
    report.one_gpu_reads = one.mode.clone();
    report.runs.push(Ok(one));
    rank::write_reference(out, size, &reference)?;
    let mut shards = Vec::new();
    for (r, gpu) in set.gpus().iter().enumerate() {
        let layout = whole.partition.shard_layout(&whole.layout, r);
        let view = whole.lists.view(gpu, whole.partition.floats(r))?;
        shards.push(ShardIndex::new(
            gpu,
            &state.streams[r],
            layout,
            view,
            Reads::Pull,
        )?);
    }
    let (nccl, mut shards) =
        nccl_in_process(args, size, state, shards, &batch, &reference, pinned_sum);
    report.runs.push(nccl);
    report
        .runs
        .push(peer(args, size, &mut shards, &batch, &reference).map_err(|e| e.to_string()));
    drop(shards);
    report.recall = Some(recall(args, &whole, &batch, &reference));
    Ok(())
}

/// One GPU's search of the whole index: its copy in device memory where it fits (an
/// untimed batch, then a cold one after evicting the copy, then warm batches), else read in
/// place (two batches after an untimed one). Returns its first answer, the reference.
fn one_gpu(
    args: &Args,
    size: &Size,
    gpu: &Gpu,
    whole: &Whole,
    batch: &Vectors,
    pinned: f64,
) -> Res<(Answer, Measured)> {
    gpu.bind_to_thread()?;
    let stream = gpu.context().new_stream().during("cuStreamCreate")?;
    let bytes = whole.lists.num_bytes();
    lookahead_multi::set::release_freed_memory(gpu)?;
    let fits = gpu.memory_info()?.0 >= bytes + ONE_GPU_HEADROOM;
    let reads = if fits { Reads::Pull } else { Reads::ZeroCopy };
    let view = whole.lists.view(gpu, 0..whole.lists.len())?;
    let mut index = ShardIndex::new(gpu, &stream, whole.layout.clone(), view, reads)?;
    let search = |index: &mut ShardIndex<'_>| -> Res<(Answer, f64)> {
        let t = Instant::now();
        let answer = index.search(&batch.data, size.nprobe)?;
        Ok((answer, t.elapsed().as_secs_f64()))
    };
    let (reference, _) = search(&mut index)?;
    let (mut checked, mut same) = (0, 0);
    let mut first = 0.0;
    if fits {
        index.evict()?;
        let (answer, t) = search(&mut index)?;
        (first, checked, same) = (t, 1, same_answer(&answer, &reference) as usize);
    }
    let needed_bytes = index.stats()?.needed_bytes;
    let batches = if fits { args.batches } else { 2 };
    let mut warm = Vec::new();
    for _ in 0..batches {
        let (answer, t) = search(&mut index)?;
        checked += 1;
        same += same_answer(&answer, &reference) as usize;
        warm.push(t);
    }
    let mode = if fits {
        "one GPU, pulled into its memory"
    } else {
        "one GPU, read in place (it cannot hold the index)"
    };
    let cold = fits.then_some(Cold {
        seconds: first,
        needed_bytes,
        pinned_sum: pinned,
    });
    let m = Measured {
        mode: mode.into(),
        gpus: 1,
        cold,
        gather: vec![0.0; warm.len()],
        host_merge: vec![0.0; warm.len()],
        warm,
        checked,
        same,
        all_gather_alone: None,
    };
    Ok((reference, m))
}

/// The shards with the NCCL all-gather, a thread per GPU; gives the shards back.
fn nccl_in_process<'w>(
    args: &Args,
    size: &Size,
    state: &mut State,
    shards: Vec<ShardIndex<'w>>,
    batch: &Vectors,
    reference: &Answer,
    pinned_sum: f64,
) -> (Result<Measured, String>, Vec<ShardIndex<'w>>) {
    let comms = match std::mem::replace(&mut state.comms, Err("in use".into())) {
        Ok(c) => c,
        Err(e) => {
            state.comms = Err(e.clone());
            return (Err(format!("NCCL: {e}")), shards);
        }
    };
    let mut ranks = Vec::new();
    for (shard, comm) in shards.into_iter().zip(comms) {
        ranks.push(RankSearch::new(shard, comm).expect("shard and communicator share the stream"));
    }
    let results: Vec<(RankSearch<'w>, Result<RankRun, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .into_iter()
            .enumerate()
            .map(|(r, mut rs)| {
                s.spawn(move || {
                    let (b, want) = if r == 0 {
                        (Some(batch), Some(reference))
                    } else {
                        (None, None)
                    };
                    let run =
                        run_rank(&mut rs, b, size, args.batches, want).map_err(|e| e.to_string());
                    (rs, run)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank thread panicked"))
            .collect()
    });
    let (mut shards, mut comms, mut runs, mut failure) = (Vec::new(), Vec::new(), Vec::new(), None);
    for (rs, run) in results {
        let (shard, comm) = rs.into_parts();
        shards.push(shard);
        comms.push(comm);
        match run {
            Ok(r) => runs.push(r),
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    state.comms = Ok(comms);
    let mode = format!("NCCL all-gather, one process, {} threads", shards.len());
    match failure {
        Some(e) => (Err(e), shards),
        None => (Ok(measured(&mode, &runs, pinned_sum)), shards),
    }
}

/// The shards (warm) gathered by peer copies into GPU 0.
fn peer(
    args: &Args,
    size: &Size,
    shards: &mut [ShardIndex<'_>],
    batch: &Vectors,
    reference: &Answer,
) -> Res<Measured> {
    let mut gather = PeerGather::new(shards)?;
    gather.search(shards, &batch.data, size.queries, size.nprobe)?;
    let mut m = Measured {
        mode: "peer copies into GPU 0, one process".into(),
        gpus: shards.len(),
        ..Default::default()
    };
    for _ in 0..args.batches {
        let (answer, t) = gather.search(shards, &batch.data, size.queries, size.nprobe)?;
        m.checked += 1;
        m.same += answer.is_some_and(|a| same_answer(&a, reference)) as usize;
        m.warm.push(t.wall);
        m.gather.push(t.gather);
        m.host_merge.push(t.host_merge);
    }
    Ok(m)
}

/// Recall@10 of `answer` over the first `--recall-queries` queries, against brute force.
fn recall(args: &Args, whole: &Whole, batch: &Vectors, answer: &Answer) -> f64 {
    let n = args.recall_queries.min(batch.len());
    let dim = batch.dim;
    let queries = Vectors {
        dim,
        data: batch.data[..n * dim].to_vec(),
    };
    let t = Instant::now();
    let exact = exact_top_k(whole.lists.host(), dim, 0, &queries, 10);
    let k = ivf_kernels::K;
    let found: Vec<Vec<cpu::Hit>> = (0..n)
        .map(|q| {
            (0..k)
                .map(|j| (answer.0[q * k + j], answer.1[q * k + j]))
                .collect()
        })
        .collect();
    let r = cpu::recall(&found, &exact, 10);
    println!(
        "  recall@10 {r:.4} over {n} queries (brute force in {:.1} s)",
        t.elapsed().as_secs_f64()
    );
    r
}
