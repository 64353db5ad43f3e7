//! Asynchronous copies into shared memory and the mbarriers they complete on, per block.
//!
//! A copy (`cp.async`, or `cp.async.bulk` completing on an mbarrier) is in flight from its
//! issue until the thread reading its destination may see it: for `cp.async`, until the
//! issuing thread's `cp.async.wait_group` covers it (other threads then need a barrier, which
//! the shared-memory race detector checks); for a bulk copy, until the mbarrier phase it
//! completes on is over and the reading thread has waited for that phase (or passed a block
//! barrier after a thread that did). Its bytes land in shared memory at its wait, or at a
//! random point between issue and wait ([`Landing::Early`]). Reading or writing a
//! destination in flight, and an mbarrier phase whose announced bytes (`expect_tx`) differ
//! from the bytes delivered, are reports ([`AsyncReport`]).

use std::collections::{BTreeMap, HashMap};

pub mod hooks;

use crate::error::AsyncMisuse;

/// When the bytes of an asynchronous copy land in shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Landing {
    /// At the wait that makes them visible (the default: reproducible).
    #[default]
    AtWait,
    /// At a random point between the issue and that wait, drawn from `seed` (and the
    /// block's index): a kernel whose result depends on when copies land is wrong on a GPU.
    Early {
        /// Seed of the draws.
        seed: u64,
    },
}

/// A misuse found by [`AsyncCopies`], raised as the kernel thread's unwind payload and
/// turned into [`crate::EmuError::AsyncCopy`] by the scheduler.
#[derive(Debug, Clone)]
pub(crate) struct AsyncReport {
    pub misuse: AsyncMisuse,
    pub detail: String,
    /// The thread to name, when it is not the one unwinding (linear index).
    pub thread: Option<u32>,
}

/// What a copy completes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Completion {
    /// `cp.async` of thread `issuer`, in its commit group `group` (groups count from 0).
    Group { group: u64 },
    /// A bulk copy completing on the mbarrier at this address.
    Barrier { barrier: usize },
}

#[derive(Debug, Clone)]
struct Copy {
    issuer: u32,
    dst: usize,
    src: usize,
    bytes: usize,
    /// Bytes read from `src`; the rest of `bytes` is zero-filled.
    src_bytes: usize,
    completion: Completion,
    landed: bool,
    /// For a bulk copy: the mbarrier phase (count of completed phases) it completed in.
    completed_phase: Option<u64>,
}

/// One mbarrier: its arrival count, the current phase's pending arrivals and transaction
/// bytes, and how many phases completed.
#[derive(Debug, Clone)]
struct Barrier {
    count: u32,
    pending: u32,
    /// Bytes announced minus bytes delivered in the current phase.
    tx: i64,
    announced: i64,
    delivered: i64,
    /// Completed phases: the current phase's parity is `phase & 1`.
    phase: u64,
    /// The thread that last announced bytes (`expect_tx`), for reports.
    announcer: Option<u32>,
}

/// The asynchronous copies and mbarriers of one block.
#[derive(Default)]
pub(crate) struct AsyncCopies {
    landing: Landing,
    rng: u64,
    copies: HashMap<u64, Copy>,
    /// Destinations not yet visible to every thread, by start address: `(end, copy)`.
    regions: BTreeMap<usize, (usize, u64)>,
    next_id: u64,
    /// Per thread: commit groups closed so far (the open group's number).
    committed: Vec<u64>,
    barriers: HashMap<usize, Barrier>,
    /// Per (thread, mbarrier): the completed phases the thread has waited for.
    observed: HashMap<(u32, usize), u64>,
    /// Destinations of bulk copies whose phase completed, not yet given to the race
    /// detector ([`AsyncCopies::take_completed`]).
    completed: Vec<(usize, usize)>,
}

fn report(misuse: AsyncMisuse, detail: String) -> AsyncReport {
    AsyncReport {
        misuse,
        detail,
        thread: None,
    }
}

impl AsyncCopies {
    pub fn new(threads: u32, landing: Landing, block_serial: u64) -> Self {
        let seed = match landing {
            Landing::AtWait => 0,
            Landing::Early { seed } => seed ^ block_serial.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        };
        AsyncCopies {
            landing,
            rng: seed,
            committed: vec![0; threads as usize],
            ..Default::default()
        }
    }

    /// Whether nothing is in flight or awaiting its readers (the common case: one check on
    /// every shared-memory access).
    pub fn is_quiet(&self) -> bool {
        self.regions.is_empty()
    }

    /// A `cp.async` (or, with `barrier`, a bulk copy) of `bytes` bytes from `src` to `dst`
    /// by thread `me`, of which `src_bytes` are read and the rest zero-filled.
    pub fn issue(
        &mut self,
        me: u32,
        dst: usize,
        src: usize,
        bytes: usize,
        src_bytes: usize,
        barrier: Option<usize>,
    ) -> Result<(), AsyncReport> {
        if let Some((_, other)) = self.overlapping(dst, dst + bytes) {
            let o = &self.copies[&other];
            return Err(report(
                AsyncMisuse::WriteInFlight,
                format!(
                    "a copy of {bytes} bytes to {dst:#x} overlaps the copy of {} bytes to {:#x} that thread {} issued, which is in flight or not yet visible to every thread; wait for it, and sync_threads() after the threads that read it, before refilling its buffer",
                    o.bytes, o.dst, o.issuer
                ),
            ));
        }
        let completion = match barrier {
            Some(b) => {
                self.barrier(b, "cp.async.bulk")?;
                Completion::Barrier { barrier: b }
            }
            None => Completion::Group {
                group: self.committed[me as usize],
            },
        };
        let id = self.next_id;
        self.next_id += 1;
        self.copies.insert(
            id,
            Copy {
                issuer: me,
                dst,
                src,
                bytes,
                src_bytes,
                completion,
                landed: false,
                completed_phase: None,
            },
        );
        self.regions.insert(dst, (dst + bytes, id));
        self.maybe_land_early()
    }

    /// `cp.async.commit_group` of thread `me`.
    pub fn commit(&mut self, me: u32) {
        self.committed[me as usize] += 1;
    }

    /// `cp.async.wait_group pending` of thread `me` (`None`: `wait_all`, which also covers
    /// copies not yet committed): its copies in older groups land and become visible to it.
    /// Returns the regions now visible to the issuer alone, for the race detector.
    pub fn wait_group(&mut self, me: u32, pending: Option<u64>) -> Vec<(usize, usize)> {
        let committed = self.committed[me as usize];
        let done = |group: u64| match pending {
            None => true,
            Some(p) => group + p < committed,
        };
        let ids: Vec<u64> = (self.copies.iter())
            .filter(|(_, c)| {
                c.issuer == me && matches!(c.completion, Completion::Group { group } if done(group))
            })
            .map(|(id, _)| *id)
            .collect();
        let mut regions = Vec::with_capacity(ids.len());
        for id in ids {
            self.land(id);
            let c = self.copies.remove(&id).expect("a listed copy exists");
            self.regions.remove(&c.dst);
            regions.push((c.dst, c.bytes));
        }
        regions
    }

    /// A read or write of `[start, end)` of shared memory by thread `me`.
    pub fn access(
        &mut self,
        me: u32,
        start: usize,
        end: usize,
        write: bool,
    ) -> Result<(), AsyncReport> {
        let mut regions = self.regions.range(..end).rev();
        let c = loop {
            let Some((_, &(e, id))) = regions.next() else {
                return Ok(());
            };
            if e <= start {
                return Ok(()); // regions do not overlap: the earlier ones end before `start`
            }
            let c = &self.copies[&id];
            let waited = match (c.completion, c.completed_phase) {
                (Completion::Barrier { barrier }, Some(phase)) => {
                    self.observed.get(&(me, barrier)).copied().unwrap_or(0) > phase
                }
                _ => false,
            };
            if !waited {
                break c;
            }
        };
        let (misuse, what) = if write {
            (AsyncMisuse::WriteInFlight, "writes")
        } else {
            (AsyncMisuse::ReadBeforeWait, "reads")
        };
        let wait = match c.completion {
            Completion::Group { .. } if c.issuer == me => {
                "call cp.async.wait_group / wait_all (or the pipeline's wait) first".to_string()
            }
            Completion::Group { .. } => format!(
                "thread {} must wait for its copy (cp.async.wait_group) and the block sync_threads() before other threads touch it",
                c.issuer
            ),
            Completion::Barrier { barrier } => format!(
                "wait on the mbarrier at {barrier:#x} for the phase the copy completes on first"
            ),
        };
        Err(report(
            misuse,
            format!(
                "it {what} bytes {start:#x}..{end:#x} of shared memory, which the asynchronous copy of {} bytes to {:#x} issued by thread {} has not yet made visible to it; {wait}",
                c.bytes, c.dst, c.issuer
            ),
        ))
    }

    /// The first region overlapping `[start, end)`.
    fn overlapping(&self, start: usize, end: usize) -> Option<(usize, u64)> {
        let (&s, &(e, id)) = self.regions.range(..end).next_back()?;
        (e > start && s < end).then_some((s, id))
    }

    /// Writes copy `id`'s bytes into shared memory (once); a bulk copy then delivers its
    /// bytes to its mbarrier.
    fn land(&mut self, id: u64) {
        let c = self.copies.get_mut(&id).expect("the copy exists");
        if c.landed {
            return;
        }
        c.landed = true;
        // SAFETY: `dst` lies in the block's shared memory (checked at issue) and `src` in
        // memory the kernel reads, both for the launch's lifetime; they do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(c.src as *const u8, c.dst as *mut u8, c.src_bytes);
            std::ptr::write_bytes((c.dst + c.src_bytes) as *mut u8, 0, c.bytes - c.src_bytes);
        }
        if let Completion::Barrier { barrier } = c.completion {
            let bytes = c.bytes as i64;
            if let Some(b) = self.barriers.get_mut(&barrier) {
                b.tx -= bytes;
                b.delivered += bytes;
            }
        }
    }

    /// With [`Landing::Early`]: lands an in-flight copy chosen at random, half the time.
    fn maybe_land_early(&mut self) -> Result<(), AsyncReport> {
        if self.landing == Landing::AtWait || self.copies.is_empty() {
            return Ok(());
        }
        // SplitMix64: well mixed from the first draw, whatever the seed.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let draw = z ^ (z >> 31);
        if draw >> 63 == 0 {
            return Ok(());
        }
        let mut unlanded: Vec<u64> = (self.copies.iter())
            .filter(|(_, c)| !c.landed)
            .map(|(id, _)| *id)
            .collect();
        if unlanded.is_empty() {
            return Ok(());
        }
        unlanded.sort_unstable();
        let id = unlanded[(draw as u32) as usize % unlanded.len()];
        self.land(id);
        if let Completion::Barrier { barrier } = self.copies[&id].completion {
            self.try_complete(barrier)?;
        }
        Ok(())
    }

    fn barrier(&mut self, addr: usize, what: &str) -> Result<&mut Barrier, AsyncReport> {
        self.barriers.get_mut(&addr).ok_or_else(|| {
            report(
                AsyncMisuse::ByteCount,
                format!("{what} uses the mbarrier at {addr:#x}, which is not initialised (mbarrier.init), or was invalidated"),
            )
        })
    }

    /// `mbarrier.init` with `count` expected arrivals per phase.
    pub fn init(&mut self, addr: usize, count: u32) {
        self.barriers.insert(
            addr,
            Barrier {
                count,
                pending: count,
                tx: 0,
                announced: 0,
                delivered: 0,
                phase: 0,
                announcer: None,
            },
        );
    }

    /// `mbarrier.inval`.
    pub fn inval(&mut self, addr: usize) {
        self.barriers.remove(&addr);
    }

    /// `mbarrier.expect_tx` (and, with `arrive`, `mbarrier.arrive.expect_tx`; `bytes` may
    /// be 0 for a plain arrive) by thread `me`; returns the phase arrived on.
    pub fn arrive(
        &mut self,
        me: u32,
        addr: usize,
        bytes: u32,
        arrive: bool,
    ) -> Result<u64, AsyncReport> {
        let b = self.barrier(addr, "mbarrier.arrive")?;
        if bytes > 0 {
            b.tx += bytes as i64;
            b.announced += bytes as i64;
            b.announcer = Some(me);
        }
        let phase = b.phase;
        if arrive {
            if b.pending == 0 {
                return Err(report(
                    AsyncMisuse::ByteCount,
                    format!("an arrive on the mbarrier at {addr:#x} beyond its count of {} for this phase", b.count),
                ));
            }
            b.pending -= 1;
        }
        self.try_complete(addr)?;
        self.maybe_land_early()?;
        Ok(phase)
    }

    /// Completes the barrier's phase when every arrival is in and every announced byte
    /// delivered; more bytes delivered than announced is a report.
    fn try_complete(&mut self, addr: usize) -> Result<(), AsyncReport> {
        let Some(b) = self.barriers.get_mut(&addr) else {
            return Ok(());
        };
        if b.pending > 0 {
            return Ok(());
        }
        if b.tx < 0 {
            let thread = b.announcer;
            return Err(AsyncReport {
                thread,
                ..report(AsyncMisuse::ByteCount, byte_count(addr, b))
            });
        }
        if b.tx > 0 {
            return Ok(());
        }
        let phase = b.phase;
        b.phase += 1;
        b.pending = b.count;
        (b.announced, b.delivered) = (0, 0);
        for c in self.copies.values_mut() {
            let mine = c.completion == (Completion::Barrier { barrier: addr });
            if mine && c.landed && c.completed_phase.is_none() {
                c.completed_phase = Some(phase);
                self.completed.push((c.dst, c.bytes));
            }
        }
        Ok(())
    }

    /// Whether the phase of parity `parity` of the mbarrier at `addr` is complete, after
    /// landing the copies that complete on it (the wait is where they land).
    pub fn ready(&mut self, addr: usize, parity: u32) -> Result<bool, AsyncReport> {
        self.barrier(addr, "mbarrier.try_wait")?;
        let ids: Vec<u64> = (self.copies.iter())
            .filter(|(_, c)| c.completion == Completion::Barrier { barrier: addr } && !c.landed)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.land(id);
        }
        self.try_complete(addr)?;
        Ok((self.barriers[&addr].phase & 1) as u32 != (parity & 1))
    }

    /// `mbarrier.try_wait.parity` by thread `me`: [`AsyncCopies::ready`], and a complete
    /// phase counts as waited for by `me`.
    pub fn poll(&mut self, me: u32, addr: usize, parity: u32) -> Result<bool, AsyncReport> {
        let done = self.ready(addr, parity)?;
        if done {
            let phase = self.barriers[&addr].phase;
            let seen = self.observed.entry((me, addr)).or_insert(0);
            *seen = (*seen).max(phase);
        }
        Ok(done)
    }

    /// Every thread of the block passed `sync_threads`: bulk copies some thread waited for
    /// are visible to all.
    pub fn barrier_passed(&mut self) {
        let observed = &self.observed;
        let copies = &mut self.copies;
        self.regions.retain(|_, (_, id)| {
            let c = &copies[id];
            let seen = match (c.completion, c.completed_phase) {
                (Completion::Barrier { barrier }, Some(phase)) => {
                    (observed.iter()).any(|(&(_, b), &seen)| b == barrier && seen > phase)
                }
                _ => false,
            };
            if seen {
                copies.remove(id);
            }
            !seen
        });
    }

    /// The destinations of bulk copies whose phase completed since the last call: they
    /// are initialised shared memory (for the race detector).
    pub fn take_completed(&mut self) -> Vec<(usize, usize)> {
        std::mem::take(&mut self.completed)
    }

    /// For a deadlocked block: the waits on mbarriers that cannot complete, in words, and a
    /// byte-count report when a phase has every arrival but waits for bytes no copy brings.
    pub fn stuck(&self, waits: &[(u32, usize, u32)]) -> Result<String, AsyncReport> {
        let mut what = Vec::new();
        for &(thread, addr, parity) in waits {
            let Some(b) = self.barriers.get(&addr) else {
                what.push(format!(
                    "thread {thread} waits on {addr:#x}, which is no initialised mbarrier"
                ));
                continue;
            };
            if b.pending == 0 && b.tx > 0 {
                return Err(AsyncReport {
                    thread: b.announcer.or(Some(thread)),
                    ..report(AsyncMisuse::ByteCount, byte_count(addr, b))
                });
            }
            let line = format!(
                "threads wait on the mbarrier at {addr:#x} for its phase of parity {parity}, which still expects {} of its {} arrivals (a missing arrive: every arrival counted at mbarrier.init must arrive once per phase)",
                b.pending, b.count
            );
            if !what.contains(&line) {
                what.push(line);
            }
        }
        Ok(what.join("; "))
    }
}

fn byte_count(addr: usize, b: &Barrier) -> String {
    format!(
        "expect_tx announced {} bytes for phase {} of the mbarrier at {addr:#x}, but the copies completing on it delivered {}; announce exactly the bytes copied (the sum of the bulk copies' sizes)",
        b.announced, b.phase, b.delivered
    )
}
