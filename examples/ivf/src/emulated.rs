//! The IVF search pipeline of [`crate::gpu`] (coarse, plan, scan, merge), run on the CPU
//! emulator with host memory: the same kernels through the same typed launchers, so CI
//! checks the kernels' logic against [`crate::cpu`] without a GPU.

use std::time::Instant;

use ivf_kernels::{
    BatchArgs, BoundItemsArgs, CandidatesArgs, IndexArgs, PairPlanOutArgs, PlanOutArgs, PullArgs,
    PullPlanArgs, TilePlanArgs, TileWorkInArgs, TileWorkOutArgs, Total, WorkPlanArgs, HINT_L2,
    HINT_NONE, K, MAX_NPROBE, PLAN_THREADS, SCAN_THREADS, TOTAL_WORDS,
};
use lookahead::emu::Emulator;
use lookahead::launch::{HostMemory, LaunchConfig};
use lookahead::Result;
use lookahead_uvm::RingQueue;

use crate::data::Vectors;
use crate::index::{IvfLayout, TileLaunch};

/// What an emulated search returns.
#[derive(Debug, Clone)]
pub struct EmulatedSearch {
    /// `nq * K` distances, nearest first per query.
    pub dist: Vec<f32>,
    /// `nq * K` ids (`u32::MAX` where a query found fewer than `K`).
    pub ids: Vec<u32>,
    /// Lists probed by at least one query.
    pub probed_lists: usize,
    /// The probed lists, in list order.
    pub probed: Vec<u32>,
    /// The lists the plan asked the queue for (empty with a disabled queue), or with
    /// `pull`, the lists `pull_scan` copied into its cache.
    pub wanted: Vec<u32>,
    /// With `pull`: probed lists the scan read from the cache (their copy was complete).
    pub from_cache: usize,
    /// With `pull`: whether the cache holds exactly the lists' data at every copied list.
    pub cache_matches: bool,
    /// Work items (pair, chunk) the scan ran.
    pub items: usize,
    /// Floats the scan compared: for each (query, probed list) pair, the list's length
    /// times the dimension.
    pub scanned_floats: u64,
    /// Wall time of the scan kernel alone.
    pub scan_seconds: f64,
}

/// How an emulated search runs.
#[derive(Debug, Clone, Copy)]
pub struct EmulatedParams {
    /// Lists probed per query.
    pub nprobe: usize,
    /// Vectors per scan work item.
    pub chunk_rows: u32,
    /// Whether the scan issues its in-kernel L2 prefetches (recorded in the emulator's
    /// prefetch trace when it is on).
    pub hints: bool,
    /// Blocks of the scan kernel.
    pub scan_blocks: u32,
    /// Run the GPU-driven pull path (`pull_scan` with a fresh cache) instead of `scan`;
    /// then the blocks on every `copy_every`-th SM copy (the emulator gives every block an
    /// SM of its own), and warp 0 of block 0.
    pub pull: bool,
    /// See `pull`.
    pub copy_every: u32,
    /// The merge gives each query a block when there are at most this many queries (the
    /// SMs of the GPU it stands for), else a warp.
    pub merge_sms: usize,
    /// Plan with `plan_pairs` (as small resident batches do) instead of `plan`; only without
    /// a queue and without `pull`. The result's per-list counts are then empty.
    pub pair_plan: bool,
    /// `Some(n)`: scan by tiles (`tile_bounds`, then `bounded_scan`), in launches of at
    /// most `n` bounds (at least one work item each; the GPU's launches cover as many as
    /// its bounds buffer holds); only with `plan` and without a queue or `pull`.
    pub tiles: Option<usize>,
}

impl Default for EmulatedParams {
    fn default() -> Self {
        EmulatedParams {
            nprobe: 4,
            chunk_rows: 64,
            hints: false,
            scan_blocks: 4,
            merge_sms: 0,
            pull: false,
            copy_every: 2,
            pair_plan: false,
            tiles: None,
        }
    }
}

/// Searches `queries` over the list-major vectors `lists` of `layout`, every kernel running
/// on `emu`, asking `queue` for the probed lists (`RingQueue::disabled()` for none; a queue
/// of a host ring from `lookahead_uvm::RequestRing::in_host_memory` exercises the protocol).
pub fn search(
    emu: &Emulator,
    layout: &IvfLayout,
    lists: &[f32],
    queries: &Vectors,
    params: EmulatedParams,
    queue: RingQueue<'_, HostMemory>,
) -> Result<EmulatedSearch> {
    let nlist = layout.nlist();
    let nprobe = params.nprobe.clamp(1, MAX_NPROBE.min(nlist));
    let pairs = queries.len() * nprobe;
    let max_len = (0..nlist).map(|l| layout.list_len(l)).max().unwrap_or(0);
    let inp = Inputs {
        emu,
        layout,
        lists,
        queries,
        params,
        nprobe,
    };
    let items_cap = ivf_kernels::max_items(pairs, max_len, params.chunk_rows);
    let mut plan = Plan::poisoned(nlist, pairs, items_cap);
    plan.probes = inp.coarse()?;
    inp.run_plan(&mut plan, queue)?;
    let mut cands = Cands::poisoned(nlist, items_cap);
    let started = Instant::now();
    let (from_cache, cache_matches) = if params.pull {
        inp.pull_scan(&mut plan, &mut cands)?
    } else if let Some(piece) = params.tiles {
        inp.tile_scan(&plan, &mut cands, piece)?;
        (0, true)
    } else {
        inp.scan(&plan, &mut cands, queue)?;
        (0, true)
    };
    let scan_seconds = started.elapsed().as_secs_f64();
    let (dist, ids) = inp.merge(&plan, &cands)?;
    Ok(inp.result(&plan, dist, ids, from_cache, cache_matches, scan_seconds))
}

/// The plan's arrays, starting poisoned, so a slot the kernels forget shows up.
struct Plan {
    probes: Vec<u32>,
    counts: Vec<u32>,
    slots: Vec<u32>,
    probed: Vec<u32>,
    wanted: Vec<u32>,
    list_item_off: Vec<u32>,
    pair_cand_off: Vec<u32>,
    item_pair: Vec<u32>,
    item_chunk: Vec<u32>,
    totals: Vec<u32>,
    copied: Vec<u32>,
    copy_first: Vec<u32>,
}

impl Plan {
    fn poisoned(nlist: usize, pairs: usize, items: usize) -> Self {
        Plan {
            probes: vec![u32::MAX; pairs],
            counts: vec![u32::MAX; nlist],
            slots: vec![u32::MAX; pairs],
            probed: vec![u32::MAX; nlist],
            wanted: vec![u32::MAX; nlist],
            list_item_off: vec![u32::MAX; nlist],
            pair_cand_off: vec![u32::MAX; pairs + 1],
            item_pair: vec![u32::MAX; items],
            item_chunk: vec![u32::MAX; items],
            totals: vec![0u32; TOTAL_WORDS],
            copied: vec![0u32; nlist.max(1)],
            copy_first: vec![u32::MAX; nlist + 1],
        }
    }
}

/// A scan's outputs.
struct Cands {
    readiness: Vec<u32>,
    dist: Vec<f32>,
    ids: Vec<u32>,
}

impl Cands {
    fn poisoned(nlist: usize, items: usize) -> Self {
        Cands {
            readiness: vec![0u32; nlist.max(1)],
            dist: vec![f32::NAN; items * K],
            ids: vec![0u32; items * K],
        }
    }
}

/// One emulated search's inputs.
struct Inputs<'a> {
    emu: &'a Emulator,
    layout: &'a IvfLayout,
    lists: &'a [f32],
    queries: &'a Vectors,
    params: EmulatedParams,
    nprobe: usize,
}

impl Inputs<'_> {
    fn index(&self) -> IndexArgs<'_, HostMemory> {
        IndexArgs {
            vectors: &self.lists,
            offsets: &self.layout.offsets,
            ids: &self.layout.ids,
            dim: self.layout.dim as u32,
            chunk_rows: self.params.chunk_rows,
        }
    }

    fn coarse(&self) -> Result<Vec<u32>> {
        let mut probes = vec![u32::MAX; self.queries.len() * self.nprobe];
        let shape = ivf_kernels::CoarseShape {
            dim: self.layout.dim as u32,
            nlist: self.layout.nlist() as u32,
            nprobe: self.nprobe as u32,
            per_block: 0,
        };
        ivf_kernels::coarse::launch(
            self.emu,
            ivf_kernels::coarse_config(self.queries.len()),
            &self.queries.data,
            &self.layout.centroids_quads(),
            shape,
            &mut probes,
            &mut Vec::new(),
        )?;
        Ok(probes)
    }

    fn run_plan(&self, p: &mut Plan, queue: RingQueue<'_, HostMemory>) -> Result<()> {
        let cfg = LaunchConfig::new((1, 1, 1), (PLAN_THREADS, 1, 1));
        if self.params.pair_plan && !self.params.pull && !queue.is_enabled() {
            return ivf_kernels::plan_pairs::launch(
                self.emu,
                cfg,
                &p.probes,
                self.index(),
                PairPlanOutArgs {
                    pair_cand_off: &mut p.pair_cand_off,
                    item_pair: &mut p.item_pair,
                    item_chunk: &mut p.item_chunk,
                    totals: &mut p.totals,
                },
            );
        }
        ivf_kernels::plan::launch(
            self.emu,
            cfg,
            &p.probes,
            self.index(),
            queue,
            self.params.pull as u32,
            PullPlanArgs {
                copied: &mut p.copied,
                copy_first: &mut p.copy_first,
            },
            PlanOutArgs {
                counts: &mut p.counts,
                slots: &mut p.slots,
                probed: &mut p.probed,
                wanted: &mut p.wanted,
                list_item_off: &mut p.list_item_off,
                pair_cand_off: &mut p.pair_cand_off,
                item_pair: &mut p.item_pair,
                item_chunk: &mut p.item_chunk,
                totals: &mut p.totals,
            },
        )
    }

    fn batch<'p>(&'p self, p: &'p Plan, hints: u32) -> BatchArgs<'p, HostMemory> {
        BatchArgs {
            queries: &self.queries.data,
            probes: &p.probes,
            nprobe: self.nprobe as u32,
            hints,
        }
    }

    fn grid(&self) -> LaunchConfig {
        LaunchConfig::new((self.params.scan_blocks.max(1), 1, 1), (SCAN_THREADS, 1, 1))
    }

    fn scan(&self, p: &Plan, c: &mut Cands, queue: RingQueue<'_, HostMemory>) -> Result<()> {
        let hints = if self.params.hints {
            HINT_L2
        } else {
            HINT_NONE
        };
        let out = CandidatesArgs {
            readiness: &mut c.readiness,
            dist: &mut c.dist,
            ids: &mut c.ids,
        };
        let (index, batch) = (self.index(), self.batch(p, hints));
        ivf_kernels::scan::launch(self.emu, self.grid(), index, batch, work(p), queue, out)
    }

    /// The tiled scan in launches of at most `most` bounds (at least one work item each),
    /// each bound checked against the distance it bounds before the bounded scan reads it.
    fn tile_scan(&self, p: &Plan, c: &mut Cands, most: usize) -> Result<()> {
        let norms = crate::index::squared_norms(self.lists, self.layout.dim);
        let (mut units, off, launch) = self.tile_work(p, most)?;
        units.truncate(launch.units * ivf_kernels::UNIT_WORDS);
        let tiles = LaunchConfig::new(
            (launch.units as u32, 1, 1),
            (ivf_kernels::TILE_THREADS, 1, 1),
        );
        for &(first, count) in &launch.pieces {
            // 16-byte aligned, as the GPU's buffer is (the bounded scan reads quads).
            let n = (off[first + count] - off[first]) as usize;
            let mut storage = vec![f32::NAN; n + 3];
            let at = (16 - storage.as_ptr() as usize % 16) % 16 / 4;
            let bounds = &mut storage[at..at + n];
            let range = || BoundItemsArgs {
                offsets: &off,
                first: first as u32,
                count: count as u32,
            };
            let plan = TilePlanArgs {
                counts: &p.counts,
                list_item_off: &p.list_item_off,
                item_pair: &p.item_pair,
                units: &units,
                norms: &norms,
            };
            let (q, nprobe) = (&self.queries.data, self.nprobe as u32);
            if launch.units > 0 {
                ivf_kernels::tile_bounds::launch(
                    self.emu,
                    tiles,
                    self.index(),
                    q,
                    nprobe,
                    plan,
                    range(),
                    bounds,
                )?;
            }
            self.check_bounds(p, (first, count), &off, bounds);
            let out = CandidatesArgs {
                readiness: &mut c.readiness,
                dist: &mut c.dist,
                ids: &mut c.ids,
            };
            let (index, batch) = (self.index(), self.batch(p, HINT_NONE));
            ivf_kernels::bounded_scan::launch(
                self.emu,
                self.grid(),
                index,
                batch,
                work(p),
                range(),
                bounds,
                out,
            )?;
        }
        Ok(())
    }

    /// The tiled scan's work as [`ivf_kernels::tile_work`] lists it (its units and bound
    /// offsets), checked against the host's listing ([`IvfLayout::tile_work`]; panics where
    /// they differ: a test's failure), and its launches of at most `most` bounds, decided as
    /// the GPU search decides them ([`TileLaunch`]).
    fn tile_work(&self, p: &Plan, most: usize) -> Result<(Vec<u32>, Vec<u64>, TileLaunch)> {
        let layout = self.layout;
        let probed = &p.probed[..Total::ProbedLists.of(&p.totals)];
        let want = layout.tile_work(probed, &p.counts, self.params.chunk_rows);
        let pairs = self.queries.len() * self.nprobe;
        let most_units = layout.tile_units_at_most(pairs, self.params.chunk_rows);
        let items = Total::WorkItems.of(&p.totals);
        let mut units = vec![u32::MAX; most_units * ivf_kernels::UNIT_WORDS];
        let mut bound_off = vec![u64::MAX; items + 1];
        let mut summary = vec![u64::MAX; ivf_kernels::TILE_SUMMARY_WORDS];
        let plan = TileWorkInArgs {
            probed: &p.probed,
            counts: &p.counts,
            list_item_off: &p.list_item_off,
            totals: &p.totals,
        };
        let out = TileWorkOutArgs {
            units: &mut units,
            bound_off: &mut bound_off,
            summary: &mut summary,
        };
        let cfg = LaunchConfig::new((1, 1, 1), (PLAN_THREADS, 1, 1));
        ivf_kernels::tile_work::launch(self.emu, cfg, self.index(), plan, out)?;
        let n_units = summary[0] as usize * ivf_kernels::UNIT_WORDS;
        assert_eq!(summary[1] as usize, items, "tile_work's work items");
        assert_eq!(
            summary[2],
            *want.bound_off.last().unwrap(),
            "tile_work's bounds"
        );
        assert_eq!(units[..n_units], want.units[..], "tile_work's units");
        assert_eq!(bound_off, want.bound_off, "tile_work's bound offsets");
        let limits = (most_units, items, most as u64);
        let launch = TileLaunch::new(&summary, limits, || Ok(bound_off.clone()))?;
        Ok((units, bound_off, launch))
    }

    /// Every bound `tile_bounds` wrote for the items `first..first + count` (from
    /// `off[it] - off[first]` each) is written and at most the squared distance it bounds,
    /// summed in `f64` (panics otherwise: a test's failure).
    fn check_bounds(&self, p: &Plan, (first, count): (usize, usize), off: &[u64], bounds: &[f32]) {
        let (dim, chunk) = (self.layout.dim, self.params.chunk_rows.max(1) as usize);
        for it in first..first + count {
            let pair = p.item_pair[it] as usize;
            let (l, ch) = (p.probes[pair] as usize, p.item_chunk[it] as usize);
            let q = self.queries.row(pair / self.nprobe);
            let a = self.layout.offsets[l] as usize + ch * chunk;
            let b = (a + chunk).min(self.layout.offsets[l + 1] as usize);
            assert_eq!(
                off[it + 1] - off[it],
                ivf_kernels::item_bounds(b - a),
                "item {it}: its bounds"
            );
            for r in a..b {
                let x = &self.lists[r * dim..(r + 1) * dim];
                let exact: f64 = (q.iter().zip(x))
                    .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
                    .sum();
                let got = bounds[(off[it] - off[first]) as usize + r - a];
                assert!(
                    (got as f64) <= exact,
                    "tile_bounds: item {it} vector {r}: bound {got} above the distance {exact}"
                );
            }
        }
    }

    /// `pull_scan` with a fresh cache; returns how many probed lists came from the cache and
    /// whether the cache holds exactly the lists' data at every copied list.
    fn pull_scan(&self, p: &mut Plan, c: &mut Cands) -> Result<(usize, bool)> {
        let mut cache = vec![f32::NAN; self.lists.len()];
        let mut work_words = vec![0u64; ivf_kernels::PULL_WORK_WORDS];
        let mut copied = std::mem::take(&mut p.copied);
        ivf_kernels::pull_scan::launch(
            self.emu,
            self.grid(),
            self.index(),
            self.batch(p, HINT_NONE),
            work(p),
            PullArgs {
                cache: &mut cache,
                copied: &mut copied,
                wanted: &p.wanted,
                copy_first: &p.copy_first,
                work: &mut work_words,
                copy_every: self.params.copy_every,
                wait_us: 60_000_000,
            },
            CandidatesArgs {
                readiness: &mut c.readiness,
                dist: &mut c.dist,
                ids: &mut c.ids,
            },
        )?;
        p.copied = copied;
        let probed = &p.probed[..Total::ProbedLists.of(&p.totals)];
        let from_cache = (probed.iter())
            .filter(|&&l| c.readiness[l as usize] == ivf_kernels::READY_ARRIVED)
            .count();
        let (offsets, dim) = (&self.layout.offsets, self.layout.dim);
        let matches = p.wanted[..Total::WantedLists.of(&p.totals)]
            .iter()
            .all(|&l| {
                let r = offsets[l as usize] as usize * dim..offsets[l as usize + 1] as usize * dim;
                cache[r.clone()] == self.lists[r]
            });
        Ok((from_cache, matches))
    }

    fn merge(&self, p: &Plan, c: &Cands) -> Result<(Vec<f32>, Vec<u32>)> {
        let nq = self.queries.len();
        let mut dist = vec![f32::NAN; nq * K];
        let mut ids = vec![0xFFFF_FFFEu32; nq * K];
        // A block per query for small batches, as on a GPU of `merge_sms` SMs.
        let (cfg, shape) = ivf_kernels::merge_config(nq, self.nprobe, self.params.merge_sms);
        ivf_kernels::merge::launch(
            self.emu,
            cfg,
            &c.dist,
            &c.ids,
            &p.pair_cand_off,
            shape,
            &mut dist,
            &mut ids,
        )?;
        Ok((dist, ids))
    }

    fn result(
        &self,
        p: &Plan,
        dist: Vec<f32>,
        ids: Vec<u32>,
        from_cache: usize,
        cache_matches: bool,
        scan_seconds: f64,
    ) -> EmulatedSearch {
        let probed_lists = Total::ProbedLists.of(&p.totals);
        let probed = &p.probed[..probed_lists];
        let dim = self.layout.dim as u64;
        let scanned_floats = (probed.iter())
            .map(|&l| p.counts[l as usize] as u64 * self.layout.list_len(l as usize) as u64 * dim)
            .sum();
        EmulatedSearch {
            dist,
            ids,
            probed_lists,
            wanted: p.wanted[..Total::WantedLists.of(&p.totals)].to_vec(),
            from_cache,
            cache_matches,
            probed: probed.to_vec(),
            items: Total::WorkItems.of(&p.totals),
            scanned_floats,
            scan_seconds,
        }
    }
}

/// The plan's work items, as the scans read them.
fn work(p: &Plan) -> WorkPlanArgs<'_, HostMemory> {
    WorkPlanArgs {
        item_pair: &p.item_pair,
        item_chunk: &p.item_chunk,
        totals: &p.totals,
        pair_cand_off: &p.pair_cand_off,
    }
}
