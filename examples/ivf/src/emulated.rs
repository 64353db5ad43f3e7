//! The IVF search pipeline of [`crate::gpu`] (coarse, plan, compact, scan, merge), run on
//! the CPU emulator with host memory: the same kernels through the same typed launchers, so
//! CI checks the kernels' logic against [`crate::cpu`] without a GPU.

use std::time::Instant;

use ivf_kernels::{HINT_L2, HINT_NONE, K, MAX_NPROBE, SCAN_THREADS};
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
    /// Floats the scan compared: for each (query, probed list) pair, the list's length
    /// times the dimension.
    pub scanned_floats: u64,
    /// Wall time of the scan kernel alone.
    pub scan_seconds: f64,
}

/// Searches `queries` over the list-major vectors `lists` of `layout` with `nprobe` probes,
/// every kernel running on `emu`. `hints` makes the scan issue its in-kernel L2 prefetches
/// (recorded in the emulator's prefetch trace when it is on).
pub fn search(
    emu: &Emulator,
    layout: &IvfLayout,
    lists: &[f32],
    queries: &Vectors,
    nprobe: usize,
    hints: bool,
) -> Result<EmulatedSearch> {
    let dim = layout.dim;
    let nq = queries.len();
    let nlist = layout.nlist();
    let nprobe = nprobe.clamp(1, MAX_NPROBE.min(nlist));

    let mut probes = vec![u32::MAX; nq * nprobe];
    ivf_kernels::coarse::launch(
        emu,
        LaunchConfig::for_len(nq * 32, 128),
        &queries.data,
        &layout.centroids,
        dim as u32,
        nprobe as u32,
        &mut probes,
    )?;
    let max_per_list = nq as u32;
    let mut counts = vec![0u32; nlist];
    let mut pairs = vec![u32::MAX; nlist * nq];
    ivf_kernels::plan::launch(
        emu,
        LaunchConfig::for_len(nq * nprobe, 256),
        &probes,
        max_per_list,
        &mut counts,
        &mut pairs,
    )?;
    let mut probed = vec![u32::MAX; nlist];
    let mut m = vec![u32::MAX; 1];
    ivf_kernels::compact::launch(
        emu,
        LaunchConfig::for_len(1, 32),
        &counts,
        &mut probed,
        &mut m,
    )?;
    let probed_lists = m[0] as usize;
    let scanned_floats = probed[..probed_lists]
        .iter()
        .map(|&l| counts[l as usize] as u64 * layout.list_len(l as usize) as u64 * dim as u64)
        .sum();

    let pairs_total = nq * nprobe;
    let mut cand_d = vec![f32::NAN; pairs_total * K];
    let mut cand_i = vec![0u32; pairs_total * K];
    let mut readiness = vec![0u32; nlist.max(1)];
    // About four lists per block, so each block scans several lists in turn (and the
    // hints, which prefetch a block's next list, have something to do).
    let blocks = (probed_lists as u32).div_ceil(4).clamp(1, 64);
    let started = Instant::now();
    ivf_kernels::scan::launch(
        emu,
        LaunchConfig::new((blocks, 1, 1), (SCAN_THREADS, 1, 1)),
        lists,
        &layout.offsets,
        &layout.ids,
        &queries.data,
        &probed,
        &m,
        &counts,
        &pairs,
        dim as u32,
        nprobe as u32,
        max_per_list,
        1,
        if hints { HINT_L2 } else { HINT_NONE },
        RequestQueue::disabled(),
        &mut readiness,
        &mut cand_d,
        &mut cand_i,
    )?;
    let scan_seconds = started.elapsed().as_secs_f64();
    let mut dist = vec![f32::NAN; nq * K];
    let mut ids = vec![0u32; nq * K];
    ivf_kernels::merge::launch(
        emu,
        LaunchConfig::for_len(nq, 128),
        &cand_d,
        &cand_i,
        nprobe as u32,
        &mut dist,
        &mut ids,
    )?;
    Ok(EmulatedSearch {
        dist,
        ids,
        probed_lists,
        scanned_floats,
        scan_seconds,
    })
}
