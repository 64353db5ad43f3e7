//! `#[prefetch_next(level = auto)]`: choosing a kernel's prefetch level and distance by
//! measuring its candidates on the GPU it runs on.
//!
//! A `#[kernel]` with `level = auto` loops is compiled once per candidate level: the PTX
//! entry `NAME` runs those loops without prefetching, `NAME__l2`, `NAME__l2_evict_last`,
//! `NAME__bulk` (the levels the loops allow) prefetch at that level. Every entry takes the
//! prefetch distance of its `distance = auto` loops as a trailing parameter, so distances
//! cost no entries. The candidates ([`Variant`]: level and distance) are listed by the macro
//! in the kernel's `CANDIDATES`. A kernel with `stages = auto` / `copy = auto` pipelined
//! loops is compiled once per candidate pipeline instead (`NAME__cp_async_s3`, ...,
//! [`Variant::pipelined`]), its plain entry staging with loads and stores; it is tuned the
//! same way.
//!
//! The typed `launch` asks [`plan`] which candidate to launch. Per (device, kernel, launch
//! shape, data size) the first launches take turns over the candidates ([`Selector`]), each timed by a
//! pair of CUDA events the launch records on its stream, after a memset that flushes the L2
//! ([`AutoConfig::flush_l2`]), so each candidate is timed from a cold cache whatever ran
//! before it. No synchronisation is added: the elapsed times are read later, once the events
//! have completed. Once every candidate has [`AutoConfig::samples`] timings, those slower
//! than the leader by more than [`AutoConfig::eliminate`] leave the race; the survivors take
//! turns until one is left or each has [`AutoConfig::max_samples`], and the lowest median
//! wins (a hinted candidate must beat the plain entry by [`AutoConfig::margin`]). Every
//! launch is a real launch of the caller's arguments: nothing is re-run, so kernels with
//! atomics or in-place updates stay correct.
//!
//! Decisions are persisted in a cache file ([`super::decisions`]): a later process launching
//! the same kernel from the same PTX, in the same shape, on the same device and driver,
//! makes no tuning launches. `LOOKAHEAD_AUTOTUNE` turns tuning off or forces a candidate,
//! `LOOKAHEAD_AUTOTUNE_PRINT=1` prints each decision, and [`AutoTuner::status`] reports
//! what was tried, the medians and the choice.
//!
//! On the CPU emulator nothing is measured: the first launches of a kernel run each
//! candidate once (hinted ones first, the plain entry last), so every body is exercised on
//! real arguments, and later launches run the first hinted candidate.

mod key;
mod selector;
mod variant;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use cudarc::driver::{CudaEvent, CudaStream};

pub use key::{key, shape_bucket, size_bucket, TuneKey};
pub use selector::{AutoConfig, CandidateReport, Selector};
pub use variant::{entry_for, CopyKind, Level, Pipeline, Variant};

use super::decisions::{self, Decision, DecisionStore, Mode, Origin};
use crate::launch::{LaunchConfig, LaunchOn};

/// What one launch of a `level = auto` kernel does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan<'t> {
    /// The candidate to launch.
    pub variant: Variant,
    /// When the launch is to be timed for the tuning of this kernel: its key.
    pub measure: Option<TuneKey>,
    /// Whether to flush the L2 before the timed launch.
    pub flush_l2: bool,
    /// The tuner that planned a timed launch: the timing goes to it.
    tuner: Option<Planner<'t>>,
}

impl Plan<'_> {
    /// Launch `variant`, untimed (an explicit `launch_variant`, a kernel without
    /// `level = auto` loops, or the emulator).
    pub fn fixed(variant: Variant) -> Self {
        Plan {
            variant,
            measure: None,
            flush_l2: false,
            tuner: None,
        }
    }
}

impl<'t> Plan<'t> {
    /// What the launch measures, when the plan asks for a timed launch.
    pub(crate) fn measured(&self) -> Option<Measure<'t>> {
        Some(Measure {
            tuner: self.tuner?.0,
            key: self.measure?,
            variant: self.variant,
            flush_l2: self.flush_l2,
        })
    }
}

/// A tuner, compared by address (a [`Plan`]'s tuner is the one that made it).
#[derive(Clone, Copy)]
struct Planner<'t>(&'t AutoTuner);

impl PartialEq for Planner<'_> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Planner<'_> {}

impl std::fmt::Debug for Planner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AutoTuner@{:p}", self.0)
    }
}

/// The timed launch a [`Plan`] asks for: the candidate, the tuning it is for and the tuner
/// its events go to ([`AutoTuner::launched`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measure<'t> {
    pub(crate) tuner: &'t AutoTuner,
    pub(crate) key: TuneKey,
    pub(crate) variant: Variant,
    pub(crate) flush_l2: bool,
}

/// A timed launch whose events have not been read yet.
struct Pending {
    variant: Variant,
    start: CudaEvent,
    end: CudaEvent,
}

struct Tuning {
    selector: Selector,
    pending: Vec<Pending>,
    /// Where the choice came from, once there is one.
    origin: Option<Origin>,
    /// The decision read from the cache file, when the choice came from there.
    cached: Option<Decision>,
    /// When the first launch asked for a plan.
    started: std::time::Instant,
    /// How long after that the choice was made (zero for a cached or forced one).
    settled_after: Option<std::time::Duration>,
}

impl Tuning {
    /// Reads every pending pair of events that has completed, in any order, without waiting.
    fn poll(&mut self) {
        if self.selector.choice().is_some() {
            self.pending.clear();
            return;
        }
        let mut i = 0;
        while i < self.pending.len() {
            match self.pending[i].end.try_is_complete() {
                Ok(false) => i += 1,
                Ok(true) => {
                    let p = self.pending.swap_remove(i);
                    if let Ok(ms) = elapsed_ms(&p.start, &p.end) {
                        self.selector.record(p.variant, ms);
                    }
                }
                // A failed launch (the caller sees the error on its next synchronisation):
                // the sample is dropped.
                Err(_) => {
                    self.pending.swap_remove(i);
                }
            }
        }
        if self.selector.choice().is_some() {
            self.pending.clear();
        }
    }
}

/// The time between two completed events.
fn elapsed_ms(
    start: &CudaEvent,
    end: &CudaEvent,
) -> std::result::Result<f32, cudarc::driver::DriverError> {
    start.context().bind_to_thread()?;
    // SAFETY: both events belong to the context just made current, were recorded with
    // timing enabled, and the end one (so the start one too) has completed: no wait.
    unsafe { cudarc::driver::result::event::elapsed(start.cu_event(), end.cu_event()) }
}

/// The state of one kernel's tuning, for inspection ([`AutoTuner::status`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TuneStatus {
    /// What the tuning is for.
    pub key: TuneKey,
    /// The candidate chosen, once decided.
    pub choice: Option<Variant>,
    /// Every candidate: launches, timings, median, whether it was eliminated (none
    /// launched for a cached or forced decision).
    pub candidates: Vec<CandidateReport>,
    /// Tuning launches made, all candidates together (0 for a cached or forced decision).
    pub launches: usize,
    /// Where the choice came from (`None` while measuring).
    pub origin: Option<Origin>,
    /// The decision the cache file held, for a cached choice (its medians).
    pub cached: Option<Decision>,
    /// The tuning's cost in time: from its first launch until the choice was seen made
    /// (zero for a cached or forced decision, `None` while measuring).
    pub settled_after: Option<std::time::Duration>,
}

impl TuneStatus {
    /// The median of the chosen candidate and of the plain entry, in milliseconds, as
    /// measured here or as the cached decision recorded them.
    pub fn chosen_and_plain_ms(&self) -> (Option<f32>, Option<f32>) {
        if let Some(d) = &self.cached {
            let ok = |m: f32| Some(m).filter(|m| m.is_finite());
            return (ok(d.median_ms), ok(d.plain_ms));
        }
        let median = |v: Option<Variant>| {
            (self.candidates.iter())
                .find(|c| Some(c.variant) == v)
                .and_then(|c| c.median_ms)
        };
        (median(self.choice), median(Some(Variant::PLAIN)))
    }
}

/// The process's tunings, one [`Selector`] per (device, kernel, shape), shared by every
/// launch of `level = auto` kernels ([`AutoTuner::global`]).
pub struct AutoTuner {
    config: Mutex<AutoConfig>,
    tunings: Mutex<HashMap<TuneKey, Tuning>>,
    store: DecisionStore,
    mode: Mode,
    /// Kernels [`AutoTuner::forget`] sent back to measuring: their cached decisions are not
    /// used in this process (a new measurement replaces them).
    retune: Mutex<HashSet<String>>,
    /// Per (PTX table, kernel): launches made on the emulator.
    emulated: Mutex<HashMap<(usize, &'static str), usize>>,
}

impl std::fmt::Debug for AutoTuner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoTuner")
            .field("config", &self.config())
            .field("kernels", &self.status_all().len())
            .finish()
    }
}

impl Default for AutoTuner {
    fn default() -> Self {
        Self::new()
    }
}

impl AutoTuner {
    /// An empty tuner with the default [`AutoConfig`], keeping decisions in memory only
    /// (the launchers use [`AutoTuner::global`]; a separate one is for tests).
    pub fn new() -> Self {
        Self::with_store(DecisionStore::open(None), Mode::Tune)
    }

    /// A tuner that keeps its decisions in `store` and obeys `mode`.
    pub fn with_store(store: DecisionStore, mode: Mode) -> Self {
        AutoTuner {
            config: Mutex::new(AutoConfig::default()),
            tunings: Mutex::new(HashMap::new()),
            store,
            mode,
            retune: Mutex::new(HashSet::new()),
            emulated: Mutex::new(HashMap::new()),
        }
    }

    /// The tuner every `#[kernel]` launcher uses: decisions in the cache file of
    /// [`decisions::default_path`], mode from `LOOKAHEAD_AUTOTUNE`.
    pub fn global() -> &'static AutoTuner {
        static GLOBAL: OnceLock<AutoTuner> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            AutoTuner::with_store(
                DecisionStore::open(decisions::default_path()),
                Mode::from_env(),
            )
        })
    }

    /// The decisions this tuner keeps (and their file).
    pub fn decisions(&self) -> &DecisionStore {
        &self.store
    }

    /// A new tuning for `key` over `candidates`: forced by the mode, taken from the decision
    /// cache, or to be measured.
    fn start(&self, key: TuneKey, candidates: &[Variant]) -> Tuning {
        let config = self.config();
        let forced = match self.mode {
            Mode::Force(v) => Some(forced_variant(v, candidates)),
            Mode::Tune => None,
        };
        let cached = self
            .cached(&key)
            .filter(|d| candidates.iter().any(|c| c.level == d.variant.level));
        let (selector, origin) = match (forced, &cached) {
            (Some(v), _) => (
                Selector::decided(candidates, config, v),
                Some(Origin::Forced),
            ),
            (None, Some(d)) => (
                Selector::decided(candidates, config, d.variant),
                Some(Origin::Cached),
            ),
            (None, None) => (Selector::new(candidates, config), None),
        };
        let t = Tuning {
            selector,
            pending: Vec::new(),
            origin,
            cached: cached.filter(|_| origin == Some(Origin::Cached)),
            started: std::time::Instant::now(),
            settled_after: origin.map(|_| std::time::Duration::ZERO),
        };
        if origin.is_some() {
            announce(&status(key, &t));
        }
        t
    }

    fn cached(&self, key: &TuneKey) -> Option<Decision> {
        if lock(&self.retune).contains(key.kernel) {
            return None;
        }
        self.store.get(&key.persistent())
    }

    /// Reads `t`'s completed timings; a choice they complete is kept in the store and
    /// announced.
    fn settle(&self, key: TuneKey, t: &mut Tuning) {
        t.poll();
        if t.origin.is_some() {
            return;
        }
        if let Some(variant) = t.selector.choice() {
            t.origin = Some(Origin::Measured);
            t.settled_after = Some(t.started.elapsed());
            let ms = |v| t.selector.median_of(v).unwrap_or(f32::NAN);
            let decision = Decision {
                variant,
                median_ms: ms(variant),
                plain_ms: ms(Variant::PLAIN),
            };
            self.store.put(&key.persistent(), decision);
            announce(&status(key, t));
        }
    }

    /// Sets how kernels not yet tuned will decide (tunings already under way keep theirs).
    pub fn set_config(&self, config: AutoConfig) {
        *lock(&self.config) = config;
    }

    /// The configuration new tunings start with.
    pub fn config(&self) -> AutoConfig {
        *lock(&self.config)
    }

    /// Which candidate the next launch of `key` runs, and whether to time it. Reads the
    /// timings of earlier launches that have completed first.
    pub fn plan(&self, key: TuneKey, candidates: &[Variant]) -> Plan<'_> {
        let mut tunings = lock(&self.tunings);
        let t = tunings
            .entry(key)
            .or_insert_with(|| self.start(key, candidates));
        self.settle(key, t);
        match t.selector.choice() {
            Some(v) => Plan::fixed(v),
            None => Plan {
                variant: t.selector.next(),
                measure: Some(key),
                flush_l2: t.selector.config().flush_l2,
                tuner: Some(Planner(self)),
            },
        }
    }

    /// Counts a launch made from a plan with [`Plan::measure`], with the events recorded
    /// around it (`None`: launched untimed, still counted so the candidates take turns).
    pub fn launched(&self, key: TuneKey, variant: Variant, events: Option<(CudaEvent, CudaEvent)>) {
        let mut tunings = lock(&self.tunings);
        let Some(t) = tunings.get_mut(&key) else {
            return;
        };
        t.selector.launched(variant);
        if let (Some((start, end)), None) = (events, t.selector.choice()) {
            t.pending.push(Pending {
                variant,
                start,
                end,
            });
        }
    }

    /// Writes a buffer of twice the L2's size on `stream`, so the next kernel there starts
    /// from a cold L2: what a measured launch does before its timing starts. The buffer is
    /// made on first use per context, and released with the context.
    pub fn flush_l2(&self, stream: &CudaStream) -> crate::Result<()> {
        super::measured::flush_l2(stream)
    }

    /// The candidate an emulated launch of `kernel` runs: each once in turn (hinted ones
    /// first), then the first hinted one.
    pub fn emulated(&self, source: usize, kernel: &'static str, candidates: &[Variant]) -> Variant {
        let mut order: Vec<Variant> = candidates
            .iter()
            .copied()
            .filter(|v| !v.is_plain())
            .collect();
        order.extend(candidates.iter().copied().filter(|v| v.is_plain()));
        let mut counts = lock(&self.emulated);
        let n = counts.entry((source, kernel)).or_insert(0);
        let v = order.get(*n).or(order.first()).copied();
        *n += 1;
        v.unwrap_or(Variant::PLAIN)
    }

    /// The choice for `key`, once made (reads completed timings first, without waiting).
    pub fn choice(&self, key: TuneKey) -> Option<Variant> {
        self.status(key).and_then(|s| s.choice)
    }

    /// The tuning of `key`, if it has been launched (reads completed timings first).
    pub fn status(&self, key: TuneKey) -> Option<TuneStatus> {
        let mut tunings = lock(&self.tunings);
        let t = tunings.get_mut(&key)?;
        self.settle(key, t);
        Some(status(key, t))
    }

    /// Every tuning so far (reads completed timings first).
    pub fn status_all(&self) -> Vec<TuneStatus> {
        let mut tunings = lock(&self.tunings);
        tunings
            .iter_mut()
            .map(|(k, t)| {
                self.settle(*k, t);
                status(*k, t)
            })
            .collect()
    }

    /// Forgets every tuning of the kernel named `kernel` (all devices and shapes): its next
    /// launches measure again, in this process without its cached decisions, and the new
    /// decision replaces them in the cache.
    pub fn forget(&self, kernel: &str) {
        lock(&self.retune).insert(kernel.to_string());
        lock(&self.tunings).retain(|k, _| k.kernel != kernel);
        lock(&self.emulated).retain(|k, _| k.1 != kernel);
    }

    /// Forgets every tuning.
    pub fn reset(&self) {
        lock(&self.tunings).clear();
        lock(&self.emulated).clear();
    }
}

/// What `LOOKAHEAD_AUTOTUNE` forcing `v` means for a kernel with `candidates`: `v` when the
/// kernel has its entry (at the kernel's first distance when `v` names none), else plain.
fn forced_variant(v: Variant, candidates: &[Variant]) -> Variant {
    let Some(first) = candidates.iter().find(|c| c.same_entry(v)) else {
        return Variant::PLAIN;
    };
    match (v.distance, first.distance) {
        (0, _) | (_, 0) => *first,
        (distance, _) => Variant { distance, ..*first },
    }
}

fn status(key: TuneKey, t: &Tuning) -> TuneStatus {
    let measured = t.origin.is_none() || t.origin == Some(Origin::Measured);
    TuneStatus {
        key,
        choice: t.selector.choice(),
        candidates: t.selector.report(),
        launches: if measured { t.selector.launches() } else { 0 },
        origin: t.origin,
        cached: t.cached.clone(),
        settled_after: t.settled_after,
    }
}

/// Prints a decision when `LOOKAHEAD_AUTOTUNE_PRINT` asks for it.
fn announce(s: &TuneStatus) {
    if !decisions::print_decisions() {
        return;
    }
    let ms = |m: Option<f32>| m.map_or_else(|| "-".to_string(), |v| format!("{v:.4} ms"));
    let (chosen, plain) = s.chosen_and_plain_ms();
    let eliminated = s.candidates.iter().filter(|c| c.eliminated).count();
    eprintln!(
        "lookahead autotune: {} on device {} ({}x{} blocks): {} ({:?}; {} vs plain {}; {} candidates, {} eliminated early, {} tuning launches, settled after {:.1} ms)",
        s.key.kernel,
        s.key.device,
        s.key.shape.0,
        s.key.shape.1,
        s.choice.map_or_else(|| "-".to_string(), |v| v.name()),
        s.origin.unwrap_or(Origin::Measured),
        ms(chosen),
        ms(plain),
        s.candidates.len(),
        eliminated,
        s.launches,
        s.settled_after.unwrap_or_default().as_secs_f64() * 1e3
    );
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a `level = auto` kernel's launcher does next: `requested` when the caller named a
/// variant (`launch_variant`), each candidate in turn on the emulator, and otherwise what
/// the process's tuner ([`AutoTuner::global`]) plans for this launch shape and `elements`
/// (the kernel's slice parameters' elements together). A timed plan names that tuner: the
/// launch hands its timing events to it.
pub fn plan<On: LaunchOn + ?Sized>(
    on: &On,
    ptx: &'static [(u32, &'static str)],
    kernel: &'static str,
    candidates: &[Variant],
    requested: Option<Variant>,
    (cfg, elements): (&LaunchConfig, usize),
) -> Plan<'static> {
    match (requested, key(on, ptx, kernel, cfg, elements)) {
        (Some(v), _) => Plan::fixed(v),
        (None, None) => {
            Plan::fixed(AutoTuner::global().emulated(ptx.as_ptr() as usize, kernel, candidates))
        }
        (None, Some(k)) => AutoTuner::global().plan(k, candidates),
    }
}

/// The candidate a plain `launch` of `kernel` on `on` uses from now on: the tuner's choice
/// once made (`None` while it is still measuring, or before the first launch), and on the
/// emulator the first hinted candidate. With several launch shapes or sizes tuned, the choice of
/// the shape launched most.
pub fn choice<On: LaunchOn + ?Sized>(
    on: &On,
    ptx: &'static [(u32, &'static str)],
    kernel: &'static str,
    candidates: &[Variant],
) -> Option<Variant> {
    let Some(device) = on.tuning_device() else {
        return candidates.iter().copied().find(|v| !v.is_plain());
    };
    let source = ptx.as_ptr() as usize;
    AutoTuner::global()
        .status_all()
        .into_iter()
        .filter(|s| s.key.device == device && s.key.source == source && s.key.kernel == kernel)
        .max_by_key(|s| (s.launches, s.choice.is_some()))
        .and_then(|s| s.choice)
}

#[cfg(test)]
mod tests;
