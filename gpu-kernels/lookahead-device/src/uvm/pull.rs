//! GPU-driven pull: some warps of a kernel copy ranges of a buffer the GPU reads over the
//! interconnect (managed memory mapped for the GPU with accessed-by advice) into device
//! memory, and the other warps wait for a range's copy to complete, then read the copy.
//!
//! Why: a kernel's own loads of host-resident pages stream at close to the rate of a pinned
//! `cudaMemcpy` whatever the ranges' size, while migrating the same scattered ranges
//! (faults, or prefetches issued by the host) is slower, the more so the smaller they are
//! (H100, driver 580.159.04: `results/pull_paths.txt`, explained in
//! `docs/unified-memory.md`, "The GPU-driven pull"). A few copy warps reach that rate; the
//! rest of the grid reads the copies at device-memory speed as soon as each range is
//! complete, so the copy and the computation overlap.
//!
//! The protocol: a range is cut into chunks of [`CHUNK_BYTES`] ([`chunks`], [`chunk_words`]);
//! the warp that copies a chunk makes its stores visible to the GPU and adds one to the range's
//! counter ([`copy_chunk`]); the range is complete when its counter equals its [`chunks`]
//! ([`wait_complete`]). Counters are ordinary `u32`s in device memory that persist across
//! launches, so a range copied once is found complete later: the copy is a cache, valid for as
//! long as the source does not change.
//!
//! A kernel that uses it must never make a copying warp wait on a range: then every wait
//! ends, whatever the number of resident blocks. The simplest way is to hand out the copy
//! chunks before the work that waits, from a counter, to warps that are already running.

use crate::atomic::WarpFetchAdd;
use crate::index::lane_id;
use crate::memory::{load_acquire_gpu, load_streaming, load_streaming_v4, store_v4};
use crate::sync::{fence_gpu, globaltimer_ns, nanosleep};
use crate::warp;

/// Bytes of one copy chunk: large enough that a warp keeps 4 KiB of loads in flight for a
/// while, small enough that a few hundred warps share a range.
pub const CHUNK_BYTES: usize = 64 << 10;

/// Chunks of a range of `bytes`.
#[inline(always)]
pub fn chunks(bytes: usize) -> u32 {
    bytes.div_ceil(CHUNK_BYTES) as u32
}

/// The 32-bit words of chunk `chunk` of a range of `words` words: `(first, end)`.
#[inline(always)]
pub fn chunk_words(chunk: u32, words: usize) -> (usize, usize) {
    let per = CHUNK_BYTES / 4;
    let first = (chunk as usize * per).min(words);
    (first, (first + per).min(words))
}

/// Copies `words` 32-bit words from `src` to `dst` with the whole warp (every lane calls it
/// with the same arguments), then adds one to `*counter` once the stores are visible to the
/// whole GPU. 16-byte loads, eight in flight per lane, when both pointers are 16-byte aligned.
///
/// # Safety
/// `src` must be readable and `dst` writable for `words` words, and no other thread may
/// touch `dst[..words]` until `*counter` says the copy is complete; `counter` must be a
/// valid `u32` in memory the GPU can update atomically.
#[inline(always)]
pub unsafe fn copy_chunk(src: *const u32, dst: *mut u32, words: usize, counter: *mut u32) {
    copy_words(src, dst, words);
    // Every lane's stores before the count (a fence each, then the warp meets).
    fence_gpu();
    warp::sync();
    // Not `if lane == 0`: a branch here can leave the warp split for the caller's next chunk.
    u32::warp_fetch_add_ptr(counter, 1);
}

/// Copies `words` 32-bit words from `src` to `dst` with the whole warp (every lane calls it
/// with the same arguments): 16-byte streaming loads, eight in flight per lane, when both
/// pointers are 16-byte aligned, so a warp keeps 4 KiB of reads over the interconnect in
/// flight. The stores are the caller's to publish (a fence, then a flag).
///
/// # Safety
/// `src` must be readable and `dst` writable for `words` words, and nothing else may write
/// `dst[..words]` meanwhile.
#[inline(always)]
pub unsafe fn copy_words(src: *const u32, dst: *mut u32, words: usize) {
    let lane = lane_id() as usize;
    let mut done = 0usize;
    if (src as usize | dst as usize) % 16 == 0 {
        const UNROLL: usize = 8;
        let quads = words / 4;
        let mut q = lane;
        while q < quads {
            let mut v = [[0u32; 4]; UNROLL];
            for (u, x) in v.iter_mut().enumerate() {
                let i = q + u * 32;
                if i < quads {
                    *x = load_streaming_v4(src.add(i * 4));
                }
            }
            for (u, x) in v.iter().enumerate() {
                let i = q + u * 32;
                if i < quads {
                    store_v4(dst.add(i * 4), *x);
                }
            }
            q += 32 * UNROLL;
        }
        done = quads * 4;
    }
    let mut w = done + lane;
    while w < words {
        *dst.add(w) = load_streaming(src.add(w));
        w += 32;
    }
}

/// Waits, with the whole warp, until `*counter >= chunks` or `timeout_ns` pass; returns
/// whether the range is complete. When it returns `true`, every lane sees the copy's data.
///
/// Every lane polls (one load for the warp) and the loop ends on warp votes, so all lanes
/// leave it together: a lane-0 polling loop left the warp split for the work after it.
///
/// # Safety
/// `counter` must be a valid `u32` in GPU memory.
#[inline(always)]
pub unsafe fn wait_complete(counter: *const u32, chunks: u32, timeout_ns: u64) -> bool {
    let start = warp::shfl_idx_u64(globaltimer_ns(), 0);
    let mut sleep = 256u32;
    loop {
        // Each lane acquires for itself (the count only grows, so a complete read stays so).
        if warp::vote_all(load_acquire_gpu(counter) >= chunks) {
            return true;
        }
        if warp::vote_any(globaltimer_ns().wrapping_sub(start) >= timeout_ns) {
            return false;
        }
        nanosleep(sleep);
        sleep = (sleep * 2).min(4096);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_a_range_exactly_once() {
        for words in [0usize, 1, 4095, 16384, 16385, 100_000] {
            let n = chunks(words * 4);
            let mut next = 0;
            for c in 0..n {
                let (a, b) = chunk_words(c, words);
                assert_eq!(a, next);
                assert!(b > a && b - a <= CHUNK_BYTES / 4);
                next = b;
            }
            assert_eq!(next, words, "{words}");
        }
    }
}
