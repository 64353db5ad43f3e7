//! Runs one block: every thread is a coroutine on this host thread, resumed in rounds until
//! each has returned. A round runs every runnable thread until it returns or suspends; then
//! warps whose lanes all wait at a warp operation exchange their values, and a block whose
//! live threads all wait at `sync_threads` passes the barrier. Anything else is a deadlock.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::copies::{AsyncCopies, AsyncReport};
use crate::error::{EmuError, ThreadSet};
use crate::hooks::{GlobalRaceReport, HangReport};
use crate::shared::{SharedMemory, SharedReport};
use crate::thread::{set_current, set_stack_limit, BlockCtx, LaunchCtx, Suspend, ThreadCtx};
use crate::trace::PrefetchRecord;
use crate::warp::{self, WarpOp};
use crate::watchdog::WorkerSlot;

/// Coroutine stacks kept between blocks and launches (mapping stacks is the costly part).
pub(crate) struct StackPool {
    size: usize,
    free: Vec<DefaultStack>,
}

impl StackPool {
    pub fn new(size: usize) -> Self {
        StackPool {
            size,
            free: Vec::new(),
        }
    }
    fn take(&mut self) -> DefaultStack {
        self.free.pop().unwrap_or_else(|| {
            DefaultStack::new(self.size)
                .expect("could not map a coroutine stack for an emulated GPU thread")
        })
    }
    fn give(&mut self, s: DefaultStack) {
        self.free.push(s);
    }
}

/// How a block failed.
pub(crate) enum Failure {
    Error(Box<EmuError>),
    /// A kernel thread panicked: re-raised on the launching thread with this message.
    Panic(String),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Runnable,
    AtBarrier,
    AtWarp,
    AtMBarrier,
    Exited,
}

fn coords(linear: u32, dim: [u32; 3]) -> [u32; 3] {
    [
        linear % dim[0],
        linear / dim[0] % dim[1],
        linear / (dim[0] * dim[1]),
    ]
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}

type Thread = Coroutine<(), Suspend, (), DefaultStack>;

/// The block's linear index in its grid (seeds its early landings of asynchronous copies).
fn block_serial(idx: [u32; 3], launch: &LaunchCtx) -> u64 {
    let g = launch.grid_dim;
    idx[0] as u64 + g[0] as u64 * (idx[1] as u64 + g[1] as u64 * idx[2] as u64)
}

/// Runs block `block_idx` of `launch`; returns its prefetch records.
pub(crate) fn run_block(
    launch: &LaunchCtx,
    block_idx: [u32; 3],
    entry: &(dyn Fn() + Sync),
    pool: &mut StackPool,
    slot: &WorkerSlot,
) -> Result<Vec<PrefetchRecord>, Failure> {
    let dim = launch.block_dim;
    let n = dim[0] * dim[1] * dim[2];
    static SERIAL: AtomicU64 = AtomicU64::new(1);
    let block = BlockCtx {
        launch,
        block_idx,
        epoch: Cell::new(1),
        warp_syncs: RefCell::new(vec![0; n.div_ceil(32) as usize]),
        shared: RefCell::new(SharedMemory::default()),
        copies: RefCell::new(AsyncCopies::new(
            n,
            launch.landing,
            block_serial(block_idx, launch),
        )),
        trace: RefCell::new(Vec::new()),
        serial: SERIAL.fetch_add(1, Ordering::Relaxed),
        events: Cell::new(0),
        watched: Cell::new((0, Instant::now())),
    };
    launch.progress.fetch_add(1, Ordering::Relaxed);
    let threads: Vec<ThreadCtx<'_>> = (0..n)
        .map(|linear| ThreadCtx {
            block: &block,
            thread_idx: coords(linear, dim),
            linear,
            yielder: Cell::new(std::ptr::null()),
            warp_op: Cell::new(None),
            warp_result: Cell::new(0),
            iteration: Cell::new(None),
            barrier_site: Cell::new(None),
            spins: Cell::new(0),
            mbarrier_wait: Cell::new(None),
        })
        .collect();
    let mut limits = Vec::with_capacity(threads.len());
    let cos: Vec<Option<Thread>> = threads
        .iter()
        .map(|t| {
            let tp = t as *const ThreadCtx<'_> as usize;
            let body = move |y: &Yielder<(), Suspend>, ()| {
                // SAFETY: `threads` outlives every coroutine (they are finished or dropped
                // before this function returns).
                let t = unsafe { &*(tp as *const ThreadCtx<'_>) };
                t.yielder.set(y as *const _);
                entry();
            };
            let stack = pool.take();
            limits.push(stack.limit().get());
            // SAFETY: the closure borrows `threads` and `entry`, both alive until every
            // coroutine has returned or been dropped, which happens before we return.
            Some(unsafe { Coroutine::with_stack_unchecked(stack, body) })
        })
        .collect();
    let mut s = Scheduler {
        launch,
        block_idx,
        threads: &threads,
        state: vec![State::Runnable; n as usize],
        live: n,
        cos,
        limits,
        pool,
        slot,
    };
    let result = s.run(&block);
    // Suspended coroutines (after a failure) are unwound here, while `threads` is alive.
    drop(s);
    result.map(|()| block.trace.take())
}

/// One block's threads and where each one is.
struct Scheduler<'a, 'b> {
    launch: &'a LaunchCtx,
    block_idx: [u32; 3],
    threads: &'a [ThreadCtx<'b>],
    cos: Vec<Option<Thread>>,
    /// Each coroutine's stack limit, for the stack-overflow report.
    limits: Vec<usize>,
    state: Vec<State>,
    live: u32,
    pool: &'a mut StackPool,
    slot: &'a WorkerSlot,
}

impl Scheduler<'_, '_> {
    /// Rounds until every thread has returned, or a failure.
    fn run(&mut self, block: &BlockCtx<'_>) -> Result<(), Failure> {
        loop {
            self.run_runnable()?;
            if self.live == 0 {
                return self.check_uninitialised(block);
            }
            let (progressed, stuck_warp) = self.exchange_warps();
            let woke = self.wake_mbarrier_waiters(block)?;
            if progressed || woke || self.state.contains(&State::Runnable) {
                continue;
            }
            if stuck_warp.is_none() && self.state.iter().all(|&s| s == State::AtBarrier) {
                self.check_barrier_sites()?;
                self.check_uninitialised(block)?;
                block.copies.borrow_mut().barrier_passed();
                block.epoch.set(block.epoch.get() + 1);
                self.state.fill(State::Runnable);
                self.progressed(block);
                continue;
            }
            return Err(self.deadlock(stuck_warp, block));
        }
    }

    /// Threads waiting for an mbarrier phase that is now complete can run again.
    fn wake_mbarrier_waiters(&mut self, block: &BlockCtx<'_>) -> Result<bool, Failure> {
        let mut woke = false;
        for i in 0..self.state.len() {
            if self.state[i] != State::AtMBarrier {
                continue;
            }
            let (addr, parity) = (self.threads[i].mbarrier_wait.get())
                .expect("a thread waiting on an mbarrier recorded which");
            let ready = block.copies.borrow_mut().ready(addr, parity);
            match ready {
                Ok(true) => {
                    self.state[i] = State::Runnable;
                    woke = true;
                }
                Ok(false) => {}
                Err(r) => return Err(Failure::Error(Box::new(self.async_error(i as u32, r)))),
            }
        }
        if woke {
            self.progressed(block);
        }
        Ok(woke)
    }

    /// Something happened in the block (a thread returned, a barrier or a warp operation
    /// passed): the watchdog of a spinning thread starts over.
    fn progressed(&self, block: &BlockCtx<'_>) {
        block.events.set(block.events.get() + 1);
    }

    /// A barrier interval ended: a read of shared memory that no thread wrote in it (or
    /// before) read garbage on a GPU.
    fn check_uninitialised(&self, block: &BlockCtx<'_>) -> Result<(), Failure> {
        match block.shared.borrow_mut().uninitialised_read() {
            None => Ok(()),
            Some(r) => Err(Failure::Error(Box::new(EmuError::UninitializedRead {
                kernel: self.launch.kernel,
                block: self.block_idx,
                site: r.site,
                index: r.index,
                thread: coords(r.reader, self.launch.block_dim),
            }))),
        }
    }

    /// Every thread waits at a barrier: the same `sync_threads` call, or a divergence.
    fn check_barrier_sites(&self) -> Result<(), Failure> {
        let mut sites: Vec<(String, Vec<u32>)> = Vec::new();
        for (i, t) in self.threads.iter().enumerate() {
            let site = t
                .barrier_site
                .get()
                .map_or("?".to_string(), |l| l.to_string());
            match sites.iter_mut().find(|(s, _)| *s == site) {
                Some((_, ts)) => ts.push(i as u32),
                None => sites.push((site, vec![i as u32])),
            }
        }
        if sites.len() < 2 {
            return Ok(());
        }
        let sites = (sites.into_iter())
            .map(|(s, ts)| format!("{} at {s}", ThreadSet(ts)))
            .collect::<Vec<_>>()
            .join("; ");
        Err(Failure::Error(Box::new(EmuError::BarrierDivergence {
            kernel: self.launch.kernel,
            block: self.block_idx,
            sites,
        })))
    }

    /// Runs every runnable thread until it suspends or returns.
    fn run_runnable(&mut self) -> Result<(), Failure> {
        for i in 0..self.state.len() {
            if self.state[i] != State::Runnable {
                continue;
            }
            let co = self.cos[i]
                .as_mut()
                .expect("a runnable thread has its coroutine");
            set_current(Some(&self.threads[i]));
            set_stack_limit(self.limits[i]);
            self.slot.thread.store(i as u32, Ordering::Relaxed);
            let r = catch_unwind(AssertUnwindSafe(|| co.resume(())));
            set_stack_limit(0);
            set_current(None);
            match r {
                Ok(CoroutineResult::Return(())) => {
                    self.state[i] = State::Exited;
                    self.live -= 1;
                    self.progressed(self.threads[i].block);
                    if let Some(co) = self.cos[i].take() {
                        self.pool.give(co.into_stack());
                    }
                }
                Ok(CoroutineResult::Yield(Suspend::Barrier)) => self.state[i] = State::AtBarrier,
                Ok(CoroutineResult::Yield(Suspend::Warp)) => self.state[i] = State::AtWarp,
                Ok(CoroutineResult::Yield(Suspend::Sleep)) => {}
                Ok(CoroutineResult::Yield(Suspend::MBarrier)) => self.state[i] = State::AtMBarrier,
                Err(payload) => {
                    self.cos[i] = None; // finished by unwinding
                    return Err(self.failure(i as u32, payload));
                }
            }
        }
        Ok(())
    }

    /// What thread `i`'s unwinding means: a report of one of the checks, or a panic.
    fn failure(&self, i: u32, payload: Box<dyn std::any::Any + Send>) -> Failure {
        let payload = match payload.downcast::<SharedReport>() {
            Ok(r) => return Failure::Error(Box::new(self.shared_error(i, *r))),
            Err(p) => p,
        };
        let payload = match payload.downcast::<AsyncReport>() {
            Ok(r) => return Failure::Error(Box::new(self.async_error(i, *r))),
            Err(p) => p,
        };
        let payload = match payload.downcast::<GlobalRaceReport>() {
            Ok(r) => return Failure::Error(Box::new(self.global_race(i, *r))),
            Err(p) => p,
        };
        match payload.downcast::<HangReport>() {
            Ok(r) => Failure::Error(Box::new(self.hang(i, r.seconds))),
            Err(p) => Failure::Panic(format!(
                "kernel `{}` panicked in block {:?}, thread {:?}: {}",
                self.launch.kernel,
                self.block_idx,
                coords(i, self.launch.block_dim),
                panic_message(&*p)
            )),
        }
    }

    fn shared_error(&self, i: u32, r: SharedReport) -> EmuError {
        let (dim, t) = (self.launch.block_dim, coords(i, self.launch.block_dim));
        let (kernel, block) = (self.launch.kernel, self.block_idx);
        match r {
            SharedReport::Race(r) => EmuError::DataRace {
                kernel,
                block,
                site: r.site,
                index: r.index,
                kind: r.kind,
                thread: t,
                other: match r.other {
                    Some(o) => format!("thread {:?}", coords(o, dim)),
                    None => "several other threads".to_string(),
                },
            },
            SharedReport::Uninit(r) => EmuError::UninitializedRead {
                kernel,
                block,
                site: r.site,
                index: r.index,
                thread: coords(r.reader, dim),
            },
        }
    }

    fn async_error(&self, i: u32, r: AsyncReport) -> EmuError {
        EmuError::AsyncCopy {
            kernel: self.launch.kernel,
            block: self.block_idx,
            thread: coords(r.thread.unwrap_or(i), self.launch.block_dim),
            misuse: r.misuse,
            detail: r.detail,
        }
    }

    fn global_race(&self, i: u32, r: GlobalRaceReport) -> EmuError {
        let dim = self.launch.block_dim;
        EmuError::GlobalRace {
            kernel: self.launch.kernel,
            block: self.block_idx,
            place: r.place,
            op: r.op,
            address: r.address,
            thread: coords(i, dim),
            other: coords(r.other, dim),
        }
    }

    fn hang(&self, i: u32, seconds: f64) -> EmuError {
        let n = self.state.len() as u32;
        let running = (0..n)
            .filter(|&k| k == i || self.state[k as usize] == State::Runnable)
            .collect();
        EmuError::Hang {
            kernel: self.launch.kernel,
            block: self.block_idx,
            seconds,
            running: ThreadSet(running),
        }
    }

    /// Warps whose every existing lane waits at a warp operation exchange values; returns
    /// whether any did, and the first warp that cannot go on (and why).
    fn exchange_warps(&mut self) -> (bool, Option<String>) {
        let n = self.state.len();
        let (mut progressed, mut stuck) = (false, None);
        for w in 0..n.div_ceil(32) {
            let lanes = w * 32..(w * 32 + 32).min(n);
            let waiting: Vec<usize> = (lanes.clone())
                .filter(|&i| self.state[i] == State::AtWarp)
                .collect();
            if waiting.is_empty() {
                continue;
            }
            match self.exchange(w, lanes, &waiting) {
                Ok(()) => {
                    progressed = true;
                    self.progressed(self.threads[w * 32].block);
                }
                Err(why) => {
                    stuck.get_or_insert(why);
                }
            }
        }
        (progressed, stuck)
    }

    /// Warp `w`'s exchange, when it can happen: `activemask` for the lanes at it, or the
    /// operation all lanes wait at.
    fn exchange(
        &mut self,
        w: usize,
        lanes: std::ops::Range<usize>,
        waiting: &[usize],
    ) -> Result<(), String> {
        let threads = self.threads;
        // `activemask`: the lanes at it now, once none of the warp can run further.
        let at_mask: Vec<usize> = (waiting.iter().copied())
            .filter(|&i| threads[i].warp_op.get() == Some(WarpOp::ActiveMask))
            .collect();
        if !at_mask.is_empty() {
            let mask = at_mask.iter().fold(0u32, |m, &i| m | 1 << (i % 32));
            for &i in &at_mask {
                self.resume_lane(i, mask);
            }
            return Ok(());
        }
        if waiting.len() < lanes.len() {
            let op = (threads[waiting[0]].warp_op.get()).map_or("a warp operation", |o| o.name());
            return Err(format!(
                "warp {w}: some lanes wait at {op} (full mask) while others exited or wait at \
                 sync_threads"
            ));
        }
        let ops: Vec<_> = (lanes.clone())
            .map(|i| (threads[i].warp_op.get()).expect("a lane at a warp operation deposited it"))
            .collect();
        let results = warp::resolve(&ops).map_err(|what| format!("warp {w}: {what}"))?;
        if ops[0] == WarpOp::Sync {
            // The lanes' shared-memory accesses before this barrier are ordered before
            // those after it (for the race detector).
            let block = threads[lanes.start].block;
            block.warp_syncs.borrow_mut()[w] += 1;
        }
        for (i, r) in lanes.zip(results) {
            self.resume_lane(i, r);
        }
        Ok(())
    }

    fn resume_lane(&mut self, i: usize, result: u32) {
        self.threads[i].warp_result.set(result);
        self.threads[i].warp_op.set(None);
        self.state[i] = State::Runnable;
    }

    /// Nothing can run: who waits where.
    fn deadlock(&self, stuck_warp: Option<String>, block: &BlockCtx<'_>) -> Failure {
        let set = |want: State| {
            let n = self.state.len() as u32;
            ThreadSet((0..n).filter(|&i| self.state[i as usize] == want).collect())
        };
        let at_mbarrier = set(State::AtMBarrier);
        let waits: Vec<(u32, usize, u32)> = (at_mbarrier.0.iter())
            .filter_map(|&i| {
                let w = self.threads[i as usize].mbarrier_wait.get()?;
                Some((i, w.0, w.1))
            })
            .collect();
        let stuck_barrier = match block.copies.borrow().stuck(&waits) {
            Ok(what) => what,
            Err(r) => {
                let i = r.thread.unwrap_or(waits[0].0);
                return Failure::Error(Box::new(self.async_error(i, r)));
            }
        };
        let what = stuck_warp.unwrap_or_else(|| {
            if !waits.is_empty() {
                stuck_barrier
            } else {
                "some threads wait at sync_threads, which every thread of the block must reach, \
                 but the others exited"
                    .to_string()
            }
        });
        Failure::Error(Box::new(EmuError::Deadlock {
            kernel: self.launch.kernel,
            block: self.block_idx,
            what,
            at_barrier: set(State::AtBarrier),
            at_warp: set(State::AtWarp),
            at_mbarrier,
            exited: set(State::Exited),
        }))
    }
}
