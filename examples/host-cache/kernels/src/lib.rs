//! # host-cache-kernels
//!
//! Kernels that read data in host memory through Lookahead's GPU-driven cache
//! ([`HostCached`]), each with the baselines the benchmark compares it with:
//!
//! | kernel | reads | what it computes |
//! | --- | --- | --- |
//! | [`gather_rows`] | the cache | `out[r] = table[rows[r]]`, rows of `row_len` floats, one warp per row |
//! | [`gather_rows_zero_copy`] | host memory over the interconnect, no cache | the same |
//! | [`gather_rows_device`] | a device (or managed) copy of the table | the same |
//! | [`scan_lists`] | the cache | per (query, list) pair: the smallest squared distance from the query to the list's vectors, one block per pair |
//! | [`scan_lists_prefetched`] | the cache, `#[prefetch_next(cache = ..)]` two pages ahead | the same |
//! | [`scan_lists_zero_copy`] / [`scan_lists_device`] | host memory / a device copy | the same |
//! | [`copy_pages`] | host memory, no cache | whole pages at given places into a device buffer: the interconnect's rate for the cache's misses |
//! | [`gather`] | the cache | `out[i] = data[idx[i]]`, element by element |
//! | [`stress`] | the cache | each warp reads random pages and counts elements that are not what the page holds |
//!
//! Every kernel is launched with blocks of a multiple of 32 threads and keeps its warps
//! whole around cache reads (the reads are warp-collective).
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/host_cache_kernels_ptx.rs"));

use lookahead_device::cache::HostCached;
use lookahead_device::prelude::*;
use lookahead_device::uvm::pull::copy_words;
use lookahead_device::{warp, DeviceCopy};

/// Floats per vector (list scan; a warp's 32 lanes take 4 each) and per row of the tests'
/// gathers.
pub const DIM: usize = 128;

/// Threads per block every kernel here is launched with.
pub const BLOCK: u32 = 256;

/// The warp's index in the grid and the grid's warps.
#[inline(always)]
fn warp_in_grid() -> (usize, usize) {
    let warps = (grid_dim_x() * block_dim_x() / 32) as usize;
    ((global_index_x() / 32) as usize, warps)
}

/// `part` (the elements of a row from `offset` on) into `out_row`, the lanes taking every
/// 32nd element, four loads in flight before their stores.
#[inline(always)]
fn put_row(out_row: &mut [f32], offset: usize, part: &[f32]) {
    let mut k = lane_id() as usize;
    while k + 96 < part.len() {
        let (a, b, c, d) = (part[k], part[k + 32], part[k + 64], part[k + 96]);
        let o = &mut out_row[offset + k..offset + k + 97];
        (o[0], o[32], o[64], o[96]) = (a, b, c, d);
        k += 128;
    }
    while k < part.len() {
        out_row[offset + k] = part[k];
        k += 32;
    }
}

/// Row `r` of `out` (rows of `len` floats).
#[inline(always)]
fn out_row(out: &mut [f32], r: usize, len: usize) -> &mut [f32] {
    &mut out[r * len..(r + 1) * len]
}

/// `out[r]` = row `rows[r]` of the table, rows of `row_len` floats, one warp per row,
/// through the cache.
#[kernel(min_len(out = 1))]
pub fn gather_rows(table: HostCached<f32>, rows: &[u32], row_len: u32, out: &mut [f32]) {
    let (first, warps) = warp_in_grid();
    let len = row_len as usize;
    for r in (first..rows.len()).step_by(warps) {
        let start = rows[r] as usize * len;
        let o = out_row(out, r, len);
        table.for_range(start..start + len, |at, part| put_row(o, at - start, part));
    }
}

/// The row gather of the baselines, from the table `src` as it is (host or device memory).
#[inline(always)]
fn gather_from(src: &[f32], rows: &[u32], len: usize, out: &mut [f32]) {
    let (first, warps) = warp_in_grid();
    for r in (first..rows.len()).step_by(warps) {
        let start = rows[r] as usize * len;
        put_row(out_row(out, r, len), 0, &src[start..start + len]);
    }
}

/// [`gather_rows`] reading host memory directly (zero-copy): every row crosses the
/// interconnect each time it is read.
#[kernel(min_len(out = 1))]
pub fn gather_rows_zero_copy(table: HostCached<f32>, rows: &[u32], row_len: u32, out: &mut [f32]) {
    gather_from(table.uncached(), rows, row_len as usize, out);
}

/// [`gather_rows`] from a table in device (or managed) memory.
#[kernel(min_len(out = 1))]
pub fn gather_rows_device(table: &[f32], rows: &[u32], row_len: u32, out: &mut [f32]) {
    gather_from(table, rows, row_len as usize, out);
}

/// Copies whole pages `pages[i]` of the data from host memory into `scratch[i]` (pages of
/// [`HostCached::page_elems`]), a warp per page, as a cache miss copies (the same loads) but
/// with no table: the rate of the interconnect for reads of a page at random places, the
/// ceiling of the cache's misses.
#[kernel(min_len(scratch = 1))]
pub fn copy_pages(data: HostCached<f32>, pages: &[u32], scratch: &mut [f32]) {
    let (first, warps) = warp_in_grid();
    let (host, pe) = (data.uncached(), data.page_elems());
    for i in (first..pages.len()).step_by(warps) {
        let start = pages[i] as usize * pe;
        let src = &host[start..(start + pe).min(host.len())];
        let dst = &mut scratch[i * pe..i * pe + src.len()];
        // SAFETY: `src` and `dst` are slices of `src.len()` floats, and `dst` (scratch page
        // `i`) is this warp's alone.
        unsafe {
            copy_words(
                src.as_ptr() as *const u32,
                dst.as_mut_ptr() as *mut u32,
                src.len(),
            )
        };
    }
}

/// Warp-wide squared distance between the lane's 4 floats of a vector and of the query.
#[inline(always)]
fn distance4(v: &[f32], q: &[f32]) -> f32 {
    let mut d = 0.0;
    for k in 0..4 {
        let x = v[k] - q[k];
        d += x * x;
    }
    warp::warp_sum_f32(d)
}

/// The smallest distance from `q` (the lane's 4 floats) to this warp's vectors among
/// `vecs[s..e]` (vectors `s + w`, `s + w + warps`, ... for warp `w` of the block).
#[inline(always)]
fn warp_min(vecs: &[f32], s: usize, e: usize, q: &[f32]) -> f32 {
    let (w, warps) = (
        (thread_idx_x() / 32) as usize,
        (block_dim_x() / 32) as usize,
    );
    let lane = lane_id() as usize;
    let mut min = f32::INFINITY;
    for v in (s + w..e).step_by(warps) {
        min = min.min(distance4(
            &vecs[v * DIM + lane * 4..v * DIM + lane * 4 + 4],
            q,
        ));
    }
    min
}

/// `*slot = min(*slot, v)` for non-negative floats compared as their bits.
#[inline(always)]
fn atomic_min_bits(slot: &mut u32, v: f32) {
    let v = v.to_bits();
    let mut old = atomic_add(slot, 0);
    while v < old {
        let seen = atomic_cas(slot, old, v);
        if seen == old {
            break;
        }
        old = seen;
    }
}

/// Lane 0 of each warp folds its minimum into `best`.
#[inline(always)]
fn fold(best: &mut u32, min: f32) {
    if lane_id() == 0 && min.is_finite() {
        atomic_min_bits(best, min);
    }
}

/// The query's 4 floats of this lane and the pair's list range.
#[inline(always)]
fn pair<'a>(
    p: usize,
    list_off: &[u32],
    queries: &'a [f32],
    pair_list: &[u32],
    pair_query: &[u32],
) -> (&'a [f32], usize, usize) {
    let qi = pair_query[p] as usize * DIM + lane_id() as usize * 4;
    let l = pair_list[p] as usize;
    (
        &queries[qi..qi + 4],
        list_off[l] as usize,
        list_off[l + 1] as usize,
    )
}

/// `best[p]`: the smallest squared distance (float bits) from query `pair_query[p]` to list
/// `pair_list[p]` (vectors `list_off[l]..list_off[l + 1]`), a block per pair, the vectors
/// read through the cache a page at a time (every warp of the block reads each page of the
/// list, and takes its own vectors in it).
#[kernel(same_len(pair_list, pair_query, best))]
pub fn scan_lists(
    vecs: HostCached<f32>,
    list_off: &[u32],
    queries: &[f32],
    pair_list: &[u32],
    pair_query: &[u32],
    best: &mut [u32],
) {
    for p in (block_idx_x() as usize..best.len()).step_by(grid_dim_x() as usize) {
        let (q, s, e) = pair(p, list_off, queries, pair_list, pair_query);
        let mut min = f32::INFINITY;
        // Pages hold whole vectors (a page is a multiple of 512 bytes).
        vecs.for_range(s * DIM..e * DIM, |_, part| {
            min = min.min(warp_min(part, 0, part.len() / DIM, q));
        });
        fold(&mut best[p], min);
    }
}

/// [`scan_lists`] walking each list's pages itself, with
/// `#[prefetch_next(cache = vecs, ...)]`: while the warps read page `k` of a list, the host
/// memory of page `k + 2` streams into L2 if that page is not cached, so its miss copies
/// from L2.
#[kernel(same_len(pair_list, pair_query, best))]
pub fn scan_lists_prefetched(
    vecs: HostCached<f32>,
    list_off: &[u32],
    queries: &[f32],
    pair_list: &[u32],
    pair_query: &[u32],
    best: &mut [u32],
) {
    let pe = vecs.page_elems();
    for p in (block_idx_x() as usize..best.len()).step_by(grid_dim_x() as usize) {
        let (q, s, e) = pair(p, list_off, queries, pair_list, pair_query);
        let (lo, hi) = (s * DIM, e * DIM);
        let mut min = f32::INFINITY;
        #[prefetch_next(cache = vecs, distance = 2, of((pg * pe).max(lo)..((pg + 1) * pe).min(hi)))]
        for pg in lo / pe..hi.div_ceil(pe) {
            let (a, b) = ((pg * pe).max(lo), ((pg + 1) * pe).min(hi));
            vecs.for_range(a..b, |_, part| {
                min = min.min(warp_min(part, 0, part.len() / DIM, q));
            });
        }
        fold(&mut best[p], min);
    }
}

/// [`scan_lists`] reading the vectors from host memory directly (zero-copy).
#[kernel(same_len(pair_list, pair_query, best))]
pub fn scan_lists_zero_copy(
    vecs: HostCached<f32>,
    list_off: &[u32],
    queries: &[f32],
    pair_list: &[u32],
    pair_query: &[u32],
    best: &mut [u32],
) {
    let host = vecs.uncached();
    for p in (block_idx_x() as usize..best.len()).step_by(grid_dim_x() as usize) {
        let (q, s, e) = pair(p, list_off, queries, pair_list, pair_query);
        fold(&mut best[p], warp_min(host, s, e, q));
    }
}

/// [`scan_lists`] from vectors in device (or managed) memory.
#[kernel(same_len(pair_list, pair_query, best))]
pub fn scan_lists_device(
    vecs: &[f32],
    list_off: &[u32],
    queries: &[f32],
    pair_list: &[u32],
    pair_query: &[u32],
    best: &mut [u32],
) {
    for p in (block_idx_x() as usize..best.len()).step_by(grid_dim_x() as usize) {
        let (q, s, e) = pair(p, list_off, queries, pair_list, pair_query);
        fold(&mut best[p], warp_min(vecs, s, e, q));
    }
}

/// `out[i] = data[idx[i]]` through the cache, each lane its own element.
#[kernel(same_len(idx, out))]
pub fn gather(data: HostCached<f32>, idx: &[u32], out: &mut [f32]) {
    let (first, warps) = warp_in_grid();
    let lane = lane_id() as usize;
    let n = out.len();
    let mut base = first * 32;
    // The whole warp goes round together: lanes past the end read element idx[base].
    while base < n {
        let i = base + lane;
        let v = data.get(idx[if i < n { i } else { base }] as usize);
        if i < n {
            out[i] = v;
        }
        base += warps * 32;
    }
}

/// The stress test's parameters.
#[repr(C)]
#[derive(Clone, Copy, DeviceCopy)]
pub struct Stress {
    /// Pages each warp reads.
    pub rounds: u32,
    /// Seeds the warps' page sequences.
    pub seed: u32,
}

/// What element `i` of the stress test's data holds.
#[inline(always)]
pub fn stress_value(i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761) ^ 0x5bd1_e995
}

/// Each warp reads `rounds` pseudo-random pages and adds to `errors[0]` every element that
/// is not [`stress_value`] of its index: a page read while another warp refilled its slot
/// would show here.
#[kernel(min_len(errors = 1))]
pub fn stress(data: HostCached<u32>, params: Stress, errors: &mut [u32]) {
    let (w, _) = warp_in_grid();
    let lane = lane_id() as usize;
    let mut x = params.seed ^ (w as u32).wrapping_mul(0x9e37_79b9) | 1;
    for _ in 0..params.rounds {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let page = x as usize % data.pages();
        let base = page * data.page_elems();
        let bad = data.with_page(page, |elems| {
            let mut bad = 0u32;
            let mut k = lane;
            while k < elems.len() {
                bad += (elems[k] != stress_value(base + k)) as u32;
                k += 32;
            }
            bad
        });
        if bad != 0 {
            atomic_add(&mut errors[0], bad);
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub mod reference;

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests;
