//! The measurements: the index built, then for each probed fraction the resident baseline
//! and every policy's cold and warm searches, each checked against the resident search's
//! neighbours.

use std::time::Instant;

use lookahead::{Error, Gpu, PrefetchOptions};
use lookahead_bench::progress::{progress_bar, ProgressBar};
use lookahead_bench::stats::{gb_per_s, median, Summary};
use lookahead_ivf::data::{Clusters, Vectors};
use lookahead_ivf::gpu::{vectors_that_fit, GpuIndex, ScanMethod, SearchOutcome, SearchParams};
use lookahead_ivf::workload::{self, Batches};
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig, UvmRuntime};

use crate::{Args, Res, GIB};

/// One policy at one probed fraction: its cold and warm searches beside the resident ones.
pub struct Row {
    /// The probed fraction aimed at, percent.
    pub target: f64,
    /// The fraction the cold batch probed, percent of the index's bytes.
    pub percent: f64,
    pub policy: Policy,
    /// The policy that ran (what `Auto` chose).
    pub chosen: Policy,
    /// Bytes of the lists the cold batch probed.
    pub needed_bytes: u64,
    pub cold: Summary,
    pub warm: Summary,
    /// The resident baseline's warm batch.
    pub resident: Summary,
    pub requested: Requested,
    pub arrived: Arrivals,
    /// The cold search's scan kernel (first repetition).
    pub cold_scan_s: f64,
    /// Every repetition's cold time, in order.
    pub cold_reps: Vec<f64>,
    /// The pull kernel's in-kernel copy time, median over the cold repetitions (0 when the
    /// search did not pull).
    pub pull_copy_s: f64,
    /// The resident search's time on the GPU (coarse to merge) and in the scan kernel.
    pub resident_gpu_s: f64,
    pub resident_scan_s: f64,
    /// Whether every repetition found the resident search's neighbours, cold and warm.
    pub same_top_k: bool,
}

impl Row {
    /// Cold effective GB/s on the bytes the probed lists hold.
    pub fn cold_gbps(&self) -> f64 {
        gb_per_s(self.needed_bytes as f64, self.cold.median)
    }
}

/// The lists a policy asked the host for (gpu-requests) or copied (gpu-pull), first
/// repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requested {
    /// Asked for by the cold batch.
    pub cold: usize,
    /// Probed by the cold batch.
    pub probed: usize,
    /// Asked for by the warm batch.
    pub warm: usize,
}

/// Of the lists the cold batch asked for (first repetition): read after their data arrived
/// (gpu-pull: read from the cache), and given up waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrivals {
    pub arrived: usize,
    pub timed_out: usize,
}

/// How many vectors make a `--gib` index, refused (with a message saying what to lower) when
/// it would not fit in the GPU's free memory with 2 GiB to spare.
pub fn index_vectors(gpu: &Gpu, args: &Args) -> lookahead::Result<usize> {
    vectors_that_fit(gpu, args.gib, args.dim, "ivf_bench").inspect_err(|e| {
        if let Error::OutOfMemory { available, .. } = e {
            eprintln!(
                "error: a {:.1} GiB index does not fit in {:.1} GiB of free GPU memory; \
                 lower --gib",
                args.gib,
                *available as f64 / GIB
            );
        }
    })
}

/// The data set and the index built from it in managed memory.
pub struct Built {
    pub spec: Clusters,
    pub data: Vectors,
    pub index: GpuIndex,
    pub list_lens: ListLens,
}

/// Fewest and most vectors in a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListLens {
    pub min: usize,
    pub max: usize,
}

/// `n` vectors of the data set, and the index trained on its first `32 * nlist`.
pub fn build_index(gpu: &Gpu, args: &Args, n: usize) -> lookahead::Result<Built> {
    let t = Instant::now();
    let spec = workload::clustered(args.dim, args.nlist, args.seed);
    let data = spec.points(n, 0, None);
    let sample = data.prefix(args.nlist * 32);
    let mut index = workload::build_index(gpu, &data, &sample, args.nlist, 8, args.seed)?;
    index.lists_mut().set_prefer_host(args.prefer_host)?;
    let lens: Vec<usize> = (0..args.nlist)
        .map(|l| index.layout().list_len(l))
        .collect();
    let list_lens = ListLens {
        min: lens.iter().copied().min().unwrap_or(0),
        max: lens.iter().copied().max().unwrap_or(0),
    };
    println!(
        "index: {} vectors x {} dims, {} lists ({} to {} vectors), {:.2} GiB in managed memory \
         (built in {:.1} s)",
        n,
        args.dim,
        args.nlist,
        list_lens.min,
        list_lens.max,
        index.index_bytes() as f64 / GIB,
        t.elapsed().as_secs_f64()
    );
    Ok(Built {
        spec,
        data,
        index,
        list_lens,
    })
}

/// The prefetch service and the host engine, configured from the flags.
pub fn machinery(
    gpu: &Gpu,
    args: &Args,
    profile: &MachineProfile,
) -> lookahead::Result<UvmRuntime> {
    let config = ServiceConfig {
        threads: args.service_threads,
        min_batch_bytes: args.service_min_batch_kib << 10,
        piece_bytes: args.service_piece_mib << 20,
        ..ServiceConfig::default()
    };
    let engine = PrefetchOptions {
        piece_bytes: args.engine_piece_mib << 20,
        ..PrefetchOptions::default()
    };
    UvmRuntime::with_engine(gpu, args.nlist, profile.clone(), config, engine)
}

/// What the run found, beside the rows.
#[derive(Default)]
pub struct Found {
    pub rows: Vec<Row>,
    /// Seconds each set-up of a GPU mapping took (accessed-by advice, pull cache).
    pub mapping_s: Vec<f64>,
    /// Recall against brute force, measured once at the first fraction from 6% up.
    pub recall_note: String,
}

fn params(args: &Args, policy: Policy) -> SearchParams {
    SearchParams {
        nprobe: args.nprobe,
        policy,
        expected_passes: 2.0,
        max_blocks: 0,
        pull_copy_every: args.pull_copy_every,
        scan: ScanMethod::Auto,
    }
}

/// The searches with every list resident: the reference answers every policy must
/// reproduce, and the warm batch's times (wall, GPU, scan).
struct Resident {
    cold_ref: SearchOutcome,
    warm_ref: SearchOutcome,
    wall: Summary,
    gpu_s: f64,
    scan_s: f64,
}

/// The measurements of one run: the index, the machinery, and what was found so far.
pub struct Session<'a> {
    args: &'a Args,
    built: &'a mut Built,
    mach: &'a mut UvmRuntime,
    bar: ProgressBar,
    found: Found,
}

impl<'a> Session<'a> {
    /// A session over `built` with `mach`, its progress bar counting every fraction's
    /// baseline and policies.
    pub fn new(args: &'a Args, built: &'a mut Built, mach: &'a mut UvmRuntime) -> Self {
        let bar = progress_bar((args.percent.len() * (args.policies.len() + 1)) as u64);
        Session {
            args,
            built,
            mach,
            bar,
            found: Found::default(),
        }
    }

    /// Measures every probed fraction and policy, showing progress.
    pub fn measure_all(mut self) -> Res<Found> {
        let args = self.args;
        for (round, &pct) in args.percent.iter().enumerate() {
            let batches = Batches::aimed_at(
                &self.built.spec,
                self.built.index.layout(),
                pct,
                args.nprobe,
                args.queries_per_cluster,
                round as u64,
            );
            self.measure_fraction(pct, &batches)?;
        }
        self.bar.finish_and_clear();
        Ok(self.found)
    }

    /// The resident baseline, then every policy, at one probed fraction.
    fn measure_fraction(&mut self, pct: f64, b: &Batches) -> Res<()> {
        self.bar.set_message(format!("{pct}%: resident baseline"));
        let resident = self.measure_resident(b)?;
        self.bar.inc(1);
        for &policy in &self.args.policies {
            self.bar.set_message(format!("{pct}%: {}", policy.name()));
            let row = self.measure_policy(pct, policy, b, &resident)?;
            self.found.rows.push(row);
            self.bar.inc(1);
        }
        if self.found.recall_note.is_empty() && pct >= 6.0 {
            let data = &self.built.data;
            self.found.recall_note = recall_note(self.args, pct, data, &b.cold, &resident.cold_ref);
        }
        Ok(())
    }

    fn measure_resident(&mut self, b: &Batches) -> Res<Resident> {
        let (index, mach, faults) = (
            &mut self.built.index,
            &mut *self.mach,
            params(self.args, Policy::Faults),
        );
        index.lists_mut().make_resident()?;
        // Warm-up, and the reference answers.
        let cold_ref = index.search(&b.cold, faults, mach)?;
        let warm_ref = index.search(&b.warm, faults, mach)?;
        let (mut wall, mut gpu, mut scan) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..self.args.reps {
            let r = index.search(&b.warm, faults, mach)?;
            wall.push(r.seconds);
            gpu.push(r.gpu_seconds);
            scan.push(r.scan_seconds);
        }
        Ok(Resident {
            cold_ref,
            warm_ref,
            wall: Summary::of(&wall).ok_or("no repetitions")?,
            gpu_s: median(&gpu).ok_or("no repetitions")?,
            scan_s: median(&scan).ok_or("no repetitions")?,
        })
    }

    /// `--reps` cold and warm searches under `policy`, each cold one after moving every list
    /// to the host; the row, with the resident baseline beside it.
    fn measure_policy(
        &mut self,
        pct: f64,
        policy: Policy,
        b: &Batches,
        resident: &Resident,
    ) -> Res<Row> {
        let (index, mach, p) = (
            &mut self.built.index,
            &mut *self.mach,
            params(self.args, policy),
        );
        let (mut cold, mut warm, mut copy) = (Vec::new(), Vec::new(), Vec::new());
        let mut first: Option<(SearchOutcome, SearchOutcome)> = None;
        let mut same = true;
        for _ in 0..self.args.reps {
            // What each policy needs set up (the mapping, the pull cache), before the timed
            // search: a per-index set-up (`PolicyBuffer::prepare`); Auto gets the index as one
            // set up for its pull would be.
            let was_mapped = index.lists().is_mapped_for_gpu();
            let t = index.lists_mut().prepare(policy)?;
            if !was_mapped && index.lists().is_mapped_for_gpu() {
                self.found.mapping_s.push(t);
            }
            index.lists_mut().evict_to_host(mach)?;
            let c = index.search(&b.cold, p, mach)?;
            let w = index.search(&b.warm, p, mach)?;
            same &= c.ids == resident.cold_ref.ids && w.ids == resident.warm_ref.ids;
            cold.push(c.seconds);
            warm.push(w.seconds);
            copy.push(c.pull_copy_seconds);
            first.get_or_insert((c, w));
        }
        let (c, w) = first.ok_or("no repetitions")?;
        Ok(Row {
            target: pct,
            percent: c.needed_bytes as f64 / index.index_bytes() as f64 * 100.0,
            policy,
            chosen: c.policy,
            needed_bytes: c.needed_bytes,
            pull_copy_s: median(&copy).ok_or("no repetitions")?,
            cold: Summary::of(&cold).ok_or("no repetitions")?,
            cold_reps: cold,
            warm: Summary::of(&warm).ok_or("no repetitions")?,
            resident: resident.wall,
            requested: Requested {
                cold: c.requested,
                probed: c.probed_lists,
                warm: w.requested,
            },
            arrived: Arrivals {
                arrived: c.arrived,
                timed_out: c.timed_out,
            },
            cold_scan_s: c.scan_seconds,
            resident_gpu_s: resident.gpu_s,
            resident_scan_s: resident.scan_s,
            same_top_k: same,
        })
    }
}

/// Recall@10 of the resident search's first ten cold queries against brute force.
fn recall_note(
    args: &Args,
    pct: f64,
    data: &Vectors,
    queries: &Vectors,
    out: &SearchOutcome,
) -> String {
    let s = 10.min(queries.len());
    format!(
        "recall@10 at {pct}% (nprobe {}), {s} queries against brute force: {:.3}",
        args.nprobe,
        workload::recall(data, queries, out, s)
    )
}
