//! Kernels of the asynchronous-copy runtime (`lookahead_device::pipeline`): the typed
//! pipeline of each copy kind, each raw instruction group, and one misuse per emulator
//! report. Built from sm_80 (`cp.async`), the bulk ones from sm_90.
// Below sm_90 the bulk kernels, and below sm_80 all of them, are left out, with what only
// they use.
#![cfg_attr(
    all(target_arch = "nvptx64", not(target_feature = "sm_90")),
    allow(unused_imports, unused_macros, dead_code)
)]

use lookahead_device::pipeline;
use lookahead_device::pipeline::bulk::{copy_bulk, copy_bulk_dyn, fence_proxy_async_shared};
use lookahead_device::pipeline::cp_async::{
    commit_group, copy_ca, copy_cg, copy_cg_zfill, wait_all, wait_group,
};
use lookahead_device::pipeline::{BulkPortable, CpAsync, MBarrier};
use lookahead_device::prelude::*;

#[cfg(not(target_arch = "nvptx64"))]
use std::vec::Vec;

/// Elements per stage of the pipelined sums.
pub const STAGE: usize = 256;

/// Kernels from sm_80 on.
pub const SM80_KERNELS: &[&str] = &[
    "pipe_sum_cp_async",
    "pipe_sum_portable",
    "raw_cp_async",
    "raw_mbarrier",
    "attr_sum_cp_async",
    "attr_sum_portable",
    "attr_two",
    "attr_sum_auto",
    "attr_sum_auto__cp_async_s2",
    "attr_sum_auto__cp_async_s3",
    "attr_sum_auto__cp_async_s4",
    "attr_sum_auto__bulk_portable_s2",
    "attr_sum_auto__bulk_portable_s3",
    "attr_sum_auto__bulk_portable_s4",
];

/// Kernels from sm_90 on.
pub const SM90_KERNELS: &[&str] = &["pipe_sum_bulk", "raw_bulk"];

/// The CPU reference of the pipelined sums: block `b` of `blocks` sums (wrapping) the
/// chunks `b, b + blocks, ...` of [`STAGE`] elements of `x` (the last one may be short),
/// thread `t` of 256 the elements at `t` of each, into `out[b * 256 + t]`.
#[cfg(not(target_arch = "nvptx64"))]
pub fn pipe_sum_reference(x: &[u32], blocks: usize) -> std::vec::Vec<u32> {
    let mut out = std::vec![0u32; blocks * 256];
    for (c, chunk) in x.chunks(STAGE).enumerate() {
        for (t, v) in chunk.iter().enumerate() {
            let o = &mut out[(c % blocks) * 256 + t];
            *o = o.wrapping_add(*v);
        }
    }
    out
}

/// The chunks of [`STAGE`] elements block `b` reads: `b, b + grid, ...`; the source of
/// chunk `c` (clamped to `x`'s end).
#[inline(always)]
fn chunk(x: &[u32], c: usize) -> &[u32] {
    let lo = (c * STAGE).min(x.len());
    &x[lo..(lo + STAGE).min(x.len())]
}

/// The pipelined sum, generic over the copy kind: a three-stage pipeline over the block's
/// chunks, each thread summing element `t` of each.
macro_rules! pipe_sum {
    ($name:ident, $kind:ty) => {
        #[kernel(min_len(out = 256))]
        pub fn $name(x: &[u32], out: &mut [u32]) {
            let (b, grid, t) = (
                block_idx_x() as usize,
                grid_dim_x() as usize,
                thread_idx_x() as usize,
            );
            let chunks = x.len().div_ceil(STAGE);
            let mine = if b < chunks { (chunks - b).div_ceil(grid) } else { 0 };
            let mut p = pipeline!(u32; STAGE, stages = 3, copy = $kind);
            for s in 0..2 {
                if s < mine {
                    p.issue(|c| c.slice(0, chunk(x, b + s * grid)));
                }
            }
            let mut acc = 0u32;
            for s in 0..mine {
                let stage = p.wait();
                if s + 2 < mine {
                    stage.refill(|c| c.slice(0, chunk(x, b + (s + 2) * grid)));
                }
                let n = chunk(x, b + s * grid).len();
                if t < n {
                    acc = acc.wrapping_add(stage.data()[t]);
                }
            }
            if b * 256 + t < out.len() {
                out[b * 256 + t] = acc;
            }
        }
    };
}

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
pipe_sum!(pipe_sum_cp_async, CpAsync);
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
pipe_sum!(pipe_sum_portable, BulkPortable);
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pipe_sum!(pipe_sum_bulk, lookahead_device::pipeline::Bulk);

/// Every `cp.async` form: `out[0..16]` gets `x[0..16]` through 4-, 8- and 16-byte copies,
/// `out[16..20]` the first 3 words of `x[16..20]` and a zero (zero fill).
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[kernel(min_len(x = 20, out = 20))]
pub fn raw_cp_async(x: &[u32], out: &mut [u32]) {
    let tile = shared_array!(u32; 20);
    if thread_idx_x() == 0 {
        let (s, d) = (x.as_ptr() as *const u8, tile.as_ptr() as *mut u8);
        // SAFETY: `x` holds 20 words (min_len) and is 16-byte aligned (a launch
        // allocation); `tile` is 20 words of shared memory, 16-byte aligned, read only after
        // the waits.
        unsafe {
            copy_ca::<4>(d, s);
            copy_ca::<4>(d.add(4), s.add(4));
            copy_ca::<8>(d.add(8), s.add(8));
            commit_group();
            copy_cg(d.add(16), s.add(16));
            copy_ca::<16>(d.add(32), s.add(32));
            copy_cg(d.add(48), s.add(48));
            commit_group();
            copy_cg_zfill(d.add(64), s.add(64), 12);
            wait_group::<1>();
            wait_all();
        }
    }
    sync_threads();
    let t = thread_idx_x() as usize;
    if t < 20 {
        out[t] = tile.get(t);
    }
}

/// The sm_80 mbarrier instructions: every thread arrives, then waits for the phase (test
/// wait), twice; `out[t]` counts the phases each thread saw complete.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[kernel(min_len(out = 64))]
pub fn raw_mbarrier(out: &mut [u32]) {
    let words = shared_array!(u64; 1);
    let bar = MBarrier::in_shared(words, 0);
    let t = thread_idx_x() as usize;
    if t == 0 {
        bar.init(block_dim_x());
    }
    sync_threads();
    let mut seen = 0;
    for phase in 0..2u32 {
        let _ = bar.arrive();
        while !bar.test_wait_parity(phase & 1) {}
        seen += 1;
    }
    sync_threads();
    if t == 0 {
        bar.inval();
    }
    if t < out.len() {
        out[t] = seen;
    }
}

/// The sm_90 forms: thread 0 copies `x[0..64]` into shared memory with two bulk copies
/// (one of a constant size), announcing the bytes; every thread waits (try_wait) and
/// copies the tile to `out`.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
#[kernel(min_len(x = 64, out = 64))]
pub fn raw_bulk(x: &[u32], out: &mut [u32]) {
    let tile = shared_array!(u32; 64);
    let words = shared_array!(u64; 1);
    let bar = MBarrier::in_shared(words, 0);
    let t = thread_idx_x() as usize;
    if t == 0 {
        bar.init(1);
        fence_proxy_async_shared();
    }
    sync_threads();
    if t == 0 {
        let (s, d) = (x.as_ptr() as *const u8, tile.as_ptr() as *mut u8);
        // SAFETY: 16-byte aligned halves of `x` (min_len) and of the tile, which nothing
        // reads before the phase completes; the barrier is initialised and expects them.
        unsafe {
            copy_bulk::<128>(d, s, bar);
            copy_bulk_dyn(d.add(128), s.add(128), 128, bar);
        }
        let _ = bar.arrive_expect_tx(256);
    }
    while !bar.try_wait_parity(0) {}
    if t < 64 {
        // SAFETY: in bounds; the phase completed, so the tile holds the copy.
        out[t] = unsafe { tile.as_ptr().add(t).read() };
    }
}

// ---------------------------------------------------------------------------------------
// Misuses, one per emulator report (tests/tests/emulator_pipeline.rs).

/// Thread 0 reads its `cp.async` destination before waiting for the copy.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[kernel(min_len(x = 4, out = 4))]
pub fn bug_read_before_wait(x: &[u32], out: &mut [u32]) {
    let tile = shared_array!(u32; 4);
    if thread_idx_x() == 0 {
        // SAFETY: 16 aligned bytes of `x` and of the tile.
        unsafe { copy_cg(tile.as_ptr() as *mut u8, x.as_ptr() as *const u8) };
        commit_group();
        out[0] = tile.get(0); // before wait_all
        wait_all();
    }
}

/// Thread 1 stores into a buffer while thread 0's copy into it is in flight (between
/// barriers: thread 0 waits for its copy only after the second).
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[kernel(min_len(x = 4, out = 4))]
pub fn bug_write_in_flight(x: &[u32], out: &mut [u32]) {
    let tile = shared_array!(u32; 4);
    let t = thread_idx_x();
    if t == 0 {
        // SAFETY: as in `bug_read_before_wait`.
        unsafe { copy_cg(tile.as_ptr() as *mut u8, x.as_ptr() as *const u8) };
        commit_group();
    }
    sync_threads();
    if t == 1 {
        tile.set(2, 7);
    }
    sync_threads();
    if t == 0 {
        wait_all();
    }
    sync_threads();
    if (t as usize) < 4 {
        out[t as usize] = tile.get(t as usize);
    }
}

/// Thread 1 refills a buffer with `cp.async` while thread 0 may still read it: no barrier
/// between thread 0's read and the copy (a race on the GPU).
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[kernel(min_len(x = 4, out = 4))]
pub fn bug_refill_without_barrier(x: &[u32], out: &mut [u32]) {
    let tile = shared_array!(u32; 4);
    let t = thread_idx_x() as usize;
    if t < 4 {
        tile.set(t, 0);
    }
    sync_threads();
    if t == 0 {
        out[0] = tile.get(3);
    }
    // Missing: sync_threads();
    if t == 1 {
        // SAFETY: as in `bug_read_before_wait`.
        unsafe { copy_cg(tile.as_ptr() as *mut u8, x.as_ptr() as *const u8) };
        wait_all();
    }
}

/// Thread 0 copies `bytes` bytes of `x` with a bulk copy but announces `announced`.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
#[kernel(min_len(x = 64, out = 64))]
pub fn bug_byte_count(x: &[u32], out: &mut [u32], bytes: u32, announced: u32) {
    let tile = shared_array!(u32; 64);
    let words = shared_array!(u64; 1);
    let bar = MBarrier::in_shared(words, 0);
    let t = thread_idx_x() as usize;
    if t == 0 {
        bar.init(1);
        fence_proxy_async_shared();
    }
    sync_threads();
    if t == 0 {
        // SAFETY: `bytes` (at most 256, a multiple of 16) of `x` and of the tile.
        unsafe {
            copy_bulk_dyn(
                tile.as_ptr() as *mut u8,
                x.as_ptr() as *const u8,
                bytes.min(256),
                bar,
            )
        };
        let _ = bar.arrive_expect_tx(announced);
    }
    bar.wait_parity(0);
    if t < 64 {
        // SAFETY: in bounds; read after the phase.
        out[t] = unsafe { tile.as_ptr().add(t).read() };
    }
}

/// An mbarrier initialised for every thread of the block, on which the last warp never
/// arrives: the others wait for ever.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[kernel]
pub fn bug_missing_arrive(out: &mut [u32]) {
    let words = shared_array!(u64; 1);
    let bar = MBarrier::in_shared(words, 0);
    let t = thread_idx_x();
    if t == 0 {
        bar.init(block_dim_x());
    }
    sync_threads();
    if t < block_dim_x() - 32 {
        let _ = bar.arrive();
        bar.wait_parity(0);
    }
    if (t as usize) < out.len() {
        out[t as usize] = t;
    }
}

/// Thread 0 overwrites the source of its `cp.async` before waiting for it: what lands
/// depends on when the copy reads its source, so the result differs between early and
/// late landings (the emulator's `Landing::Early` shows it).
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[kernel(min_len(x = 4, out = 4))]
pub fn bug_source_written_in_flight(x: &mut [u32], out: &mut [u32]) {
    let tile = shared_array!(u32; 4);
    if thread_idx_x() == 0 {
        // SAFETY: as in `bug_read_before_wait`.
        unsafe { copy_cg(tile.as_ptr() as *mut u8, x.as_ptr() as *const u8) };
        commit_group();
        x[0] = 1; // the copy may or may not have read x[0] yet
        wait_all();
        out[0] = tile.get(0);
    }
}

// ---------------------------------------------------------------------------------------
// `#[prefetch_next(into = shared(..))]`: the pipelined sum and a loop with two targets.

/// [`pipe_sum_reference`]'s sum, written with the attribute: each block's chunks staged
/// three ahead into shared memory, the body reading them as `tile`.
macro_rules! attr_sum {
    ($name:ident, $($option:tt)*) => {
        #[kernel(min_len(out = 256))]
        pub fn $name(x: &[u32], out: &mut [u32]) {
            let (b, grid, t) = (
                block_idx_x() as usize,
                grid_dim_x() as usize,
                thread_idx_x() as usize,
            );
            let chunks = x.len().div_ceil(STAGE);
            let mut acc = 0u32;
            #[prefetch_next(into = shared([u32; STAGE]), $($option)*, of(tile = chunk(x, c)))]
            for c in (b..chunks).step_by(grid) {
                if t < tile.len() {
                    acc = acc.wrapping_add(tile[t]);
                }
            }
            if b * 256 + t < out.len() {
                out[b * 256 + t] = acc;
            }
        }
    };
}

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
attr_sum!(attr_sum_cp_async, stages = 3, copy = cp_async);
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
attr_sum!(attr_sum_portable, stages = 3, copy = bulk_portable);
// Loads and stores through registers: any architecture.
attr_sum!(attr_sum_load_store, stages = 2, copy = load_store);
// The copy kind and stage count chosen by measurement: entries for `cp_async` and
// `bulk_portable` at 2, 3 and 4 stages, and the plain entry, which stages with loads and
// stores.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
attr_sum!(attr_sum_auto, stages = auto, copy = auto);

/// Rows of [`TWO_ROW`] words: iteration `c` stages row `c` of `x` and the two rows of `x`
/// that `idx[2c]`, `idx[2c + 1]` name, and writes their sum to row `c` of `out`.
pub const TWO_ROW: usize = 16;

/// The CPU reference of [`attr_two`].
#[cfg(not(target_arch = "nvptx64"))]
pub fn attr_two_reference(x: &[u32], idx: &[u32]) -> Vec<u32> {
    let rows = idx.len() / 2;
    let row = |r: usize| &x[r * TWO_ROW..][..TWO_ROW];
    (0..rows * TWO_ROW)
        .map(|e| {
            let (c, k) = (e / TWO_ROW, e % TWO_ROW);
            let (g0, g1) = (idx[2 * c] as usize, idx[2 * c + 1] as usize);
            row(c)[k].wrapping_add(row(g0)[k]).wrapping_add(row(g1)[k])
        })
        .collect()
}

/// Two targets of one pipeline: a row, and two gathered rows.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[kernel]
pub fn attr_two(x: &[u32], idx: &[u32], out: &mut [u32]) {
    let (b, grid, t) = (
        block_idx_x() as usize,
        grid_dim_x() as usize,
        thread_idx_x() as usize,
    );
    let rows = (idx.len() / 2).min(out.len() / TWO_ROW);
    #[prefetch_next(into = shared([u32; 2 * TWO_ROW]), stages = 2, of(own = x.rows(c * TWO_ROW, TWO_ROW, 1, 0), picked = x.gather_rows(&idx[2 * c..2 * c + 2], TWO_ROW)))]
    for c in (b..rows).step_by(grid) {
        if t < TWO_ROW {
            out[c * TWO_ROW + t] = own[t]
                .wrapping_add(picked[t])
                .wrapping_add(picked[TWO_ROW + t]);
        }
    }
}
