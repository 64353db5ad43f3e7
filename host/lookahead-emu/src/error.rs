//! What a failed emulated launch reports.

use std::fmt;

/// A set of threads of one block, by linear index (`x + y * dim.x + z * dim.x * dim.y`);
/// displayed as ranges, e.g. `32 threads: 0..=15, 48..=63`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadSet(pub Vec<u32>);

impl ThreadSet {
    /// Number of threads.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Whether thread `linear` is in the set.
    pub fn contains(&self, linear: u32) -> bool {
        self.0.contains(&linear)
    }
}

impl fmt::Display for ThreadSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "none");
        }
        write!(
            f,
            "{} thread{}: ",
            self.0.len(),
            if self.0.len() == 1 { "" } else { "s" }
        )?;
        let mut ranges = Vec::new();
        let mut start = self.0[0];
        let mut prev = start;
        for &t in &self.0[1..] {
            if t != prev + 1 {
                ranges.push((start, prev));
                start = t;
            }
            prev = t;
        }
        ranges.push((start, prev));
        let shown: Vec<String> = ranges
            .iter()
            .take(8)
            .map(|&(a, b)| {
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}..={b}")
                }
            })
            .collect();
        write!(f, "{}", shown.join(", "))?;
        if ranges.len() > 8 {
            write!(f, ", ...")?;
        }
        Ok(())
    }
}

/// Why an emulated launch failed (kernel panics are re-raised as panics instead, as Rust
/// does for an out-of-bounds index).
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmuError {
    /// Some threads of a block wait at a barrier or warp operation that the others never
    /// reach: on a GPU the block would hang.
    #[error(
        "kernel `{kernel}` deadlocks in block {block:?}: {what}\n  waiting at sync_threads: \
         {at_barrier}\n  waiting at a warp operation: {at_warp}\n  waiting on an mbarrier: \
         {at_mbarrier}\n  exited: {exited}"
    )]
    Deadlock {
        /// The kernel.
        kernel: &'static str,
        /// The block.
        block: [u32; 3],
        /// What went wrong, in words.
        what: String,
        /// Threads waiting at `sync_threads`.
        at_barrier: ThreadSet,
        /// Threads waiting at a warp shuffle or vote.
        at_warp: ThreadSet,
        /// Threads waiting for an mbarrier's phase to complete.
        at_mbarrier: ThreadSet,
        /// Threads that returned.
        exited: ThreadSet,
    },
    /// Two threads of a block touched one shared-memory element with no barrier between,
    /// at least one of them writing.
    #[error(
        "kernel `{kernel}` has a data race in block {block:?}: {kind} on element {index} of the \
         shared array declared at {site}, by thread {thread:?} and {other}; separate the accesses \
         with sync_threads() or use an atomic"
    )]
    DataRace {
        /// The kernel.
        kernel: &'static str,
        /// The block.
        block: [u32; 3],
        /// `file:line:column` of the `shared_array!`.
        site: &'static str,
        /// The element.
        index: usize,
        /// "write after write", "read after write" or "write after read".
        kind: &'static str,
        /// The thread whose access revealed the race.
        thread: [u32; 3],
        /// The thread that accessed it first, in words.
        other: String,
    },
    /// The threads of a block wait at `sync_threads` calls on different lines: CUDA's
    /// barrier must be the same one for every thread (undefined behaviour otherwise).
    #[error(
        "kernel `{kernel}` diverges at a barrier in block {block:?}: its threads wait at \
         sync_threads() calls on different lines ({sites}); every thread of a block must reach \
         the same sync_threads() call, so move it out of the branch"
    )]
    BarrierDivergence {
        /// The kernel.
        kernel: &'static str,
        /// The block.
        block: [u32; 3],
        /// Each call site (`file:line:column`) with the threads waiting there, in words.
        sites: String,
    },
    /// A thread read a shared-memory element no thread of its block had written: on a GPU
    /// it reads whatever the memory held.
    #[error(
        "kernel `{kernel}` reads uninitialised shared memory in block {block:?}: thread \
         {thread:?} reads element {index} of the shared array declared at {site}, which no thread \
         of the block has written; write it first (and sync_threads() before other threads read \
         it)"
    )]
    UninitializedRead {
        /// The kernel.
        kernel: &'static str,
        /// The block.
        block: [u32; 3],
        /// `file:line:column` of the `shared_array!`.
        site: &'static str,
        /// The element.
        index: usize,
        /// The reading thread.
        thread: [u32; 3],
    },
    /// Two threads of a block updated one global-memory element with a plain
    /// read-modify-write (`y[i] += v`, `y[i] = y[i] + v`) and no barrier between: on a GPU
    /// the updates race and some are lost.
    #[error(
        "kernel `{kernel}` has a data race in block {block:?}: threads {thread:?} and {other:?} \
         both update `{place}` (element at {address:#x}) with `{op}` and no sync_threads() \
         between; on a GPU some updates are lost. Use an atomic (`atomic_add(&mut {place}, v)`) \
         or give each thread its own element"
    )]
    GlobalRace {
        /// The kernel.
        kernel: &'static str,
        /// The block.
        block: [u32; 3],
        /// The updated place as written in the kernel (`y[0]`).
        place: &'static str,
        /// The operator (`+=`, `=`).
        op: &'static str,
        /// The element's address.
        address: usize,
        /// The thread whose update revealed the race.
        thread: [u32; 3],
        /// The thread that updated it before, in the same barrier interval.
        other: [u32; 3],
    },
    /// An asynchronous copy into shared memory (`cp.async`, `cp.async.bulk`) or its
    /// mbarrier used in a way that reads or writes the wrong data on a GPU.
    #[error(
        "kernel `{kernel}` misuses an asynchronous copy in block {block:?}, thread {thread:?}: {misuse}: {detail}"
    )]
    AsyncCopy {
        /// The kernel.
        kernel: &'static str,
        /// The block.
        block: [u32; 3],
        /// The thread whose operation revealed it.
        thread: [u32; 3],
        /// Which misuse.
        misuse: AsyncMisuse,
        /// The copy, the addresses and the fix, in words.
        detail: String,
    },
    /// No thread of a block returned, passed a barrier or a warp operation for the watchdog's
    /// time, while some kept running: a spin-wait for something that never happens, or a loop
    /// that does not end.
    #[error(
        "kernel `{kernel}` hangs in block {block:?}: for {seconds:.1} s no thread returned, \
         passed a barrier or a warp operation; still running: {running} (a spin-wait on a flag no \
         thread sets, or a loop that never ends?). The watchdog's time is `Emulator::watchdog` \
         (or LOOKAHEAD_EMU_WATCHDOG_S)"
    )]
    Hang {
        /// The kernel.
        kernel: &'static str,
        /// The block.
        block: [u32; 3],
        /// Seconds without progress.
        seconds: f64,
        /// Threads still runnable (spinning).
        running: ThreadSet,
    },
    /// The stack per emulated thread (`Emulator::stack_size`) is too small to run a thread
    /// on; refused before any thread starts.
    #[error(
        "kernel `{kernel}` not run: the emulator's stack per thread is {bytes} bytes \
         (`Emulator::stack_size`), less than the {min} bytes it needs to run a thread; give it \
         at least that (the default, `DEFAULT_STACK_SIZE`, is 1 MiB)"
    )]
    StackTooSmall {
        /// The kernel.
        kernel: &'static str,
        /// The stack size asked for.
        bytes: usize,
        /// The least the emulator accepts ([`crate::MIN_STACK_SIZE`]).
        min: usize,
    },
}

/// What an [`EmuError::AsyncCopy`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncMisuse {
    /// Shared memory an asynchronous copy writes was read before the reading thread waited
    /// for the copy (`cp.async.wait_group` of the issuing thread, or the mbarrier phase the
    /// bulk copy completes on): on a GPU it reads old or partial data.
    ReadBeforeWait,
    /// Shared memory an asynchronous copy writes was written (by a store or another copy)
    /// while the copy was in flight: on a GPU the two writes race.
    WriteInFlight,
    /// The bytes announced to an mbarrier (`expect_tx`) differ from the bytes the copies
    /// completing on it delivered: on a GPU its phase completes early (fewer announced) or
    /// never (more announced).
    ByteCount,
}

impl fmt::Display for AsyncMisuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AsyncMisuse::ReadBeforeWait => "a read of a staged copy before its wait",
            AsyncMisuse::WriteInFlight => "a write to shared memory whose copy is in flight",
            AsyncMisuse::ByteCount => "a wrong expected byte count",
        })
    }
}
