//! The prefetch trace: every prefetch instruction an emulated kernel issues.

/// The prefetch instruction issued (the emulator models an sm_90 GPU, so every instruction
/// the DSL offers is available), or a step of the request-queue protocol that
/// `#[prefetch_next(queue = q)]` uses for managed memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// `prefetch.global.L1`: the 128-byte line holding `address`.
    L1,
    /// `prefetch.global.L2`.
    L2,
    /// `prefetch.global.L2::evict_last`.
    L2EvictLast,
    /// `prefetch.global.L2::evict_normal`.
    L2EvictNormal,
    /// `cp.async.bulk.prefetch.L2.global` of `bytes` bytes.
    BulkL2,
    /// Not an instruction: a migration request for `bytes` bytes at `address` published on a
    /// `RequestQueue` under ready flag `flag` (`#[prefetch_next(queue = q)]` on managed
    /// memory). Recorded when the kernel asks, whatever the queue then does with it (queued,
    /// a duplicate, or a fallback to the fault path).
    Request {
        /// The ready flag the host sets when the range is resident.
        flag: u32,
    },
    /// Not an instruction: the kernel waits for ready flag `flag` before the iteration's body
    /// (`RequestQueue::wait_ready`). `address` and `bytes` are 0.
    WaitReady {
        /// The ready flag waited for.
        flag: u32,
    },
    /// Not an instruction: a warp found `page` of a host cache (`HostCached`) in `slot`.
    /// `address` and `bytes` are the page's in host memory; recorded by the warp's lane 0.
    CacheHit {
        /// The page.
        page: u32,
        /// Its slot.
        slot: u32,
    },
    /// Not an instruction: a warp loaded `page` of a host cache into `slot`.
    CacheMiss {
        /// The page.
        page: u32,
        /// The slot it was loaded into.
        slot: u32,
    },
    /// Not an instruction: a warp dropped `page` from `slot` to load another page there.
    CacheEvict {
        /// The page dropped.
        page: u32,
        /// Its slot.
        slot: u32,
    },
}

/// One prefetch instruction issued by one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefetchRecord {
    /// Which instruction.
    pub instruction: Instruction,
    /// Its address operand.
    pub address: usize,
    /// Bytes named: the bulk prefetch's size, or 1 for the per-line instructions (which fetch
    /// the whole 128-byte line holding `address`; see [`PrefetchRecord::lines`]).
    pub bytes: usize,
    /// The issuing thread's block index.
    pub block: [u32; 3],
    /// The issuing thread's index in its block.
    pub thread: [u32; 3],
    /// The iteration of the enclosing `#[prefetch_next]` loop that issued it: the loop
    /// variable's value for ranges, the element or chunk number for `iter()`/`chunks()`.
    /// `None` outside such a loop.
    pub iteration: Option<usize>,
}

/// Bytes per cache line.
pub const LINE_BYTES: usize = 128;

impl PrefetchRecord {
    /// The 128-byte-aligned byte range of the cache lines the instruction touches.
    pub fn lines(&self) -> std::ops::Range<usize> {
        let start = self.address & !(LINE_BYTES - 1);
        let end = (self.address + self.bytes.max(1)).div_ceil(LINE_BYTES) * LINE_BYTES;
        start..end
    }
}
