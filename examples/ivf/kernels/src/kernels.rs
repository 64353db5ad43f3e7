//! The IVF kernels.

use lookahead_device::kernel;
use lookahead_device::prelude::*;
use lookahead_device::pull;
use lookahead_device::requests::{Readiness, RequestQueue};

use crate::block::{exclusive_sum, SCRATCH_WORDS};
use crate::topk::TopK;
use crate::{
    COARSE_QUERIES_PER_BLOCK as QW, COARSE_WARPS, DIMS_PER_LANE, HINT_L2, K, LANES_PER_ROW,
    MAX_DIM, MAX_NPROBE, PULL_WORK_WORDS, READY_ARRIVED, READY_TIMED_OUT, READY_WENT_AHEAD,
};

/// Inserts `(dist, id)` into the sorted list `(ds, is)` of `n` entries (ties by id).
#[inline(always)]
fn insert(ds: &mut [f32], is: &mut [u32], n: usize, dist: f32, id: u32) {
    let last = n - 1;
    if dist > ds[last] || (dist == ds[last] && id >= is[last]) {
        return;
    }
    let mut j = last;
    while j > 0 && (ds[j - 1] > dist || (ds[j - 1] == dist && is[j - 1] > id)) {
        ds[j] = ds[j - 1];
        is[j] = is[j - 1];
        j -= 1;
    }
    ds[j] = dist;
    is[j] = id;
}

/// The smallest `(distance, index)` pair over the warp's lanes (ties by index), on every lane.
#[inline(always)]
fn warp_min((mut bd, mut bi): (f32, u32)) -> (f32, u32) {
    let mut step = 16;
    while step > 0 {
        let od = warp::shfl_xor_f32(bd, step);
        let oi = warp::shfl_xor_u32(bi, step);
        if od < bd || (od == bd && oi < bi) {
            bd = od;
            bi = oi;
        }
        step /= 2;
    }
    (bd, bi)
}

/// `probes[q * nprobe + j]` = the `j`-th nearest centroid to query `q` (ties by index).
///
/// Launch blocks of [`COARSE_THREADS`](crate::COARSE_THREADS) threads, one block per
/// [`COARSE_QUERIES_PER_BLOCK`](crate::COARSE_QUERIES_PER_BLOCK) queries. The block's queries
/// are staged in shared memory; its warps split the centroids, and each lane reads
/// `centroids_t` (the centroids transposed, `dim x nlist`) so that 32 lanes load 32
/// consecutive floats, computing its centroid's distance to all of the block's queries from
/// one load. Each lane keeps a sorted `nprobe` nearest per query; each warp merges its lanes'
/// by shuffles into shared memory, and one warp per query merges the warps'. Distances are
/// summed in dimension order, exactly as the CPU reference does.
#[kernel]
pub fn coarse(
    queries: &[f32],
    centroids_t: &[f32],
    dim: u32,
    nlist: u32,
    nprobe: u32,
    probes: &mut [u32],
) {
    let dim = dim as usize;
    let nlist = nlist as usize;
    let nprobe = (nprobe as usize).min(MAX_NPROBE).min(nlist);
    let nq = if dim == 0 { 0 } else { queries.len() / dim };
    let lane = lane_id() as usize;
    let warp = thread_idx_x() as usize / 32;
    let q0 = block_idx_x() as usize * QW;
    let staged = shared_array!(f32; QW * MAX_DIM);
    let best_d = shared_array!(f32; QW * COARSE_WARPS * MAX_NPROBE);
    let best_i = shared_array!(u32; QW * COARSE_WARPS * MAX_NPROBE);
    let usable = dim > 0 && dim <= MAX_DIM && nprobe > 0 && centroids_t.len() >= dim * nlist;
    if usable {
        let mut f = thread_idx_x() as usize;
        while f < QW * dim {
            let (j, d) = (f / dim, f % dim);
            let v = if q0 + j < nq {
                queries[(q0 + j) * dim + d]
            } else {
                0.0
            };
            staged.set(j * MAX_DIM + d, v);
            f += block_dim_x() as usize;
        }
    }
    // Barriers every thread reaches (no early return before them).
    sync_threads();
    let active = usable && q0 < nq;
    let mut ds = [[f32::INFINITY; MAX_NPROBE]; QW];
    let mut is = [[u32::MAX; MAX_NPROBE]; QW];
    if active {
        let mut c = warp * 32 + lane;
        while c < nlist {
            let mut acc = [0.0f32; QW];
            for d in 0..dim {
                // SAFETY: d < dim and c < nlist, and centroids_t holds dim * nlist floats
                // (checked in `usable`).
                let cv = unsafe { *centroids_t.get_unchecked(d * nlist + c) };
                for j in 0..QW {
                    // SAFETY: j * MAX_DIM + d < QW * MAX_DIM.
                    let t = unsafe { staged.get_unchecked(j * MAX_DIM + d) } - cv;
                    acc[j] += t * t;
                }
            }
            for j in 0..QW {
                let (dj, ij) = (&mut ds[j], &mut is[j]);
                if acc[j] < dj[nprobe - 1]
                    || (acc[j] == dj[nprobe - 1] && (c as u32) < ij[nprobe - 1])
                {
                    insert(dj, ij, nprobe, acc[j], c as u32);
                }
            }
            c += COARSE_WARPS * 32;
        }
    }
    // Each warp's best `nprobe` per query, by shuffles, into shared memory.
    for j in 0..QW {
        let mut head = 0usize;
        for r in 0..nprobe {
            let (bd, bi) = warp_min(if head < nprobe {
                (ds[j][head], is[j][head])
            } else {
                (f32::INFINITY, u32::MAX)
            });
            // Centroid indices are distinct, so at most one lane holds the winner.
            if head < nprobe && is[j][head] == bi {
                head += 1;
            }
            if lane == 0 {
                best_d.set((j * COARSE_WARPS + warp) * MAX_NPROBE + r, bd);
                best_i.set((j * COARSE_WARPS + warp) * MAX_NPROBE + r, bi);
            }
        }
    }
    sync_threads();
    // Warp `j` merges query `j`'s per-warp lists: lane `w < COARSE_WARPS` walks warp `w`'s list.
    if active && warp < QW && q0 + warp < nq {
        let j = warp;
        let list = |w: usize, r: usize| (j * COARSE_WARPS + w) * MAX_NPROBE + r;
        let mut head = 0usize;
        for r in 0..nprobe {
            let (_, bi) = warp_min(if lane < COARSE_WARPS && head < nprobe {
                (best_d.get(list(lane, head)), best_i.get(list(lane, head)))
            } else {
                (f32::INFINITY, u32::MAX)
            });
            if lane < COARSE_WARPS && head < nprobe && best_i.get(list(lane, head)) == bi {
                head += 1;
            }
            if lane == 0 {
                probes[(q0 + j) * nprobe + r] = bi;
            }
        }
    }
}

/// Plans the scan, in one block of [`PLAN_THREADS`](crate::PLAN_THREADS) threads.
///
/// From the (query, probe) pairs `probes` (pair `p` = query `p / nprobe`), it counts the
/// pairs of each list (`counts`, each pair's `slots` index among them), lists the probed
/// lists in list order (`probed`, their number in `totals[0]`), and, when `queue` is
/// enabled, asks the host at once for those of them not still resident from an earlier
/// request (`wanted`, their number in `totals[2]`; one ring claim, in list order, which is
/// address order; lists that do not fit are marked "go ahead", resident ones "arrived").
/// With `pull != 0` (for [`pull_scan`]) `wanted` lists instead the probed lists whose copy
/// in the device cache is not complete (`copied[l]` below [`pull::chunks`] of the list's
/// bytes), their counts reset, and numbers their copy chunks: the `k`-th wanted list's start
/// at `copy_first[k]`, and `copy_first[totals[2]] = totals[3]` is their total.
/// Then it cuts each list into chunks of `chunk_rows` vectors and writes the scan's work items, one per (pair, chunk): `item_pair` /
/// `item_chunk`, list by list, chunk by chunk, the pairs of a chunk next to each other (so
/// their reads of the chunk share the L2 cache); `totals[1]` is their number. Each pair's
/// candidate lists start at `pair_cand_off[p]` (in lists of `K`; `pair_cand_off[P]` is the
/// total), so a query's candidates are contiguous for [`merge`].
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn plan(
    probes: &[u32],
    offsets: &[u64],
    lists: ManagedSlice<f32>,
    dim: u32,
    chunk_rows: u32,
    queue: RequestQueue,
    pull: u32,
    copied: &mut [u32],
    copy_first: &mut [u32],
    counts: &mut [u32],
    slots: &mut [u32],
    probed: &mut [u32],
    wanted: &mut [u32],
    list_item_off: &mut [u32],
    pair_cand_off: &mut [u32],
    item_pair: &mut [u32],
    item_chunk: &mut [u32],
    totals: &mut [u32],
) {
    let nlist = offsets.len().saturating_sub(1).min(counts.len());
    let pairs = probes.len().min(slots.len());
    let tid = thread_idx_x() as usize;
    let threads = block_dim_x() as usize;
    let chunk = (chunk_rows as usize).max(1);
    let dim = dim as usize;
    let scratch = shared_array!(u32; SCRATCH_WORDS);
    let claim = shared_array!(u32; 2);
    let chunks_of = |l: usize| ((offsets[l + 1] - offsets[l]) as usize).div_ceil(chunk);
    let pulling = pull != 0 && copied.len() >= nlist;
    let copy_chunks = |l: usize| pull::chunks((offsets[l + 1] - offsets[l]) as usize * dim * 4);

    let mut l = tid;
    while l < nlist {
        counts[l] = 0;
        l += threads;
    }
    sync_threads();
    let mut p = tid;
    while p < pairs {
        let l = probes[p] as usize;
        slots[p] = if l < nlist {
            atomic_add(&mut counts[l], 1u32)
        } else {
            0
        };
        p += threads;
    }
    sync_threads();

    // The probed lists in list order, where each list's items start, and the probed lists
    // the queue must ask for (those not still resident from an earlier request).
    // In pull mode, the lists to copy are those whose copy is not complete from an earlier
    // launch; their copy chunks are numbered from `copy_first[k]` for the `k`-th of them.
    let (mut lists_before, mut items_before, mut wanted_before) = (0u32, 0u32, 0u32);
    let mut copies_before = 0u32;
    let mut base = 0;
    while base < nlist {
        let l = base + tid;
        let c = if l < nlist { counts[l] } else { 0 };
        let items = if c > 0 { c * chunks_of(l) as u32 } else { 0 };
        let resident = c > 0 && queue.arrived_earlier(l as u32);
        if resident {
            queue.mark_arrived(l as u32);
        }
        let cold = c > 0 && pulling && copied[l] < copy_chunks(l);
        let want = (c > 0 && queue.is_enabled() && !resident) || cold;
        let (k, k_total) = exclusive_sum((c > 0) as u32, scratch);
        let (i, i_total) = exclusive_sum(items, scratch);
        let (w, w_total) = exclusive_sum(want as u32, scratch);
        let (f, f_total) = exclusive_sum(if cold { copy_chunks(l) } else { 0 }, scratch);
        if c > 0 {
            probed[(lists_before + k) as usize] = l as u32;
            list_item_off[l] = items_before + i;
        }
        if want {
            wanted[(wanted_before + w) as usize] = l as u32;
        }
        if cold {
            // A partial count (a launch that failed midway) starts over.
            copied[l] = 0;
            copy_first[(wanted_before + w) as usize] = copies_before + f;
        }
        lists_before += k_total;
        items_before += i_total;
        wanted_before += w_total;
        copies_before += f_total;
        base += threads;
    }
    let m = lists_before as usize;
    let nw = wanted_before as usize;
    if pulling && tid == 0 && nw < copy_first.len() {
        copy_first[nw] = copies_before;
    }
    sync_threads(); // `probed` and `wanted` complete for every thread

    if nw > 0 && queue.is_enabled() {
        if tid == 0 {
            let (first, granted) = queue.claim(nw as u32);
            claim.set(0, first);
            claim.set(1, granted);
        }
        sync_threads();
        let (first, granted) = (claim.get(0), claim.get(1) as usize);
        let mut k = tid;
        while k < nw {
            let l = wanted[k] as usize;
            if k < granted {
                let (a, b) = (offsets[l] as usize, offsets[l + 1] as usize);
                // SAFETY: slot `first + k` was claimed above by this launch and is
                // published once, by this thread; `l < nlist <= num_flags`.
                unsafe {
                    queue.publish(
                        first.wrapping_add(k as u32),
                        l as u32,
                        lists.as_ptr().wrapping_add(a * dim),
                        (b - a) * dim * 4,
                    )
                };
            } else {
                queue.fall_back(l as u32);
            }
            k += threads;
        }
    }

    // Where each pair's candidate lists start: a prefix sum of the pairs' chunk counts.
    let mut cands_before = 0u32;
    let mut base = 0;
    while base < pairs {
        let p = base + tid;
        let n = if p < pairs && (probes[p] as usize) < nlist {
            chunks_of(probes[p] as usize) as u32
        } else {
            0
        };
        let (c, total) = exclusive_sum(n, scratch);
        if p < pairs {
            pair_cand_off[p] = cands_before + c;
        }
        cands_before += total;
        base += threads;
    }
    if tid == 0 {
        pair_cand_off[pairs] = cands_before;
        totals[0] = m as u32;
        totals[1] = items_before;
        totals[2] = nw as u32;
        totals[3] = copies_before;
    }

    let mut p = tid;
    while p < pairs {
        let l = probes[p] as usize;
        if l < nlist {
            let (c, s, first) = (
                counts[l] as usize,
                slots[p] as usize,
                list_item_off[l] as usize,
            );
            for ch in 0..chunks_of(l) {
                let it = first + ch * c + s;
                item_pair[it] = p as u32;
                item_chunk[it] = ch as u32;
            }
        }
        p += threads;
    }
}

/// A work item of [`plan`], decoded: pair `p` (query `q`) and chunk `ch` of list `l`,
/// which covers the list's vectors `a..b`.
#[derive(Clone, Copy)]
struct WorkItem {
    p: usize,
    ch: usize,
    l: usize,
    q: usize,
    a: usize,
    b: usize,
}

/// The work items [`plan`] wrote, as [`scan`] and [`pull_scan`] read them.
struct WorkItems<'a> {
    item_pair: &'a [u32],
    item_chunk: &'a [u32],
    probes: &'a [u32],
    offsets: &'a [u64],
    nprobe: usize,
    chunk: usize,
}

impl WorkItems<'_> {
    #[inline(always)]
    fn get(&self, it: usize) -> WorkItem {
        let p = self.item_pair[it] as usize;
        let ch = self.item_chunk[it] as usize;
        let l = self.probes[p] as usize;
        let a = self.offsets[l] as usize + ch * self.chunk;
        let b = core::cmp::min(a + self.chunk, self.offsets[l + 1] as usize);
        WorkItem {
            p,
            ch,
            l,
            q: p / self.nprobe,
            a,
            b,
        }
    }
}

/// One work item of [`scan`] and [`pull_scan`], by the whole warp: the `K` nearest of the
/// vectors `rows` (rows `a..` of the index, ids from `ids[a..]`) to `query`, written to
/// `cand_*[out..out + K]`.
///
/// Each vector is read by [`LANES_PER_ROW`] lanes, 4 vectors per step: lane `g` of a row's
/// group holds the query's dimensions `g, g + 8, ...` in registers and sums its part; three
/// shuffles finish the distance, and the group's lanes take turns keeping candidates in
/// their own register top-`K`, which the warp merges at the end.
#[inline(always)]
fn scan_item(
    rows: &[f32],
    ids: &[u32],
    query: &[f32],
    a: usize,
    out: usize,
    cand_dist: &mut [f32],
    cand_ids: &mut [u32],
) {
    let dim = query.len();
    let lane = lane_id() as usize;
    let g = lane % LANES_PER_ROW;
    let group = lane / LANES_PER_ROW;
    let rows_per_step = 32 / LANES_PER_ROW;
    let b = a + rows.len() / dim.max(1);
    let mut qv = [0.0f32; DIMS_PER_LANE];
    for (i, v) in qv.iter_mut().enumerate() {
        let d = g + LANES_PER_ROW * i;
        if d < dim {
            *v = query[d];
        }
    }
    let mut top = TopK::new();
    let mut step = 0usize;
    let mut r0 = a;
    while r0 < b {
        let row = r0 + group;
        let mut s = 0.0f32;
        if row < b {
            let at = (row - a) * dim;
            for (i, v) in qv.iter().enumerate() {
                let d = g + LANES_PER_ROW * i;
                if d < dim {
                    // SAFETY: a <= row < b and d < dim, so at + d < (b - a) * dim <=
                    // rows.len().
                    let t = *v - unsafe { *rows.get_unchecked(at + d) };
                    s += t * t;
                }
            }
        }
        s += warp::shfl_xor_f32(s, 1);
        s += warp::shfl_xor_f32(s, 2);
        s += warp::shfl_xor_f32(s, 4);
        if row < b && g == step % LANES_PER_ROW {
            top.offer(s, ids[row]);
        }
        step += 1;
        r0 += rows_per_step;
    }
    top.warp_merge(|j, d, id| {
        if lane == 0 {
            cand_dist[out + j] = d;
            cand_ids[out + j] = id;
        }
    });
}

/// Scans the work items [`plan`] wrote: warp `w` of the grid takes items `w`, `w + warps`,
/// ... (`totals[1]` of them). For item (pair `p`, chunk `c`) it computes the distance from
/// query `p / nprobe` to each vector of chunk `c` of list `probes[p]` and writes the `K`
/// nearest to `cand_*[(pair_cand_off[p] + c) * K ..]`.
///
/// Before a list's first item, lane 0 waits until `queue` reports the list resident (or
/// says to go ahead on the fault path), and records what happened in `readiness[list]`
/// ([`READY_ARRIVED`], [`READY_WENT_AHEAD`], [`READY_TIMED_OUT`]). With `hints ==
/// HINT_L2` each warp prefetches its next item's vectors into L2 first (the in-kernel hint,
/// which does not migrate managed pages on the GPUs we measured).
/// Each item is one [`scan_item`].
#[kernel(same_len(cand_dist, cand_ids))]
#[allow(clippy::too_many_arguments)]
pub fn scan(
    lists: ManagedSlice<f32>,
    offsets: &[u64],
    ids: &[u32],
    queries: &[f32],
    probes: &[u32],
    item_pair: &[u32],
    item_chunk: &[u32],
    totals: &[u32],
    pair_cand_off: &[u32],
    dim: u32,
    nprobe: u32,
    chunk_rows: u32,
    hints: u32,
    queue: RequestQueue,
    readiness: &mut [u32],
    cand_dist: &mut [f32],
    cand_ids: &mut [u32],
) {
    let dim = dim as usize;
    let nprobe = (nprobe as usize).max(1);
    let chunk = (chunk_rows as usize).max(1);
    let lane = lane_id() as usize;
    let warps = grid_stride_x() / 32;
    let items = (totals[1] as usize).min(item_pair.len());
    if dim == 0 || dim > MAX_DIM {
        return;
    }
    let work = WorkItems {
        item_pair,
        item_chunk,
        probes,
        offsets,
        nprobe,
        chunk,
    };
    let mut ready_list = usize::MAX;
    let mut it = global_index_x() / 32;
    while it < items {
        let WorkItem { p, ch, l, q, a, b } = work.get(it);
        // One check of the whole chunk, so the loop below can read without one per load.
        let rows = &lists[a * dim..b * dim];

        if queue.is_enabled() && l != ready_list {
            let mut code = 0;
            if lane == 0 {
                code = match queue.wait_ready(l as u32) {
                    Readiness::Arrived => READY_ARRIVED,
                    Readiness::GoAhead => READY_WENT_AHEAD,
                    Readiness::TimedOut => READY_TIMED_OUT,
                };
                readiness[l] = code;
            }
            // The shuffle also holds the other lanes until lane 0 is done waiting.
            code = warp::shfl_idx_u32(code, 0);
            if code == READY_ARRIVED {
                ready_list = l;
            }
        }
        if hints == HINT_L2 && it + warps < items {
            let next = work.get(it + warps);
            let mut f = next.a * dim + lane * 32; // one 128-byte line per lane per step
            while f < next.b * dim {
                prefetch::prefetch_l2(lists.as_ptr().wrapping_add(f));
                f += 32 * 32;
            }
        }

        scan_item(
            rows,
            ids,
            &queries[q * dim..(q + 1) * dim],
            a,
            (pair_cand_off[p] as usize + ch) * K,
            cand_dist,
            cand_ids,
        );
        it += warps;
    }
}

/// [`scan`] for the GPU-driven pull policy: the lists are mapped for the GPU (accessed-by
/// advice, pages on the host), and this kernel copies the probed lists that are not yet in
/// the device-memory `cache` (same layout as `lists`) over the interconnect, then scans the
/// copies.
///
/// The warps on every `copy_every`-th SM ([`sm_id`] a multiple of it), and warp 0 of block 0
/// in any case, copy the chunks [`plan`] numbered (`wanted`, `copy_first`, `totals[3]`),
/// claimed in order from `work[1]`, adding one to `copied[list]` per chunk
/// ([`pull::copy_chunk`]); then every warp
/// takes work items in order from `work[2]` and, before a list's first item, waits until its
/// copy is complete ([`pull::wait_complete`], at most `wait_us` microseconds; on a timeout it
/// reads the list over the interconnect instead, so the result is the same). Copying warps
/// never wait, they run before they copy, and block 0's first warp is one of them, so every
/// wait ends without any assumption on how many blocks are resident or where. `readiness[list]` gets [`READY_ARRIVED`] (read from the
/// cache) or [`READY_TIMED_OUT`]. `work` (at least [`PULL_WORK_WORDS`]) must be zero at
/// launch; afterwards `work[3]` and `work[4]` hold the GPU's nanosecond clock when the first
/// copy warp started and when the last one finished (the copy's own time). Copied lists stay
/// complete in `copied` for later launches.
#[kernel(same_len(cand_dist, cand_ids))]
#[allow(clippy::too_many_arguments)]
pub fn pull_scan(
    lists: ManagedSlice<f32>,
    cache: &mut [f32],
    copied: &mut [u32],
    wanted: &[u32],
    copy_first: &[u32],
    offsets: &[u64],
    ids: &[u32],
    queries: &[f32],
    probes: &[u32],
    item_pair: &[u32],
    item_chunk: &[u32],
    totals: &[u32],
    pair_cand_off: &[u32],
    dim: u32,
    nprobe: u32,
    chunk_rows: u32,
    copy_every: u32,
    wait_us: u32,
    work: &mut [u64],
    readiness: &mut [u32],
    cand_dist: &mut [f32],
    cand_ids: &mut [u32],
) {
    let dim = dim as usize;
    let nprobe = (nprobe as usize).max(1);
    let chunk = (chunk_rows as usize).max(1);
    let lane = lane_id() as usize;
    let nlist = offsets.len().saturating_sub(1);
    let items = (totals[1] as usize).min(item_pair.len());
    let nw = (totals[2] as usize).min(wanted.len());
    let copies = if nw < copy_first.len() {
        copy_first[nw] as usize
    } else {
        0
    };
    if dim == 0
        || dim > MAX_DIM
        || cache.len() < lists.len()
        || copied.len() < nlist
        || work.len() < PULL_WORK_WORDS
    {
        return; // warp-uniform; the host finds the poisoned outputs
    }
    let words = cache.len();
    let src = lists.as_ptr() as *const u32;
    let dst = cache.as_mut_ptr() as *mut u32;
    let counters = copied.as_mut_ptr();
    // SAFETY: the cache is read only where `wait_complete` saw its copy complete, and no
    // warp writes a range after its copy is complete.
    let cached = unsafe { core::slice::from_raw_parts(dst as *const f32, words) };
    // Not `if lane == 0 { atomic_add }`: such branches split the copy loop's warps in two.
    let claim = |slot: &mut u64| warp_fetch_add(slot, 1u64) as usize;

    // Whole SMs copy: beside the copy's long system-memory loads, scanning warps on the same
    // SM ran 3-7x slower (H100), so the other SMs are left to scan at full speed.
    let copier =
        (copy_every > 0 && sm_id() % copy_every == 0) || (block_idx_x() == 0 && warp_id() == 0);
    if copier {
        if claim(&mut work[0]) == 0 && lane == 0 {
            work[3] = globaltimer_ns();
        }
        loop {
            let c = claim(&mut work[1]);
            if c >= copies {
                if lane == 0 {
                    atomic_max(&mut work[4], globaltimer_ns());
                }
                break;
            }
            // The wanted list whose chunks include `c`: the last `k` with copy_first[k] <= c.
            let (mut lo, mut hi) = (0usize, nw);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if copy_first[mid] as usize <= c {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let l = wanted[lo] as usize;
            if l >= nlist {
                continue; // warp-uniform; `plan` writes only list ids
            }
            let first = offsets[l] as usize * dim;
            let len = (offsets[l + 1] - offsets[l]) as usize * dim;
            let (x, y) = pull::chunk_words(c as u32 - copy_first[lo], len);
            if first + y <= words {
                // SAFETY: `first + y <= words` and the cache and lists have `words` floats;
                // chunk `c` is copied by this warp alone; `l < nlist <= copied.len()`.
                unsafe {
                    pull::copy_chunk(
                        src.add(first + x),
                        dst.add(first + x),
                        y - x,
                        counters.add(l),
                    )
                };
            }
        }
    }

    let timeout_ns = wait_us as u64 * 1000;
    let scan_work = WorkItems {
        item_pair,
        item_chunk,
        probes,
        offsets,
        nprobe,
        chunk,
    };
    let (mut ready_list, mut from_cache) = (usize::MAX, false);
    loop {
        let it = claim(&mut work[2]);
        if it >= items {
            break;
        }
        let WorkItem { p, ch, l, q, a, b } = scan_work.get(it);
        if l != ready_list {
            let need = pull::chunks((offsets[l + 1] - offsets[l]) as usize * dim * 4);
            // SAFETY: `l < nlist <= copied.len()` (probes hold list ids below nlist).
            from_cache = unsafe { pull::wait_complete(counters.add(l), need, timeout_ns) };
            if lane == 0 {
                readiness[l] = if from_cache {
                    READY_ARRIVED
                } else {
                    READY_TIMED_OUT
                };
            }
            ready_list = l;
        }
        let rows = if from_cache {
            &cached[a * dim..b * dim]
        } else {
            &lists[a * dim..b * dim]
        };
        scan_item(
            rows,
            ids,
            &queries[q * dim..(q + 1) * dim],
            a,
            (pair_cand_off[p] as usize + ch) * K,
            cand_dist,
            cand_ids,
        );
    }
}

/// Each query's `K` nearest over its candidate lists (`pair_cand_off[q * nprobe] ..
/// pair_cand_off[(q + 1) * nprobe]`, each of `K`), one warp per query.
#[kernel(same_len(out_dist, out_ids))]
pub fn merge(
    cand_dist: &[f32],
    cand_ids: &[u32],
    pair_cand_off: &[u32],
    nprobe: u32,
    out_dist: &mut [f32],
    out_ids: &mut [u32],
) {
    let q = global_index_x() / 32;
    let lane = lane_id() as usize;
    let nprobe = nprobe as usize;
    if q >= out_dist.len() / K || (q + 1) * nprobe >= pair_cand_off.len() {
        return; // warp-uniform
    }
    let lo = pair_cand_off[q * nprobe] as usize * K;
    let hi = pair_cand_off[(q + 1) * nprobe] as usize * K;
    let mut top = TopK::new();
    let mut c = lo + lane;
    while c < hi {
        if cand_ids[c] != u32::MAX {
            top.offer(cand_dist[c], cand_ids[c]);
        }
        c += 32;
    }
    top.warp_merge(|j, d, id| {
        if lane == 0 {
            out_dist[q * K + j] = d;
            out_ids[q * K + j] = id;
        }
    });
}
