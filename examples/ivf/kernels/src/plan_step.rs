//! The plan: from the (query, probe) pairs to the probed lists, the requests for them, and the
//! scan's work items, in one block.

use lookahead_device::prelude::*;
use lookahead_device::uvm::{pull, RequestQueue};

use crate::block::{exclusive_sum, SCRATCH_WORDS};
use crate::params::{Index, PairPlanOut, PlanOut, PullPlan, Total};
use crate::PLAN_THREADS;

/// Plans the scan, in one block of [`PLAN_THREADS`](crate::PLAN_THREADS) threads, from the
/// (query, probe) pairs `probes` (pair `p` is query `p / nprobe`). It writes:
///
/// - per list, the pairs that probe it (`counts`), and per pair its place among them
///   (`slots`);
/// - the probed lists in list order (`probed`; [`Total::ProbedLists`] of them);
/// - the lists to bring over (`wanted`; [`Total::WantedLists`] of them), see below;
/// - the scan's work items, one per (pair, chunk of `chunk_rows` vectors): `item_pair` and
///   `item_chunk`, list by list and chunk by chunk, with the pairs of a chunk side by side
///   ([`Total::WorkItems`] of them);
/// - per pair, where its candidate lists start (`pair_cand_off[p]`, in lists of `K`;
///   `pair_cand_off[pairs]` is the total).
///
/// Which lists are wanted depends on the policy:
///
/// - with `queue` enabled (GPU-driven requests), the probed lists not still resident from
///   an earlier request, asked for with one ring claim in list order; lists that do not fit
///   in the ring are marked "go ahead", resident ones "arrived";
/// - with `pull_enabled != 0` (for [`crate::pull_scan`]), the probed lists whose copy in the
///   device cache is incomplete (`copied[l]` below [`pull::chunks`] of the list's bytes).
///   Their counts are reset and their copy chunks numbered: the `k`-th wanted list's start
///   at `copy_first[k]`, and `copy_first[wanted]` is their total ([`Total::CopyChunks`]).
///
/// Why this order: list order is address order, so adjacent lists reach the host's service in
/// one claim, side by side, and it groups them into long prefetches; the pairs of a chunk run
/// next to each other, so their reads of it share the L2 cache; and a query's candidates are
/// contiguous for [`crate::merge`].
#[kernel]
pub fn plan(
    probes: &[u32],
    index: Index,
    queue: RequestQueue,
    pull_enabled: u32,
    mut pull: PullPlan,
    mut out: PlanOut,
) {
    let nlist = index.offsets.len().saturating_sub(1).min(out.counts.len());
    let pairs = probes.len().min(out.slots.len());
    let pulling = pull_enabled != 0 && pull.copied.len() >= nlist;
    let scratch = shared_array!(u32; SCRATCH_WORDS);
    count_pairs(probes, nlist, pairs, &mut out);
    let found = find_lists(&index, &queue, pulling, nlist, scratch, &mut pull, &mut out);
    if pulling && thread_idx_x() == 0 && found.wanted < pull.copy_first.len() {
        pull.copy_first[found.wanted] = found.copies;
    }
    sync_threads(); // `probed` and `wanted` complete for every thread
    if found.wanted > 0 && queue.is_enabled() {
        request_lists(&index, &queue, &out.wanted[..found.wanted]);
    }
    let cands = candidate_offsets(
        probes,
        &index,
        nlist,
        pairs,
        scratch,
        &mut out.pair_cand_off,
        |_, _, _| {},
    );
    if thread_idx_x() == 0 {
        out.pair_cand_off[pairs] = cands;
        out.totals[Total::ProbedLists as usize] = found.lists as u32;
        out.totals[Total::WorkItems as usize] = found.items;
        out.totals[Total::WantedLists as usize] = found.wanted as u32;
        out.totals[Total::CopyChunks as usize] = found.copies;
    }
    write_items(probes, &index, nlist, pairs, &mut out);
}

/// Chunks of `chunk_rows` vectors in list `l`.
#[inline(always)]
fn chunks_of(index: &Index, l: usize) -> usize {
    let len = (index.offsets[l + 1] - index.offsets[l]) as usize;
    len.div_ceil((index.chunk_rows as usize).max(1))
}

/// `counts[l]`: the pairs probing list `l`; `slots[p]`: pair `p`'s index among them.
#[inline(always)]
fn count_pairs(probes: &[u32], nlist: usize, pairs: usize, out: &mut PlanOut) {
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let mut l = tid;
    while l < nlist {
        out.counts[l] = 0;
        l += threads;
    }
    sync_threads();
    let mut p = tid;
    while p < pairs {
        let l = probes[p] as usize;
        out.slots[p] = if l < nlist {
            atomic_add(&mut out.counts[l], 1u32)
        } else {
            0
        };
        p += threads;
    }
    sync_threads();
}

/// What [`find_lists`] counted: probed lists, work items, wanted lists, copy chunks.
struct Found {
    lists: usize,
    items: u32,
    wanted: usize,
    copies: u32,
}

/// The probed lists in list order, where each list's items start, and the lists to ask for
/// (those not still resident from an earlier request) or, pulling, to copy (those whose copy
/// is not complete from an earlier launch), with their copy chunks numbered.
#[inline(always)]
fn find_lists(
    index: &Index,
    queue: &RequestQueue,
    pulling: bool,
    nlist: usize,
    scratch: SharedArray<u32, SCRATCH_WORDS>,
    pull: &mut PullPlan,
    out: &mut PlanOut,
) -> Found {
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let dim = index.dim as usize;
    let copy_chunks =
        |l: usize| pull::chunks((index.offsets[l + 1] - index.offsets[l]) as usize * dim * 4);
    let mut f = Found {
        lists: 0,
        items: 0,
        wanted: 0,
        copies: 0,
    };
    let mut base = 0;
    while base < nlist {
        let l = base + tid;
        let c = if l < nlist { out.counts[l] } else { 0 };
        let items = if c > 0 {
            c * chunks_of(index, l) as u32
        } else {
            0
        };
        let resident = c > 0 && queue.arrived_earlier(l as u32);
        if resident {
            queue.mark_arrived(l as u32);
        }
        let cold = c > 0 && pulling && pull.copied[l] < copy_chunks(l);
        let want = (c > 0 && queue.is_enabled() && !resident) || cold;
        let (k, k_total) = exclusive_sum((c > 0) as u32, scratch);
        let (i, i_total) = exclusive_sum(items, scratch);
        let (w, w_total) = exclusive_sum(want as u32, scratch);
        let (n, n_total) = exclusive_sum(if cold { copy_chunks(l) } else { 0 }, scratch);
        if c > 0 {
            out.probed[f.lists + k as usize] = l as u32;
            out.list_item_off[l] = f.items + i;
        }
        if want {
            out.wanted[f.wanted + w as usize] = l as u32;
        }
        if cold {
            // A partial count (a launch that failed midway) starts over.
            pull.copied[l] = 0;
            pull.copy_first[f.wanted + w as usize] = f.copies + n;
        }
        f.lists += k_total as usize;
        f.items += i_total;
        f.wanted += w_total as usize;
        f.copies += n_total;
        base += threads;
    }
    f
}

/// Asks the host for the `wanted` lists with one ring claim; those that do not fit are
/// marked "go ahead".
#[inline(always)]
fn request_lists(index: &Index, queue: &RequestQueue, wanted: &[u32]) {
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let claim = shared_array!(u32; 2);
    if tid == 0 {
        let (first, granted) = queue.claim(wanted.len() as u32);
        claim.set(0, first);
        claim.set(1, granted);
    }
    sync_threads();
    let (first, granted) = (claim.get(0), claim.get(1) as usize);
    let dim = index.dim as usize;
    let mut k = tid;
    while k < wanted.len() {
        let l = wanted[k] as usize;
        if k < granted {
            let (a, b) = (index.offsets[l] as usize, index.offsets[l + 1] as usize);
            // SAFETY: slot `first + k` was claimed above by this launch and is published
            // once, by this thread; the flag is checked against the queue's flags.
            unsafe {
                queue.publish(
                    first.wrapping_add(k as u32),
                    l as u32,
                    index.vectors.as_ptr().wrapping_add(a * dim),
                    (b - a) * dim * 4,
                )
            };
        } else {
            queue.fall_back(l as u32);
        }
        k += threads;
    }
}

/// Where each pair's candidate lists start: a prefix sum of the pairs' chunk counts; returns
/// the total. The block takes the pairs `threads` at a time; after each round every thread
/// calls `each_round(base, first, chunks)` for pair `base + tid` (`chunks` 0 past the pairs),
/// so the call may hold barriers.
#[inline(always)]
fn candidate_offsets(
    probes: &[u32],
    index: &Index,
    nlist: usize,
    pairs: usize,
    scratch: SharedArray<u32, SCRATCH_WORDS>,
    pair_cand_off: &mut DeviceSliceMut<u32>,
    mut each_round: impl FnMut(usize, u32, u32),
) -> u32 {
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let mut before = 0u32;
    let mut base = 0;
    while base < pairs {
        let p = base + tid;
        let n = if p < pairs && (probes[p] as usize) < nlist {
            chunks_of(index, probes[p] as usize) as u32
        } else {
            0
        };
        let (c, total) = exclusive_sum(n, scratch);
        if p < pairs {
            pair_cand_off[p] = before + c;
        }
        each_round(base, before + c, n);
        before += total;
        base += threads;
    }
    before
}

/// The work items: one per (pair, chunk), list by list, chunk by chunk.
#[inline(always)]
fn write_items(probes: &[u32], index: &Index, nlist: usize, pairs: usize, out: &mut PlanOut) {
    let mut p = thread_idx_x() as usize;
    while p < pairs {
        let l = probes[p] as usize;
        if l < nlist {
            let (c, s) = (out.counts[l] as usize, out.slots[p] as usize);
            let first = out.list_item_off[l] as usize;
            for ch in 0..chunks_of(index, l) {
                let it = first + ch * c + s;
                out.item_pair[it] = p as u32;
                out.item_chunk[it] = ch as u32;
            }
        }
        p += block_dim_x() as usize;
    }
}

/// The plan of a small batch whose lists are all resident, in one block of
/// [`PLAN_THREADS`](crate::PLAN_THREADS) threads. It writes the work items pair by pair,
/// chunk by chunk (`item_pair` / `item_chunk`: item `pair_cand_off[p] + c` is chunk `c` of
/// pair `p`), and each pair's candidate lists at `pair_cand_off[p]` as [`plan`] does, so
/// [`crate::scan`] and [`crate::merge`] give the same neighbours. Of the totals, only
/// [`Total::WorkItems`] is set; the others are 0, as nothing is counted per list, asked for
/// or copied.
///
/// Why: [`plan`]'s passes over every list (their barriers took most of a 1-query plan) pay
/// off when pairs share lists, whose reads [`plan`]'s order lets share the L2 cache; a small
/// batch's pairs rarely do.
#[kernel]
pub fn plan_pairs(probes: &[u32], index: Index, mut out: PairPlanOut) {
    let nlist = index.offsets.len().saturating_sub(1);
    let pairs = probes.len().min(out.pair_cand_off.len().saturating_sub(1));
    let scratch = shared_array!(u32; SCRATCH_WORDS);
    // A round's pairs: where their items start, and how many they have.
    let firsts = shared_array!(u32; PLAN_THREADS as usize);
    let counts = shared_array!(u32; PLAN_THREADS as usize);
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let (warp, warps, lane) = (tid / 32, threads / 32, lane_id() as usize);
    let (item_pair, item_chunk) = (&mut out.item_pair, &mut out.item_chunk);
    let write_items = |base: usize, first: u32, n: u32| {
        firsts.set(tid, first);
        counts.set(tid, n);
        // The round's offsets staged, a warp per pair writes the pair's chunks with its lanes:
        // a thread per pair wrote its items one after another, and a warp loading each pair's
        // offsets from memory waited on each pair in turn.
        sync_threads();
        let mut k = warp;
        while k < (pairs - base).min(threads) {
            let (first, n) = (firsts.get(k) as usize, counts.get(k) as usize);
            let mut ch = lane;
            while ch < n {
                item_pair[first + ch] = (base + k) as u32;
                item_chunk[first + ch] = ch as u32;
                ch += 32;
            }
            k += warps.max(1);
        }
        sync_threads(); // the next round restages
    };
    let before = candidate_offsets(
        probes,
        &index,
        nlist,
        pairs,
        scratch,
        &mut out.pair_cand_off,
        write_items,
    );
    if tid == 0 {
        out.pair_cand_off[pairs] = before;
        out.totals[Total::ProbedLists as usize] = 0;
        out.totals[Total::WorkItems as usize] = before;
        out.totals[Total::WantedLists as usize] = 0;
        out.totals[Total::CopyChunks as usize] = 0;
    }
}
