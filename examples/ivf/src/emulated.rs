//! The IVF search pipeline of [`crate::gpu`] (coarse, plan, scan, merge), run on the CPU
//! emulator with host memory: the same kernels through the same typed launchers, so CI
//! checks the kernels' logic against [`crate::cpu`] without a GPU.

use std::time::Instant;

use ivf_kernels::{HINT_L2, HINT_NONE, K, MAX_NPROBE, PLAN_THREADS, SCAN_THREADS};
use lookahead::emu::Emulator;
use lookahead::launch::LaunchConfig;
use lookahead::Result;
use lookahead_device::requests::RequestQueue;

use crate::data::Vectors;
use crate::index::IvfLayout;

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
}

impl Default for EmulatedParams {
    fn default() -> Self {
        EmulatedParams {
            nprobe: 4,
            chunk_rows: 64,
            hints: false,
            scan_blocks: 4,
            pull: false,
            copy_every: 2,
        }
    }
}

/// Searches `queries` over the list-major vectors `lists` of `layout`, every kernel running
/// on `emu`, asking `queue` for the probed lists (pass [`RequestQueue::disabled`] for none;
/// a host ring from `lookahead_uvm::RequestRing::in_host_memory` exercises the protocol).
pub fn search(
    emu: &Emulator,
    layout: &IvfLayout,
    lists: &[f32],
    queries: &Vectors,
    params: EmulatedParams,
    queue: RequestQueue,
) -> Result<EmulatedSearch> {
    let dim = layout.dim;
    let nq = queries.len();
    let nlist = layout.nlist();
    let nprobe = params.nprobe.clamp(1, MAX_NPROBE.min(nlist));
    let pairs = nq * nprobe;
    let max_len = (0..nlist).map(|l| layout.list_len(l)).max().unwrap_or(0);
    let items_cap = ivf_kernels::max_items(pairs, max_len, params.chunk_rows);

    // Outputs start poisoned, so a slot the kernels forget shows up.
    let mut probes = vec![u32::MAX; pairs];
    ivf_kernels::coarse::launch(
        emu,
        ivf_kernels::coarse_config(nq),
        &queries.data,
        &layout.centroids_transposed(),
        dim as u32,
        nlist as u32,
        nprobe as u32,
        &mut probes,
    )?;
    let mut counts = vec![u32::MAX; nlist];
    let mut slots = vec![u32::MAX; pairs];
    let mut probed = vec![u32::MAX; nlist];
    let mut wanted = vec![u32::MAX; nlist];
    let mut list_item_off = vec![u32::MAX; nlist];
    let mut pair_cand_off = vec![u32::MAX; pairs + 1];
    let mut item_pair = vec![u32::MAX; items_cap];
    let mut item_chunk = vec![u32::MAX; items_cap];
    let mut totals = vec![0u32; 4];
    let mut copied = vec![0u32; nlist.max(1)];
    let mut copy_first = vec![u32::MAX; nlist + 1];
    ivf_kernels::plan::launch(
        emu,
        LaunchConfig::new((1, 1, 1), (PLAN_THREADS, 1, 1)),
        &probes,
        &layout.offsets,
        lists,
        dim as u32,
        params.chunk_rows,
        queue,
        params.pull as u32,
        &mut copied,
        &mut copy_first,
        &mut counts,
        &mut slots,
        &mut probed,
        &mut wanted,
        &mut list_item_off,
        &mut pair_cand_off,
        &mut item_pair,
        &mut item_chunk,
        &mut totals,
    )?;
    let probed_lists = totals[0] as usize;
    let items = totals[1] as usize;
    let scanned_floats = probed[..probed_lists]
        .iter()
        .map(|&l| counts[l as usize] as u64 * layout.list_len(l as usize) as u64 * dim as u64)
        .sum();

    let mut cand_d = vec![f32::NAN; items_cap * K];
    let mut cand_i = vec![0u32; items_cap * K];
    let mut readiness = vec![0u32; nlist.max(1)];
    let started = Instant::now();
    let grid = LaunchConfig::new((params.scan_blocks.max(1), 1, 1), (SCAN_THREADS, 1, 1));
    let (mut from_cache, mut cache_matches) = (0, true);
    if params.pull {
        let mut cache = vec![f32::NAN; lists.len()];
        let mut work = vec![0u64; ivf_kernels::PULL_WORK_WORDS];
        ivf_kernels::pull_scan::launch(
            emu,
            grid,
            lists,
            &mut cache,
            &mut copied,
            &wanted,
            &copy_first,
            &layout.offsets,
            &layout.ids,
            &queries.data,
            &probes,
            &item_pair,
            &item_chunk,
            &totals,
            &pair_cand_off,
            dim as u32,
            nprobe as u32,
            params.chunk_rows,
            params.copy_every,
            60_000_000,
            &mut work,
            &mut readiness,
            &mut cand_d,
            &mut cand_i,
        )?;
        from_cache = probed[..probed_lists]
            .iter()
            .filter(|&&l| readiness[l as usize] == ivf_kernels::READY_ARRIVED)
            .count();
        cache_matches = wanted[..totals[2] as usize].iter().all(|&l| {
            let r = layout.offsets[l as usize] as usize * dim
                ..layout.offsets[l as usize + 1] as usize * dim;
            cache[r.clone()] == lists[r]
        });
    } else {
        ivf_kernels::scan::launch(
            emu,
            grid,
            lists,
            &layout.offsets,
            &layout.ids,
            &queries.data,
            &probes,
            &item_pair,
            &item_chunk,
            &totals,
            &pair_cand_off,
            dim as u32,
            nprobe as u32,
            params.chunk_rows,
            if params.hints { HINT_L2 } else { HINT_NONE },
            queue,
            &mut readiness,
            &mut cand_d,
            &mut cand_i,
        )?;
    }
    let scan_seconds = started.elapsed().as_secs_f64();
    let mut dist = vec![f32::NAN; nq * K];
    let mut ids = vec![0xFFFF_FFFEu32; nq * K];
    ivf_kernels::merge::launch(
        emu,
        LaunchConfig::for_len(nq * 32, SCAN_THREADS),
        &cand_d,
        &cand_i,
        &pair_cand_off,
        nprobe as u32,
        &mut dist,
        &mut ids,
    )?;
    Ok(EmulatedSearch {
        dist,
        ids,
        probed_lists,
        wanted: wanted[..totals[2] as usize].to_vec(),
        from_cache,
        cache_matches,
        probed: probed[..probed_lists].to_vec(),
        items,
        scanned_floats,
        scan_seconds,
    })
}
