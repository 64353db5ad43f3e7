//! # lookahead-emu
//!
//! Runs Lookahead kernels on the CPU, with GPU semantics, so kernel logic is tested without a
//! GPU (in CI), debugged with ordinary tools and demonstrated anywhere. It plays the role of
//! Triton's interpreter mode and Numba's CUDA simulator.
//!
//! Users rarely touch this crate directly: `#[kernel]` launchers accept a
//! [`Emulator`] (re-exported as `lookahead::emu::Emulator`) wherever they accept a GPU, and
//! take host memory (`Vec<T>`, `[T]`) for the kernel's slices:
//!
//! ```ignore
//! let emu = lookahead::emu::Emulator::new();
//! let x = vec![1.0f32; 1000];
//! let mut y = vec![2.0f32; 1000];
//! demo_kernels::saxpy::launch(&emu, LaunchConfig::for_len(1000, 256), 3.0, &x, &mut y)?;
//! ```
//!
//! ## What is emulated
//! * Every thread of a block runs the kernel body with its own indices, as a stackful
//!   coroutine; blocks run in parallel on host threads ([`Emulator::workers`]).
//! * `sync_threads` suspends a thread until every thread of its block is there; warp
//!   shuffles and votes suspend until all lanes of the warp are there, then exchange values
//!   exactly as `shfl.sync` / `vote.sync` do.
//! * `shared_array!` memory is per block, zeroed at block start (reading an element nothing
//!   wrote is reported).
//! * Atomics are host atomics; fences are host fences; `nanosleep`, and every 32nd ordered
//!   load or atomic, lets the other threads of the block run (a spin-wait on a sibling's flag
//!   makes progress, as on a GPU).
//!
//! ## What is reported
//! * A panic in a kernel thread (an out-of-bounds index, say) is re-raised on the launching
//!   thread naming the kernel, the block and the thread.
//! * A barrier that some threads of a block never reach, or a warp operation that some lanes
//!   never reach, is an [`EmuError::Deadlock`] listing who waited where and who exited.
//! * Conflicting accesses to one shared-memory element by two threads with no barrier in
//!   between (`sync_threads`, or `warp::sync` for two lanes of one warp) are an
//!   [`EmuError::DataRace`] (reads and writes through `SharedArray::get`/`set`);
//!   a read of an element nothing wrote is an [`EmuError::UninitializedRead`].
//! * Two threads of a block updating one global-memory element with a plain read-modify-write
//!   (`y[i] += v` in a kernel body) between the same barriers are an [`EmuError::GlobalRace`].
//! * Threads waiting at `sync_threads` on different lines are an
//!   [`EmuError::BarrierDivergence`].
//! * Asynchronous copies into shared memory (`cp.async`, `cp.async.bulk`) land at their wait
//!   or, with [`Emulator::async_copy_landing`], at a random earlier point; a read of their
//!   destination before the wait, a write to it while in flight and an mbarrier phase whose
//!   `expect_tx` bytes differ from the bytes delivered are an [`EmuError::AsyncCopy`]; a wait
//!   on an mbarrier phase that misses an arrival is an [`EmuError::Deadlock`] listing the
//!   threads waiting on it.
//! * A block that spins without progress for [`Emulator::watchdog`]'s time is an
//!   [`EmuError::Hang`]; a loop that calls nothing ends the process with a message, as does a
//!   stack overflow, naming the kernel, block and thread.
//! * With [`Emulator::prefetch_trace`], every prefetch instruction a kernel issues is recorded
//!   ([`PrefetchRecord`]): address, size, instruction, block, thread and the
//!   `#[prefetch_next]` loop iteration that issued it. The migration requests and waits of
//!   `#[prefetch_next(queue = q)]` loops on managed memory are recorded in the same trace
//!   ([`Instruction::Request`], [`Instruction::WaitReady`]).
//!
//! ## Kernels with `#[prefetch_next(level = auto)]`
//! Such a kernel has two bodies (no prefetch, and prefetch at `l2`); on a GPU its launcher
//! picks one by measurement. The emulator has nothing to measure: a plain `launch` runs the
//! hinted body, so the prefetch trace shows what the hinted entry prefetches, and
//! `launch_variant(Variant::Plain, ..)` runs the other one.

mod block;
mod copies;
mod error;
mod fault;
mod grid;
pub mod hooks;
mod shared;
mod thread;
mod trace;
mod warp;
mod watchdog;

pub use copies::Landing;
pub use error::{AsyncMisuse, EmuError, ThreadSet};
pub use grid::{Emulator, DEFAULT_STACK_SIZE, DEFAULT_WATCHDOG, MIN_STACK_SIZE};
pub use trace::{Instruction, PrefetchRecord};
pub use warp::{ShuffleMode, WarpOp};
