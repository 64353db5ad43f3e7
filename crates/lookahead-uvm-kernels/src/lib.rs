//! Device code of `lookahead-uvm`, compiled to PTX by this crate's build script and embedded
//! for the host ([`PTX`]):
//! the probe's page-touching, streaming-read and prefetch-sweep kernels, kernels that
//! publish ranges to a request ring and consume them (tests and the GPU-driven policy), and
//! the GPU-driven pull's copy loop on its own (`pull_copy`: a GPU test and
//! `experiments/uvm/pull_gap.cu`).
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/lookahead_uvm_kernels_ptx.rs"));

#[cfg(target_arch = "nvptx64")]
mod kernels {
    use lookahead_device::atomic::atomic_add_u32;
    use lookahead_device::index::{global_index_x, grid_stride_x};
    use lookahead_device::requests::{Readiness, RequestQueue};

    /// Reads one byte every `stride` bytes of `[base, base + bytes)`: on host-resident
    /// managed memory each read faults its page over.
    ///
    /// # Safety
    /// The range must be readable; `sink` one `u32`.
    #[no_mangle]
    pub unsafe extern "gpu-kernel" fn touch_pages(
        base: *const u8,
        bytes: u64,
        stride: u64,
        sink: *mut u32,
    ) {
        let mut i = global_index_x() as u64;
        let step = grid_stride_x() as u64;
        let mut acc = 0u32;
        while i * stride < bytes {
            acc =
                acc.wrapping_add(core::ptr::read_volatile(base.add((i * stride) as usize)) as u32);
            i += step;
        }
        atomic_add_u32(sink, acc);
    }

    /// Sums `words` 32-bit words with 16-byte loads: a streaming read of the range.
    ///
    /// # Safety
    /// `base` 16-byte aligned, `words` a multiple of 4, range readable; `sink` one `u32`.
    #[no_mangle]
    pub unsafe extern "gpu-kernel" fn read_words(
        base: *const [u32; 4],
        words: u64,
        sink: *mut u32,
    ) {
        let mut i = global_index_x();
        let step = grid_stride_x();
        let n = (words / 4) as usize;
        let mut acc = 0u32;
        while i < n {
            let v = *base.add(i);
            acc = acc.wrapping_add(v[0] ^ v[1] ^ v[2] ^ v[3]);
            i += step;
        }
        atomic_add_u32(sink, acc);
    }

    /// Issues `prefetch.global.L2` once every `stride` bytes of the range (the in-kernel
    /// hint the probe tests for migration).
    ///
    /// # Safety
    /// None beyond the range being an address range: prefetches cannot fault.
    #[no_mangle]
    pub unsafe extern "gpu-kernel" fn prefetch_sweep(base: *const u8, bytes: u64, stride: u64) {
        let mut i = global_index_x() as u64;
        let step = grid_stride_x() as u64;
        while i * stride < bytes {
            lookahead_device::prefetch::prefetch_l2(base.add((i * stride) as usize));
            i += step;
        }
    }

    /// Each warp claims pieces from `*next` and copies piece `i` from `src` to `dst` with
    /// [`lookahead_device::pull::copy_chunk`], which counts it in `counters[i]`: the
    /// GPU-driven pull's copy loop on its own, to compare it with other copy kernels.
    ///
    /// `pieces[2i]` is the piece's first word (the same in `src` and `dst`), `pieces[2i + 1]`
    /// its length in words.
    ///
    /// # Safety
    /// Every piece within `src` (readable) and `dst` (writable), pieces disjoint; `next`
    /// one zeroed `u32`; `counters` `n` entries.
    #[no_mangle]
    pub unsafe extern "gpu-kernel" fn pull_copy(
        src: *const u32,
        dst: *mut u32,
        pieces: *const u64,
        n: u32,
        next: *mut u32,
        counters: *mut u32,
    ) {
        loop {
            let i = lookahead_device::atomic::warp_fetch_add(&mut *next, 1);
            if i >= n {
                return;
            }
            let first = *pieces.add(2 * i as usize) as usize;
            let words = *pieces.add(2 * i as usize + 1) as usize;
            lookahead_device::pull::copy_chunk(
                src.add(first),
                dst.add(first),
                words,
                counters.add(i as usize),
            );
        }
    }

    /// Thread `i < n` publishes range `i` (`ptrs[i]`, `lens[i]` bytes) with flag `i`.
    ///
    /// # Safety
    /// `ptrs` and `lens` hold `n` entries; `outcomes` `n` entries or null.
    #[no_mangle]
    pub unsafe extern "gpu-kernel" fn publish_ranges(
        queue: RequestQueue,
        ptrs: *const u64,
        lens: *const u64,
        n: u32,
        outcomes: *mut u32,
    ) {
        let i = global_index_x();
        if i < n as usize {
            let r = queue.request(i as u32, *ptrs.add(i) as *const u8, *lens.add(i) as usize);
            if !outcomes.is_null() {
                *outcomes.add(i) = r as u32;
            }
        }
    }

    /// Block `b` handles ranges `b, b + grid, ...`: thread 0 requests range `i + ahead`,
    /// waits for range `i`, and records how it went in `readiness[i]`; then the block sums
    /// the range's words into `sums[i]`. The sums do not depend on the service: only
    /// whether the data came by prefetch or by fault.
    ///
    /// # Safety
    /// `ptrs`/`lens` hold `n` entries of 4-byte-aligned managed ranges; `sums` and
    /// `readiness` `n` zeroed entries.
    #[no_mangle]
    pub unsafe extern "gpu-kernel" fn request_and_sum(
        queue: RequestQueue,
        ptrs: *const u64,
        lens: *const u64,
        n: u32,
        ahead: u32,
        sums: *mut u32,
        readiness: *mut u32,
    ) {
        let block = lookahead_device::index::block_idx_x() as usize;
        let blocks = lookahead_device::index::grid_dim_x() as usize;
        let tid = lookahead_device::index::thread_idx_x() as usize;
        let threads = lookahead_device::index::block_dim_x() as usize;
        let n = n as usize;
        let mut i = block;
        if tid == 0 {
            // Ranges this block will read first: ask for them before anything else.
            let mut j = block;
            while j < n && j < block + (ahead as usize + 1) * blocks {
                queue.request(j as u32, *ptrs.add(j) as *const u8, *lens.add(j) as usize);
                j += blocks;
            }
        }
        while i < n {
            if tid == 0 {
                let next = i + (ahead as usize + 1) * blocks;
                if next < n {
                    queue.request(
                        next as u32,
                        *ptrs.add(next) as *const u8,
                        *lens.add(next) as usize,
                    );
                }
                let r = queue.wait_ready(i as u32);
                *readiness.add(i) = match r {
                    Readiness::Arrived => 1,
                    Readiness::GoAhead => 2,
                    Readiness::TimedOut => 3,
                };
            }
            lookahead_device::sync::sync_threads();
            let words = (*lens.add(i) / 4) as usize;
            let base = *ptrs.add(i) as *const u32;
            let mut acc = 0u32;
            let mut w = tid;
            while w < words {
                acc = acc.wrapping_add(*base.add(w));
                w += threads;
            }
            atomic_add_u32(sums.add(i), acc);
            i += blocks;
        }
    }
}
