//! The run: the in-process measurements of every size, then the process run, then the
//! report. A configuration that fails is reported as failed and the run goes on, so one
//! run shows everything that works; the exit status is a failure if anything failed or any
//! answer differed from the one-GPU search.

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_ivf::data::Vectors;
use lookahead_ivf::gpu::ShardStats;
use lookahead_ivf::shard::ranks::{BatchTimes, RankSearch};
use lookahead_multi::GpuSet;

use crate::build::{sizes, Size};
use crate::report::{Answer, Cold, Measured, SizeReport};
use crate::{inproc, rank, Args, Res};

/// One rank's batches of one configuration.
pub(crate) struct RankRun {
    pub cold: BatchTimes,
    pub cold_stats: ShardStats,
    pub warm: Vec<BatchTimes>,
    pub checked: usize,
    pub same: usize,
    pub all_gather_alone: f64,
}

/// Whether `got` is `want`, bit for bit.
pub(crate) fn same_answer(got: &Answer, want: &Answer) -> bool {
    got.1 == want.1
        && got
            .0
            .iter()
            .zip(&want.0)
            .all(|(a, b)| a.to_bits() == b.to_bits())
}

/// An untimed batch (which sets up NCCL's connections and the kernels' first launches),
/// a cold batch (after evicting the shard's copy), then `batches` warm ones, then the
/// all-gather alone; rank 0 passes the batch and the one-GPU answer to compare with.
pub(crate) fn run_rank(
    rs: &mut RankSearch<'_>,
    batch: Option<&Vectors>,
    size: &Size,
    batches: usize,
    reference: Option<&Answer>,
) -> Res<RankRun> {
    let (nq, nprobe) = (size.queries, size.nprobe);
    let queries = batch.map(|b| b.data.as_slice());
    let (mut checked, mut same) = (0, 0);
    let mut check = |answer: Option<Answer>| {
        if let (Some(got), Some(want)) = (answer, reference) {
            checked += 1;
            same += same_answer(&got, want) as usize;
        }
    };
    rs.shard.gpu().bind_to_thread()?;
    let (answer, _) = rs.search(queries, nq, nprobe)?;
    check(answer);
    rs.shard.evict()?;
    let (answer, cold) = rs.search(queries, nq, nprobe)?;
    let cold_stats = rs.shard.stats()?;
    check(answer);
    let mut warm = Vec::with_capacity(batches);
    for _ in 0..batches {
        let (answer, t) = rs.search(queries, nq, nprobe)?;
        check(answer);
        warm.push(t);
    }
    let all_gather_alone = rs.time_all_gather(nq, 20)?;
    Ok(RankRun {
        cold,
        cold_stats,
        warm,
        checked,
        same,
        all_gather_alone,
    })
}

/// The configuration's measurements from every rank's run (rank 0 first) and the summed
/// pinned rate.
pub(crate) fn measured(mode: &str, runs: &[RankRun], pinned_sum: f64) -> Measured {
    let r0 = &runs[0];
    Measured {
        mode: mode.to_string(),
        gpus: runs.len(),
        cold: Some(Cold {
            seconds: r0.cold.wall,
            needed_bytes: runs.iter().map(|r| r.cold_stats.needed_bytes).sum(),
            pinned_sum,
        }),
        warm: r0.warm.iter().map(|t| t.wall).collect(),
        gather: r0.warm.iter().map(|t| t.gather).collect(),
        host_merge: r0.warm.iter().map(|t| t.host_merge).collect(),
        checked: r0.checked,
        same: r0.same,
        all_gather_alone: Some(r0.all_gather_alone),
    }
}

/// The whole run (no `--rank`): returns whether everything passed.
pub(crate) fn coordinate(args: &Args) -> Res<bool> {
    let out = OutDir::create(&args.out)?;
    // No driver or no GPU as the host runtime's own error (the exit status says so).
    lookahead::Gpu::count()?;
    let mut set = match args.gpus.is_empty() {
        true => GpuSet::all()?,
        false => GpuSet::select(&args.gpus)?,
    };
    let header = RunHeader::for_gpu(set.gpu(0))?;
    let peers = set.enable_peer_access()?;
    let topology = set.topology()?;
    println!("{}", topology.summary());
    let peer_gbps = crate::rates::peer_rate(&set, 1.min(set.len() - 1), 0)?;
    let mut reports = Vec::new();
    let mut inproc_state = inproc::State::new(&set, args)?;
    for size in sizes(args) {
        println!("== {} index, one process, {} GPUs", size.name, set.len());
        let report = inproc::run_size(args, &size, &set, &mut inproc_state, &out);
        reports.push(report);
    }
    drop(inproc_state);
    // What this process freed goes back to the GPUs, for the rank processes' copies.
    for gpu in set.gpus() {
        lookahead_multi::set::release_freed_memory(gpu)?;
    }
    if args.ranks > 1 {
        run_processes(args, &set, &out, &mut reports)?;
    }
    let ok = reports.iter().all(|r| {
        r.runs
            .iter()
            .all(|m| m.as_ref().is_ok_and(|m| m.same == m.checked))
    });
    let doc = crate::report::document(&header, &set, &topology, peers, peer_gbps, &reports)?;
    out.write("ivf_shards.md", &doc)?;
    let mut csv = String::new();
    for (i, r) in reports.iter().enumerate() {
        let text = r.table().to_csv()?;
        csv += if i == 0 {
            &text
        } else {
            text.split_once('\n').map_or("", |x| x.1)
        };
    }
    out.write("ivf_shards.csv", csv)?;
    // The ranks' working files (the reference answers, their measurements) are not results.
    let _ = std::fs::remove_dir_all(out.path().join(".ivf_shards"));
    println!("{}", crate::report::short_table(&reports));
    Ok(ok)
}

/// The process run: one process per GPU, started here; their measurements added to
/// `reports` (a failed run adds its error to every size).
fn run_processes(args: &Args, set: &GpuSet, out: &OutDir, reports: &mut [SizeReport]) -> Res<()> {
    println!("== {} processes, one per GPU", set.len());
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let exe = std::env::current_exe()?;
    let ordinals: Vec<String> = set.gpus().iter().map(|g| g.ordinal().to_string()).collect();
    let forwarded = rank::forwarded_args(args);
    let outcome = lookahead_multi::launcher::run_ranks(
        set.len(),
        Duration::from_secs(args.timeout_s * 2 + 60),
        |r| {
            let mut c = Command::new(&exe);
            c.args(&forwarded)
                .args(["--gpus", &ordinals.join(",")])
                .args(["--rank", &r.to_string()])
                .args(["--rendezvous", &format!("127.0.0.1:{port}")])
                .arg("--out")
                .arg(out.path());
            c
        },
    );
    for report in reports.iter_mut() {
        let Some(size) = report.size else { continue };
        let measured = match &outcome {
            Ok(()) => rank::collect(out, &size, set.len()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        report.runs.push(measured);
    }
    Ok(())
}
