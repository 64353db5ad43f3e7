//! A per-lane sorted top-`K` list kept in registers, and the warp-wide merge of 32 of them;
//! a warp's 32 best spread over its lanes ([`WarpBest`]), kept with sorting networks.
//!
//! Candidates order by distance, then id, so every policy, launch shape and schedule gives
//! the same answer. All indexing is by compile-time constants (the loops over `K` unroll), so
//! the list stays in registers instead of going to local memory.

use lookahead_device::prelude::*;

use crate::K;

/// `(d1, i1)` before `(d2, i2)`: nearer first, then the smaller id.
///
/// Bitwise, not short-circuit: `||` and `&&` became branches around every compare of the
/// sorting networks, and before each of their shuffles the GPU compiler added a check that
/// the warp had reconverged.
#[inline(always)]
pub fn before(d1: f32, i1: u32, d2: f32, i2: u32) -> bool {
    (d1 < d2) | ((d1 == d2) & (i1 < i2))
}

/// The `K` best candidates one lane has seen, nearest first; empty places hold
/// `(f32::INFINITY, u32::MAX)`.
#[derive(Clone, Copy)]
pub struct TopK {
    dist: [f32; K],
    ids: [u32; K],
}

impl Default for TopK {
    fn default() -> Self {
        Self::new()
    }
}

impl TopK {
    /// An empty list.
    #[inline(always)]
    pub fn new() -> Self {
        TopK {
            dist: [f32::INFINITY; K],
            ids: [u32::MAX; K],
        }
    }

    /// Offers a candidate; it is kept if it beats the current `K`-th.
    #[inline(always)]
    pub fn offer(&mut self, dist: f32, id: u32) {
        if !before(dist, id, self.dist[K - 1], self.ids[K - 1]) {
            return;
        }
        // Bubble the candidate in from the front: each step keeps the nearer of the two in
        // place `j` and carries the other on; the `K + 1`-th falls off the end.
        let (mut d, mut i) = (dist, id);
        for j in 0..K {
            if before(d, i, self.dist[j], self.ids[j]) {
                core::mem::swap(&mut d, &mut self.dist[j]);
                core::mem::swap(&mut i, &mut self.ids[j]);
            }
        }
    }

    /// [`TopK::offer`] for a loaded candidate, unless its id is `u32::MAX` (an empty place).
    #[inline(always)]
    pub fn offer_valid(&mut self, (dist, id): (f32, u32)) {
        if id != u32::MAX {
            self.offer(dist, id);
        }
    }

    /// Drops the first entry, moving the rest up.
    #[inline(always)]
    fn pop_front(&mut self) {
        for j in 0..K - 1 {
            self.dist[j] = self.dist[j + 1];
            self.ids[j] = self.ids[j + 1];
        }
        self.dist[K - 1] = f32::INFINITY;
        self.ids[K - 1] = u32::MAX;
    }

    /// Merges the 32 lanes' lists: `K` rounds of a warp-wide minimum by shuffles. Every lane
    /// of the warp must call it; `emit(j, dist, id)` is called on every lane with the warp's
    /// `j`-th best (the same values on all lanes).
    #[inline(always)]
    pub fn warp_merge(mut self, mut emit: impl FnMut(usize, f32, u32)) {
        let lane = lane_id();
        for j in 0..K {
            let (bd, bi, bl) = warp_argmin(self.dist[0], self.ids[0]);
            if bl == lane {
                self.pop_front();
            }
            emit(j, bd, bi);
        }
    }
}

/// The warp's smallest `(dist, id)` and the lane that holds it, on every lane. Equal pairs
/// are empty places: the lower lane wins.
#[inline(always)]
fn warp_argmin(mut bd: f32, mut bi: u32) -> (f32, u32, u32) {
    let mut bl = lane_id();
    let mut step = 16;
    while step > 0 {
        let od = warp::shfl_xor_f32(bd, step);
        let oi = warp::shfl_xor_u32(bi, step);
        let ol = warp::shfl_xor_u32(bl, step);
        if before(od, oi, bd, bi) || (od == bd && oi == bi && ol < bl) {
            bd = od;
            bi = oi;
            bl = ol;
        }
        step /= 2;
    }
    (bd, bi, bl)
}

/// Merges up to 32 sorted lists of `K` entries into the warp's `K` best: lane `w < lists`
/// walks list `w` (`entry(w, r)` is its `r`-th entry), and each round the warp-wide minimum
/// (ties by id, then the lower lane: equal pairs are empty places) advances its lane.
/// Every lane must call it; `emit(j, dist, id)` gets the `j`-th best on every lane.
#[inline(always)]
pub fn merge_sorted_lists(
    lists: usize,
    entry: impl Fn(usize, usize) -> (f32, u32),
    mut emit: impl FnMut(usize, f32, u32),
) {
    let lane = lane_id();
    let mut head = 0usize;
    for j in 0..K {
        let (d, i) = if (lane as usize) < lists && head < K {
            entry(lane as usize, head)
        } else {
            (f32::INFINITY, u32::MAX)
        };
        let (bd, bi, bl) = warp_argmin(d, i);
        if bl == lane {
            head += 1;
        }
        emit(j, bd, bi);
    }
}

/// The warp's 32 `(distance, index)` pairs sorted (bitonic network): lane `r` gets the
/// `r`-th. Pairs must be distinct, but for empty places.
#[inline(always)]
pub fn warp_sort(mut pair: (f32, u32)) -> (f32, u32) {
    let mut k = 2;
    while k <= 32 {
        let mut j = k / 2;
        while j > 0 {
            pair = exchange(pair, k, j);
            j /= 2;
        }
        k *= 2;
    }
    pair
}

/// One compare-exchange of a bitonic network: lanes `lane` and `lane ^ j` order their pairs,
/// ascending where `lane & k == 0`.
#[inline(always)]
fn exchange((d, i): (f32, u32), k: u32, j: u32) -> (f32, u32) {
    let lane = lane_id();
    let (od, oi) = (warp::shfl_xor_f32(d, j), warp::shfl_xor_u32(i, j));
    // The lower lane of a pair keeps the nearer one in ascending runs.
    let keep_nearer = (lane & j == 0) == (lane & k == 0);
    // Both compares, combined without a branch (pairs that compare neither way, as a NaN
    // distance does, stay where they are on both lanes).
    let (nearer, farther) = (before(od, oi, d, i), before(d, i, od, oi));
    let take = (keep_nearer & nearer) | (!keep_nearer & farther);
    if take {
        (od, oi)
    } else {
        (d, i)
    }
}

/// The 32 best candidates a warp has been offered, nearest first over its lanes (lane `r`
/// holds the `r`-th; empty places `(f32::INFINITY, u32::MAX)`).
///
/// The warp offers 32 candidates at once, one per lane: they are sorted (15 compare-exchange
/// steps), paired lane `r` with the kept list's `31 - r`-th so that the nearer of each pair
/// are the 32 best in a bitonic order, and that order sorted (5 steps). A per-lane top-`K`
/// costs `K` compare-exchanges per candidate offered and `K` rounds of shuffles to merge.
///
/// Only the first `K` places are the search's: [`WarpBest::offer`] skips a round whose
/// candidates all come after the `K`-th (one vote instead of the sorting networks), so the
/// places past `K` keep what came first, not the 32 best.
#[derive(Clone, Copy)]
pub struct WarpBest {
    pair: (f32, u32),
    /// The `K`-th best so far, on every lane.
    kth: (f32, u32),
}

impl Default for WarpBest {
    fn default() -> Self {
        Self::new()
    }
}

impl WarpBest {
    /// Nothing kept.
    #[inline(always)]
    pub fn new() -> Self {
        WarpBest {
            pair: (f32::INFINITY, u32::MAX),
            kth: (f32::INFINITY, u32::MAX),
        }
    }

    /// Offers each lane's `(dist, id)` (an empty place for none). Every lane of the warp must
    /// call it. Candidates must be distinct, but for empty places.
    ///
    /// Why the vote: after the first few rounds almost no candidate beats the `K`-th best,
    /// and the sorting networks' shuffles, not the distances, took most of a scan's issue
    /// slots.
    #[inline(always)]
    pub fn offer(&mut self, candidate: (f32, u32)) {
        if !warp::vote_any(before(candidate.0, candidate.1, self.kth.0, self.kth.1)) {
            return;
        }
        let (nd, ni) = warp_sort(candidate);
        let (od, oi) = (warp::shfl_xor_f32(nd, 31), warp::shfl_xor_u32(ni, 31));
        if before(od, oi, self.pair.0, self.pair.1) {
            self.pair = (od, oi);
        }
        let mut j = 16;
        while j > 0 {
            self.pair = exchange(self.pair, 32, j);
            j /= 2;
        }
        self.kth = (
            warp::shfl_idx_f32(self.pair.0, K as u32 - 1),
            warp::shfl_idx_u32(self.pair.1, K as u32 - 1),
        );
    }

    /// The `K`-th best so far (`(f32::INFINITY, u32::MAX)` until `K` are kept), the same on
    /// every lane.
    #[inline(always)]
    pub fn kth(&self) -> (f32, u32) {
        self.kth
    }

    /// This lane's entry: the warp's `lane_id()`-th best.
    #[inline(always)]
    pub fn entry(&self) -> (f32, u32) {
        self.pair
    }
}
