//! Runs one block: every thread is a coroutine on this host thread, resumed in rounds until
//! each has returned. A round runs every runnable thread until it returns or suspends; then
//! warps whose lanes all wait at a warp operation exchange their values, and a block whose
//! live threads all wait at `sync_threads` passes the barrier. Anything else is a deadlock.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::error::{EmuError, ThreadSet};
use crate::shared::{RaceReport, SharedMemory};
use crate::thread::{set_current, BlockCtx, LaunchCtx, Suspend, ThreadCtx};
use crate::trace::PrefetchRecord;
use crate::warp::{self, WarpOp};

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

/// Runs block `block_idx` of `launch`; returns its prefetch records.
pub(crate) fn run_block(
    launch: &LaunchCtx,
    block_idx: [u32; 3],
    entry: &(dyn Fn() + Sync),
    pool: &mut StackPool,
) -> Result<Vec<PrefetchRecord>, Failure> {
    let dim = launch.block_dim;
    let n = dim[0] * dim[1] * dim[2];
    let warps = n.div_ceil(32);
    let block = BlockCtx {
        launch,
        block_idx,
        epoch: Cell::new(1),
        shared: RefCell::new(SharedMemory::default()),
        trace: RefCell::new(Vec::new()),
    };
    let threads: Vec<ThreadCtx<'_>> = (0..n)
        .map(|linear| ThreadCtx {
            block: &block,
            thread_idx: coords(linear, dim),
            linear,
            yielder: Cell::new(std::ptr::null()),
            warp_op: Cell::new(None),
            warp_result: Cell::new(0),
            iteration: Cell::new(None),
        })
        .collect();

    let mut cos: Vec<Option<Thread>> = threads
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
            // SAFETY: the closure borrows `threads` and `entry`, both alive until every
            // coroutine has returned or been dropped, which happens before we return.
            Some(unsafe { Coroutine::with_stack_unchecked(pool.take(), body) })
        })
        .collect();

    let mut state = vec![State::Runnable; n as usize];
    let mut live = n;
    let result = loop {
        // Run everything runnable until it suspends or returns.
        let mut failure = None;
        for i in 0..n as usize {
            if state[i] != State::Runnable {
                continue;
            }
            let co = cos[i]
                .as_mut()
                .expect("a runnable thread has its coroutine");
            set_current(Some(&threads[i]));
            let r = catch_unwind(AssertUnwindSafe(|| co.resume(())));
            set_current(None);
            match r {
                Ok(CoroutineResult::Return(())) => {
                    state[i] = State::Exited;
                    live -= 1;
                    if let Some(co) = cos[i].take() {
                        pool.give(co.into_stack());
                    }
                }
                Ok(CoroutineResult::Yield(Suspend::Barrier)) => state[i] = State::AtBarrier,
                Ok(CoroutineResult::Yield(Suspend::Warp)) => state[i] = State::AtWarp,
                Ok(CoroutineResult::Yield(Suspend::Sleep)) => {}
                Err(payload) => {
                    cos[i] = None; // finished by unwinding
                    let t = coords(i as u32, dim);
                    failure = Some(match payload.downcast::<RaceReport>() {
                        Ok(r) => Failure::Error(Box::new(EmuError::DataRace {
                            kernel: launch.kernel,
                            block: block_idx,
                            site: r.site,
                            index: r.index,
                            kind: r.kind,
                            thread: t,
                            other: match r.other {
                                Some(o) => format!("thread {:?}", coords(o, dim)),
                                None => "several other threads".to_string(),
                            },
                        })),
                        Err(p) => Failure::Panic(format!(
                            "kernel `{}` panicked in block {:?}, thread {:?}: {}",
                            launch.kernel,
                            block_idx,
                            t,
                            panic_message(&*p)
                        )),
                    });
                    break;
                }
            }
        }
        if let Some(f) = failure {
            break Err(f);
        }
        if live == 0 {
            break Ok(());
        }

        // Warps whose every existing lane waits at a warp operation exchange values.
        let mut progressed = false;
        let mut stuck_warp = None;
        for w in 0..warps as usize {
            let lanes = w * 32..(w * 32 + 32).min(n as usize);
            let waiting: Vec<usize> = lanes
                .clone()
                .filter(|&i| state[i] == State::AtWarp)
                .collect();
            if waiting.is_empty() {
                continue;
            }
            // `activemask`: the lanes at it now, once none of the warp can run further.
            let at_mask: Vec<usize> = waiting
                .iter()
                .copied()
                .filter(|&i| threads[i].warp_op.get() == Some(WarpOp::ActiveMask))
                .collect();
            if !at_mask.is_empty() {
                let mask = at_mask.iter().fold(0u32, |m, &i| m | 1 << (i % 32));
                for &i in &at_mask {
                    threads[i].warp_result.set(mask);
                    threads[i].warp_op.set(None);
                    state[i] = State::Runnable;
                }
                progressed = true;
                continue;
            }
            if waiting.len() == lanes.len() {
                let ops: Vec<_> = lanes
                    .clone()
                    .map(|i| {
                        threads[i]
                            .warp_op
                            .get()
                            .expect("a lane at a warp operation deposited it")
                    })
                    .collect();
                match warp::resolve(&ops) {
                    Ok(results) => {
                        for (i, r) in lanes.zip(results) {
                            threads[i].warp_result.set(r);
                            threads[i].warp_op.set(None);
                            state[i] = State::Runnable;
                        }
                        progressed = true;
                    }
                    Err(what) => {
                        stuck_warp.get_or_insert(format!("warp {w}: {what}"));
                    }
                }
            } else {
                let op = threads[waiting[0]]
                    .warp_op
                    .get()
                    .map_or("a warp operation", |o| o.name());
                stuck_warp.get_or_insert(format!(
                    "warp {w}: some lanes wait at {op} (full mask) while others exited or wait at sync_threads"
                ));
            }
        }
        if progressed || state.contains(&State::Runnable) {
            continue;
        }
        if stuck_warp.is_none() && state.iter().all(|&s| s == State::AtBarrier) {
            block.epoch.set(block.epoch.get() + 1);
            state.fill(State::Runnable);
            continue;
        }
        let set = |want: State| ThreadSet((0..n).filter(|&i| state[i as usize] == want).collect());
        let what = stuck_warp.unwrap_or_else(|| {
            "some threads wait at sync_threads, which every thread of the block must reach, but the others exited".to_string()
        });
        break Err(Failure::Error(Box::new(EmuError::Deadlock {
            kernel: launch.kernel,
            block: block_idx,
            what,
            at_barrier: set(State::AtBarrier),
            at_warp: set(State::AtWarp),
            exited: set(State::Exited),
        })));
    };
    // Suspended coroutines (after a failure) are unwound here, while `threads` is alive.
    drop(cos);
    result.map(|()| block.trace.take())
}
