//! # lookahead-uvm-kernels
//!
//! The device code of `lookahead-uvm`, written with `#[kernel]` and compiled to PTX by this
//! crate's build script, embedded for the host ([`PTX`]): the start-up probe's kernels
//! ([`touch_pages`], [`read_words`], [`prefetch_sweep`]), kernels that publish ranges to a
//! request ring and consume them ([`publish_ranges`], [`request_and_sum`]), and the GPU-driven
//! pull's copy loop on its own ([`pull_copy`]).
//!
//! Ranges are [`WordRange`]s: a first word and a length, within the buffer the kernel takes.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

use lookahead_device::prelude::*;
use lookahead_device::uvm::{pull, Readiness, RequestQueue};

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/lookahead_uvm_kernels_ptx.rs"));

/// Words `first..first + words` of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, DeviceCopy)]
#[repr(C)]
pub struct WordRange {
    /// The first word.
    pub first: u64,
    /// Number of words.
    pub words: u64,
}

impl WordRange {
    /// The range as `usize` bounds, when it lies within `len` words.
    #[inline(always)]
    pub fn within(&self, len: usize) -> Option<(usize, usize)> {
        let first = usize::try_from(self.first).ok()?;
        let end = first.checked_add(usize::try_from(self.words).ok()?)?;
        (end <= len).then_some((first, end))
    }
}

/// `readiness` code: the range arrived by request before it was read.
pub const ARRIVED: u32 = 1;
/// `readiness` code: the request fell back; the range was read through the fault path.
pub const WENT_AHEAD: u32 = 2;
/// `readiness` code: the wait timed out; the range was read through the fault path.
pub const TIMED_OUT: u32 = 3;

/// Reads one word every `stride` words of `data` and adds them into `sink[0]`: on
/// host-resident managed memory, each read faults its page over.
#[kernel(min_len(sink = 1))]
pub fn touch_pages(data: &[u32], stride: u32, sink: &mut [u32]) {
    let stride = (stride as usize).max(1);
    let mut acc = 0u32;
    let mut i = global_index_x() * stride;
    while i < data.len() {
        // SAFETY: `i < data.len()`; volatile, so the read is never left out.
        acc = acc.wrapping_add(unsafe { core::ptr::read_volatile(&data[i]) });
        i += grid_stride_x() * stride;
    }
    atomic_add(&mut sink[0], acc);
}

/// Streams all of `data` (16-byte loads when it is 16-byte aligned) and adds a checksum into
/// `sink[0]`: a streaming read of the range.
#[kernel(min_len(sink = 1))]
pub fn read_words(data: &[u32], sink: &mut [u32]) {
    let mut acc = 0u32;
    let quads = if data.as_ptr() as usize % 16 == 0 {
        data.len() / 4
    } else {
        0
    };
    let vectors = data.as_ptr() as *const [u32; 4];
    let mut i = global_index_x();
    while i < quads {
        // SAFETY: `i < data.len() / 4`, and `data` is 16-byte aligned.
        let v = unsafe { *vectors.add(i) };
        acc = acc.wrapping_add(v[0] ^ v[1] ^ v[2] ^ v[3]);
        i += grid_stride_x();
    }
    let mut w = quads * 4 + global_index_x();
    while w < data.len() {
        acc = acc.wrapping_add(data[w]);
        w += grid_stride_x();
    }
    atomic_add(&mut sink[0], acc);
}

/// Issues one `prefetch.global.L2` every `stride` words of `data` (the in-kernel hint the
/// probe tests for page migration).
#[kernel]
pub fn prefetch_sweep(data: &[u32], stride: u32) {
    let stride = (stride as usize).max(1);
    let mut i = global_index_x() * stride;
    while i < data.len() {
        prefetch::prefetch_l2(&data[i]);
        i += grid_stride_x() * stride;
    }
}

/// Each warp claims pieces from `next[0]` and copies piece `i` of `src` to the same words of
/// `dst` with [`pull::copy_chunk`], which counts it in `counters[i]`: the GPU-driven pull's
/// copy loop on its own, to compare it with other copy kernels. Pieces outside the buffers
/// are skipped (not counted).
#[kernel(same_len(src, dst), same_len(pieces, counters), min_len(next = 1))]
pub fn pull_copy(
    src: &[u32],
    dst: &mut [u32],
    pieces: &[WordRange],
    next: &mut [u32],
    counters: &mut [u32],
) {
    loop {
        let i = warp_fetch_add(&mut next[0], 1) as usize;
        if i >= pieces.len() {
            return;
        }
        // Warp-uniform: every lane claimed the same piece.
        let Some((first, end)) = pieces[i].within(src.len()) else {
            continue;
        };
        // SAFETY: `first..end` lies within `src` and `dst` (same length); the piece is
        // copied by this warp alone; `counters[i]` exists (`same_len`).
        unsafe {
            pull::copy_chunk(
                src.as_ptr().add(first),
                dst.as_mut_ptr().add(first),
                end - first,
                &mut counters[i],
            )
        };
    }
}

/// Thread `i` publishes range `i` of `data` with flag `i` and writes what happened to
/// `outcomes[i]` (the `Requested` value as a number).
#[kernel(same_len(ranges, outcomes))]
pub fn publish_ranges(
    queue: RequestQueue,
    data: &[u32],
    ranges: &[WordRange],
    outcomes: &mut [u32],
) {
    let i = global_index_x();
    if i < ranges.len() {
        if let Some((first, end)) = ranges[i].within(data.len()) {
            let r = data[first..end].as_ptr();
            outcomes[i] = queue.request(i as u32, r, (end - first) * 4) as u32;
        }
    }
}

/// Block `b` handles ranges `b, b + grid, ...`: thread 0 requests range `i + ahead` (in
/// blocks' steps), waits for range `i` and records how it went in `readiness[i]`
/// ([`ARRIVED`], [`WENT_AHEAD`], [`TIMED_OUT`]); then the block sums the range's words into
/// `sums[i]`. The sums do not depend on the service, only whether the data came by prefetch
/// or by fault. `sums` must start at zero.
#[kernel(same_len(ranges, sums, readiness))]
pub fn request_and_sum(
    queue: RequestQueue,
    data: &[u32],
    ranges: &[WordRange],
    ahead: u32,
    sums: &mut [u32],
    readiness: &mut [u32],
) {
    let (block, blocks) = (block_idx_x() as usize, grid_dim_x() as usize);
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let n = ranges.len();
    let request = |j: usize| {
        if let Some((first, end)) = ranges[j].within(data.len()) {
            queue.request(j as u32, data[first..end].as_ptr(), (end - first) * 4);
        }
    };
    let step = (ahead as usize + 1) * blocks;
    if tid == 0 {
        // The ranges this block reads first: ask for them before anything else.
        let mut j = block;
        while j < n && j < block + step {
            request(j);
            j += blocks;
        }
    }
    let mut i = block;
    while i < n {
        if tid == 0 {
            if i + step < n {
                request(i + step);
            }
            readiness[i] = match queue.wait_ready(i as u32) {
                Readiness::Arrived => ARRIVED,
                Readiness::GoAhead => WENT_AHEAD,
                Readiness::TimedOut => TIMED_OUT,
            };
        }
        sync_threads();
        let (first, end) = ranges[i].within(data.len()).unwrap_or((0, 0));
        let mut acc = 0u32;
        let mut w = first + tid;
        while w < end {
            acc = acc.wrapping_add(data[w]);
            w += threads;
        }
        atomic_add(&mut sums[i], acc);
        i += blocks;
    }
}
