//! `#[prefetch_next(level = auto)]`: choosing between a kernel's two entries by measuring
//! both on the GPU it runs on.
//!
//! A `#[kernel]` with a `level = auto` loop is compiled twice: the PTX entry `NAME` runs the
//! annotated loops without prefetching, `NAME__hinted` prefetches at `l2`. Its typed
//! `launch` asks [`plan`] which one to launch. Per (device, kernel), the first launches
//! alternate the two entries, each timed by a pair of CUDA events that the launch itself
//! records on its stream (no synchronisation is added to the launch path). The elapsed times
//! are read later, with `cuEventQuery`, once the events have completed. As soon as both
//! entries have [`AutoConfig::samples`] timings, the one with the lower median wins (the
//! hinted entry must beat the plain one by [`AutoConfig::margin`]) and every later launch
//! uses it. Launches made before the timings are read keep alternating. Every launch is a
//! real launch of the caller's arguments: nothing is ever re-run, so kernels with atomics
//! stay correct.
//!
//! Decisions are kept per launch shape (threads per block, blocks rounded up to a power of
//! two) and persisted in a cache file ([`super::decisions`]): a later process launching the
//! same kernel from the same PTX, in the same shape, on the same device and driver, makes no
//! tuning launches. `LOOKAHEAD_AUTOTUNE` turns tuning off or forces an entry, and
//! `LOOKAHEAD_AUTOTUNE_PRINT=1` prints each decision.
//!
//! The decision logic is [`Selector`], which can be fed timings by hand (tests, or a
//! benchmark timing a CUDA C++ twin); [`AutoTuner`] keeps one per (device, kernel) for the
//! whole process. On the CPU emulator nothing is measured: a plain `launch` runs the hinted
//! body, so the prefetch trace shows its prefetches.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use cudarc::driver::CudaEvent;

use super::decisions::{self, Decision, DecisionStore, Mode, Origin};
use crate::launch::{LaunchConfig, LaunchOn};

/// Which of a `level = auto` kernel's two entries a launch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The entry `NAME`: the `level = auto` loops do not prefetch.
    Plain,
    /// The entry `NAME__hinted`: the `level = auto` loops prefetch at `l2`.
    Hinted,
}

impl Variant {
    /// `plain` or `hinted`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Hinted => "hinted",
        }
    }

    /// The PTX entry of this variant: `plain` for [`Variant::Plain`], `hinted` otherwise.
    pub fn entry(self, plain: &'static str, hinted: &'static str) -> &'static str {
        match self {
            Variant::Plain => plain,
            Variant::Hinted => hinted,
        }
    }

    fn slot(self) -> usize {
        match self {
            Variant::Plain => 0,
            Variant::Hinted => 1,
        }
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How [`Selector`] decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoConfig {
    /// Timed launches of each entry before deciding (at least 1; default 5).
    pub samples: usize,
    /// The hinted entry is chosen only when its median is below the plain entry's by more
    /// than this fraction (default 0.01): a tie, or noise, keeps the plain entry, so the
    /// choice costs at most the measurement noise.
    pub margin: f64,
}

impl Default for AutoConfig {
    fn default() -> Self {
        AutoConfig {
            samples: 5,
            margin: 0.01,
        }
    }
}

/// The choice between the two entries of one kernel on one device, from timings it is fed.
///
/// ```
/// use lookahead::launch::autotune::{AutoConfig, Selector, Variant};
/// let mut s = Selector::new(AutoConfig { samples: 2, margin: 0.01 });
/// for ms in [1.0, 1.1] {
///     let v = s.next();
///     assert_eq!(v, Variant::Plain);
///     s.launched(v);
///     s.record(v, ms);
///     let v = s.next();
///     assert_eq!(v, Variant::Hinted);
///     s.launched(v);
///     s.record(v, ms * 0.8);
/// }
/// assert_eq!(s.choice(), Some(Variant::Hinted));
/// ```
#[derive(Debug, Clone)]
pub struct Selector {
    config: AutoConfig,
    launched: [usize; 2],
    times: [Vec<f32>; 2],
    choice: Option<Variant>,
}

impl Selector {
    /// A selector that has seen nothing.
    pub fn new(config: AutoConfig) -> Self {
        Selector {
            config: AutoConfig {
                samples: config.samples.max(1),
                ..config
            },
            launched: [0, 0],
            times: [Vec::new(), Vec::new()],
            choice: None,
        }
    }

    /// A selector whose choice is already `variant` (from the decision cache).
    pub fn decided(config: AutoConfig, variant: Variant) -> Self {
        Selector {
            choice: Some(variant),
            ..Selector::new(config)
        }
    }

    /// The entry the next launch should run: the choice once made; before that the entry
    /// launched fewer times so far (the plain one first), so the two alternate.
    pub fn next(&self) -> Variant {
        match self.choice {
            Some(v) => v,
            None if self.launched[0] <= self.launched[1] => Variant::Plain,
            None => Variant::Hinted,
        }
    }

    /// Counts a launch of `variant` (made, its time not known yet).
    pub fn launched(&mut self, variant: Variant) {
        self.launched[variant.slot()] += 1;
    }

    /// Adds one timing of `variant` in milliseconds (a negative or non-finite one is
    /// ignored) and decides once both entries have enough; returns the choice, if made.
    /// Timings arriving after the choice are ignored.
    pub fn record(&mut self, variant: Variant, ms: f32) -> Option<Variant> {
        if self.choice.is_some() {
            return self.choice;
        }
        if ms.is_finite() && ms >= 0.0 {
            self.times[variant.slot()].push(ms);
        }
        let n = self.config.samples;
        if let [Some(plain), Some(hinted)] = self.medians() {
            if self.times[0].len() >= n && self.times[1].len() >= n {
                let faster = (hinted as f64) < plain as f64 * (1.0 - self.config.margin);
                self.choice = Some(if faster {
                    Variant::Hinted
                } else {
                    Variant::Plain
                });
            }
        }
        self.choice
    }

    /// The entry every launch uses from now on, once decided.
    pub fn choice(&self) -> Option<Variant> {
        self.choice
    }

    /// The median timing of each entry so far (plain, hinted), in milliseconds.
    pub fn medians(&self) -> [Option<f32>; 2] {
        [median(&self.times[0]), median(&self.times[1])]
    }

    /// Timings recorded so far (plain, hinted).
    pub fn samples(&self) -> [usize; 2] {
        [self.times[0].len(), self.times[1].len()]
    }

    /// Launches counted so far (plain, hinted).
    pub fn launches(&self) -> [usize; 2] {
        self.launched
    }

    /// The configuration it decides with.
    pub fn config(&self) -> AutoConfig {
        self.config
    }
}

/// The median of `v` in milliseconds ([`crate::timing::median`]), `None` when empty.
fn median(v: &[f32]) -> Option<f32> {
    let v: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    crate::timing::median(&v).map(|m| m as f32)
}

/// What a tuning is kept for: one kernel (its name in one PTX table) on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TuneKey {
    /// The CUDA device ordinal.
    pub device: usize,
    /// The address of the kernel crate's PTX table (two crates may have kernels of the
    /// same name).
    pub source: usize,
    /// The kernel's name (its plain entry).
    pub kernel: &'static str,
    /// Threads per block and blocks rounded up to a power of two.
    pub shape: (u32, u32),
    /// A hash of the PTX table's text (FNV-1a), so a rebuilt kernel tunes again.
    pub ptx_hash: u64,
}

impl TuneKey {
    /// The key of the decision cache: device UUID and driver, PTX hash, kernel, shape.
    pub fn persistent(&self) -> String {
        format!(
            "{}|ptx-{:016x}|{}|{}x{}",
            device_identity(self.device),
            self.ptx_hash,
            self.kernel,
            self.shape.0,
            self.shape.1
        )
    }
}

/// `GPU-<uuid>|driver-<version>` of device `ordinal` (read once per device).
fn device_identity(ordinal: usize) -> String {
    static IDS: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    let mut ids = lock(&IDS);
    if let Some((_, id)) = ids.iter().find(|(o, _)| *o == ordinal) {
        return id.clone();
    }
    if !crate::gpu::driver_present() {
        return format!("ordinal{ordinal}|no-driver");
    }
    let uuid = cudarc::driver::result::device::get(ordinal as i32)
        .and_then(cudarc::driver::result::device::get_uuid)
        .map(|u| {
            u.bytes
                .iter()
                .map(|b| format!("{:02x}", *b as u8))
                .collect::<String>()
        })
        .unwrap_or_else(|_| format!("ordinal{ordinal}"));
    let mut version = 0;
    // SAFETY: an out-pointer to a local.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    let id = format!("GPU-{uuid}|driver-{version}");
    ids.push((ordinal, id.clone()));
    id
}

/// [`decisions::fnv64`] of every module of a PTX table (cached per table).
fn ptx_hash(ptx: &'static [(u32, &'static str)]) -> u64 {
    static HASHES: Mutex<Vec<(usize, u64)>> = Mutex::new(Vec::new());
    let at = ptx.as_ptr() as usize;
    let mut hashes = lock(&HASHES);
    if let Some((_, h)) = hashes.iter().find(|(a, _)| *a == at) {
        return *h;
    }
    let h = ptx.iter().fold(0u64, |acc, (cc, text)| {
        acc.rotate_left(7) ^ decisions::fnv64(text.as_bytes()) ^ *cc as u64
    });
    hashes.push((at, h));
    h
}

/// What one launch of a `level = auto` kernel does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The entry to launch.
    pub variant: Variant,
    /// When the launch is to be timed for the tuning of this kernel: its key.
    pub measure: Option<TuneKey>,
}

impl Plan {
    /// Launch `variant`, untimed (an explicit `launch_variant`, a kernel without
    /// `level = auto` loops, or the emulator).
    pub fn fixed(variant: Variant) -> Self {
        Plan {
            variant,
            measure: None,
        }
    }
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
    /// The medians a cached decision was measured with (plain, hinted).
    cached_medians: [Option<f32>; 2],
    /// When the first launch asked for a plan.
    started: std::time::Instant,
    /// How long after that the choice was made (zero for a cached or forced one).
    settled_after: Option<std::time::Duration>,
}

impl Tuning {
    /// The medians measured here, or those a cached decision was made with.
    fn medians(&self) -> [Option<f32>; 2] {
        match self.origin {
            Some(Origin::Cached) => self.cached_medians,
            _ => self.selector.medians(),
        }
    }

    /// Reads every pending pair of events that has completed, in any order, without waiting.
    fn poll(&mut self) {
        if self.selector.choice().is_some() {
            self.pending.clear();
            return;
        }
        let mut i = 0;
        while i < self.pending.len() {
            let p = &self.pending[i];
            match p.end.try_is_complete() {
                Ok(false) => i += 1,
                Ok(true) => {
                    let p = self.pending.swap_remove(i);
                    // The end event completed, so the start one did: no wait here.
                    let ms = p.start.context().bind_to_thread().and_then(|_| {
                        // SAFETY: both events belong to the context just made current and
                        // were recorded with timing enabled.
                        unsafe {
                            cudarc::driver::result::event::elapsed(
                                p.start.cu_event(),
                                p.end.cu_event(),
                            )
                        }
                    });
                    if let Ok(ms) = ms {
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

/// The state of one kernel's tuning, for inspection ([`AutoTuner::status`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TuneStatus {
    /// What the tuning is for.
    pub key: TuneKey,
    /// The entry chosen, once decided.
    pub choice: Option<Variant>,
    /// Median milliseconds of each entry so far (plain, hinted); for a cached decision,
    /// those it was made with.
    pub medians: [Option<f32>; 2],
    /// Timings read so far (plain, hinted).
    pub samples: [usize; 2],
    /// Launches made so far while tuning (plain, hinted): none for a cached or forced
    /// decision.
    pub launches: [usize; 2],
    /// Where the choice came from (`None` while measuring).
    pub origin: Option<Origin>,
    /// The tuning's cost in time: from its first launch until the choice was seen made
    /// (zero for a cached or forced decision, `None` while measuring).
    pub settled_after: Option<std::time::Duration>,
}

/// The process's tunings, one [`Selector`] per (device, kernel), shared by every launch of
/// `level = auto` kernels ([`AutoTuner::global`]).
pub struct AutoTuner {
    config: Mutex<AutoConfig>,
    tunings: Mutex<HashMap<TuneKey, Tuning>>,
    store: DecisionStore,
    mode: Mode,
    /// Kernels [`AutoTuner::forget`] sent back to measuring: their cached decisions are not
    /// used in this process (a new measurement replaces them).
    retune: Mutex<HashSet<String>>,
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
    /// An empty tuner with the default [`AutoConfig`] (the launchers use
    /// [`AutoTuner::global`]; a separate one is for tests).
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

    /// A new tuning for `key`: forced by the mode, taken from the decision cache, or to be
    /// measured.
    fn start(&self, key: TuneKey) -> Tuning {
        let config = self.config();
        let (selector, origin, cached_medians) = match self.mode {
            Mode::Force(v) => (
                Selector::decided(config, v),
                Some(Origin::Forced),
                [None; 2],
            ),
            Mode::Tune => match self.cached(&key) {
                Some(d) => (
                    Selector::decided(config, d.variant),
                    Some(Origin::Cached),
                    d.medians_ms.map(|m| Some(m).filter(|m| m.is_finite())),
                ),
                None => (Selector::new(config), None, [None; 2]),
            },
        };
        let t = Tuning {
            selector,
            pending: Vec::new(),
            origin,
            cached_medians,
            started: std::time::Instant::now(),
            settled_after: origin.map(|_| std::time::Duration::ZERO),
        };
        if origin.is_some() {
            announce(key, &t);
        }
        t
    }

    fn cached(&self, key: &TuneKey) -> Option<Decision> {
        if lock(&self.retune).contains(key.kernel) {
            return None;
        }
        self.store.get(&key.persistent())
    }

    /// After a poll: a choice just measured is kept in the store and announced.
    fn settle(&self, key: TuneKey, t: &mut Tuning) {
        if t.origin.is_some() {
            return;
        }
        if let Some(variant) = t.selector.choice() {
            t.origin = Some(Origin::Measured);
            t.settled_after = Some(t.started.elapsed());
            let [plain, hinted] = t.selector.medians();
            let medians_ms = [plain.unwrap_or(f32::NAN), hinted.unwrap_or(f32::NAN)];
            self.store.put(
                &key.persistent(),
                Decision {
                    variant,
                    medians_ms,
                },
            );
            announce(key, t);
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

    /// Which entry the next launch of `key` runs, and whether to time it. Reads the timings
    /// of earlier launches that have completed first.
    pub fn plan(&self, key: TuneKey) -> Plan {
        let mut tunings = lock(&self.tunings);
        let t = tunings.entry(key).or_insert_with(|| self.start(key));
        t.poll();
        self.settle(key, t);
        match t.selector.choice() {
            Some(v) => Plan::fixed(v),
            None => Plan {
                variant: t.selector.next(),
                measure: Some(key),
            },
        }
    }

    /// Counts a launch made from a plan with [`Plan::measure`], with the events recorded
    /// around it (`None`: launched untimed, still counted so the entries alternate).
    pub fn launched(&self, key: TuneKey, variant: Variant, events: Option<(CudaEvent, CudaEvent)>) {
        let mut tunings = lock(&self.tunings);
        let t = tunings.entry(key).or_insert_with(|| self.start(key));
        t.selector.launched(variant);
        if let (Some((start, end)), None) = (events, t.selector.choice()) {
            t.pending.push(Pending {
                variant,
                start,
                end,
            });
        }
    }

    /// The choice for `key`, once made (reads completed timings first, without waiting).
    pub fn choice(&self, key: TuneKey) -> Option<Variant> {
        self.status(key).and_then(|s| s.choice)
    }

    /// The tuning of `key`, if it has been launched (reads completed timings first).
    pub fn status(&self, key: TuneKey) -> Option<TuneStatus> {
        let mut tunings = lock(&self.tunings);
        let t = tunings.get_mut(&key)?;
        t.poll();
        self.settle(key, t);
        Some(status(key, t))
    }

    /// Every tuning so far (reads completed timings first).
    pub fn status_all(&self) -> Vec<TuneStatus> {
        let mut tunings = lock(&self.tunings);
        tunings
            .iter_mut()
            .map(|(k, t)| {
                t.poll();
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
    }

    /// Forgets every tuning.
    pub fn reset(&self) {
        lock(&self.tunings).clear();
    }
}

fn status(key: TuneKey, t: &Tuning) -> TuneStatus {
    TuneStatus {
        key,
        choice: t.selector.choice(),
        medians: t.medians(),
        samples: t.selector.samples(),
        launches: t.selector.launches(),
        origin: t.origin,
        settled_after: t.settled_after,
    }
}

/// Prints a decision when `LOOKAHEAD_AUTOTUNE_PRINT` asks for it.
fn announce(key: TuneKey, t: &Tuning) {
    if !decisions::print_decisions() {
        return;
    }
    let [plain, hinted] = t.medians();
    let ms = |m: Option<f32>| m.map_or_else(|| "-".to_string(), |v| format!("{v:.4} ms"));
    eprintln!(
        "lookahead autotune: {} on device {} ({}x{} blocks): {} ({:?}; plain {}, hinted {}, {} tuning launches, settled after {:.1} ms)",
        key.kernel,
        key.device,
        key.shape.0,
        key.shape.1,
        t.selector.choice().map_or("-", Variant::name),
        t.origin.unwrap_or(Origin::Measured),
        ms(plain),
        ms(hinted),
        t.selector.launches().iter().sum::<usize>(),
        t.settled_after.unwrap_or_default().as_secs_f64() * 1e3
    );
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The key of `kernel` (from the PTX table `ptx`) launched on `on`, or `None` on the CPU
/// emulator.
pub fn key<On: LaunchOn + ?Sized>(
    on: &On,
    ptx: &'static [(u32, &'static str)],
    kernel: &'static str,
    cfg: &LaunchConfig,
) -> Option<TuneKey> {
    on.tuning_device().map(|device| TuneKey {
        device,
        source: ptx.as_ptr() as usize,
        kernel,
        shape: shape_bucket(cfg),
        ptx_hash: ptx_hash(ptx),
    })
}

/// What a `level = auto` kernel's launcher does next: `requested` when the caller named a
/// variant (`launch_variant`), the hinted body on the emulator, and otherwise what the
/// global tuner's [`AutoTuner::plan`] says.
pub fn plan<On: LaunchOn + ?Sized>(
    on: &On,
    ptx: &'static [(u32, &'static str)],
    kernel: &'static str,
    requested: Option<Variant>,
    cfg: &LaunchConfig,
) -> Plan {
    match (requested, key(on, ptx, kernel, cfg)) {
        (Some(v), _) => Plan::fixed(v),
        (None, None) => Plan::fixed(Variant::Hinted),
        (None, Some(k)) => AutoTuner::global().plan(k),
    }
}

/// The entry a plain `launch` of `kernel` on `on` uses from now on: the tuner's choice once
/// made (`None` while it is still measuring, or before the first launch), and always the
/// hinted one on the emulator. With several launch shapes tuned, the choice of the shape
/// launched most.
pub fn choice<On: LaunchOn + ?Sized>(
    on: &On,
    ptx: &'static [(u32, &'static str)],
    kernel: &'static str,
) -> Option<Variant> {
    let Some(device) = on.tuning_device() else {
        return Some(Variant::Hinted);
    };
    let source = ptx.as_ptr() as usize;
    AutoTuner::global()
        .status_all()
        .into_iter()
        .filter(|s| s.key.device == device && s.key.source == source && s.key.kernel == kernel)
        .max_by_key(|s| (s.launches.iter().sum::<usize>(), s.choice.is_some()))
        .and_then(|s| s.choice)
}

/// The shape part of a tuning key: threads per block, and blocks rounded up to a power of
/// two (launches of similar sizes share a decision).
pub fn shape_bucket(cfg: &LaunchConfig) -> (u32, u32) {
    let (g, b) = (cfg.grid_dim, cfg.block_dim);
    let threads = b.0.saturating_mul(b.1).saturating_mul(b.2);
    let blocks = g.0.saturating_mul(g.1).saturating_mul(g.2);
    (
        threads,
        blocks.checked_next_power_of_two().unwrap_or(u32::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(samples: usize) -> AutoConfig {
        AutoConfig {
            samples,
            margin: 0.01,
        }
    }

    /// Runs the selector like the launcher does: ask, launch, and feed timings back one
    /// launch late (as events complete after the next launch went out).
    fn drive(
        s: &mut Selector,
        time: impl Fn(Variant, usize) -> f32,
        launches: usize,
    ) -> Vec<Variant> {
        let mut made = Vec::new();
        let mut pending: Option<(Variant, usize)> = None;
        for n in 0..launches {
            let v = s.next();
            s.launched(v);
            made.push(v);
            if let Some((pv, pn)) = pending.take() {
                s.record(pv, time(pv, pn));
            }
            pending = Some((v, n));
        }
        made
    }

    #[test]
    fn alternates_then_keeps_the_faster_entry() {
        let mut s = Selector::new(cfg(5));
        let made = drive(
            &mut s,
            |v, _| if v == Variant::Hinted { 0.83 } else { 1.0 },
            30,
        );
        assert_eq!(s.choice(), Some(Variant::Hinted));
        // Alternating plain, hinted, ... until five timings of each are in (read one launch
        // late, so one more pair goes out), then only the hinted entry.
        for (i, v) in made.iter().enumerate().take(10) {
            let want = if i % 2 == 0 {
                Variant::Plain
            } else {
                Variant::Hinted
            };
            assert_eq!(*v, want, "launch {i}");
        }
        let first_fixed = made.iter().rposition(|v| *v == Variant::Plain).unwrap() + 1;
        assert!(first_fixed <= 12, "{made:?}");
        assert!(made[first_fixed..].iter().all(|v| *v == Variant::Hinted));
        assert_eq!(s.samples(), [5, 5]);
    }

    #[test]
    fn a_slower_hint_is_never_chosen() {
        for hinted in [1.0f32, 1.005, 1.02, 1.5, 2.14] {
            let mut s = Selector::new(cfg(5));
            drive(
                &mut s,
                |v, _| if v == Variant::Hinted { hinted } else { 1.0 },
                20,
            );
            assert_eq!(s.choice(), Some(Variant::Plain), "hinted at {hinted}x");
        }
    }

    #[test]
    fn a_gain_inside_the_margin_keeps_the_plain_entry() {
        let mut s = Selector::new(AutoConfig {
            samples: 3,
            margin: 0.02,
        });
        drive(
            &mut s,
            |v, _| if v == Variant::Hinted { 0.99 } else { 1.0 },
            10,
        );
        assert_eq!(s.choice(), Some(Variant::Plain));
        let mut s = Selector::new(AutoConfig {
            samples: 3,
            margin: 0.02,
        });
        drive(
            &mut s,
            |v, _| if v == Variant::Hinted { 0.97 } else { 1.0 },
            10,
        );
        assert_eq!(s.choice(), Some(Variant::Hinted));
    }

    #[test]
    fn the_median_ignores_outliers_such_as_a_first_launch() {
        // The first launch of each entry includes loading its code: 50x slower.
        let mut s = Selector::new(cfg(5));
        drive(
            &mut s,
            |v, n| {
                let base = if v == Variant::Hinted { 0.85 } else { 1.0 };
                if n < 2 {
                    base * 50.0
                } else {
                    base
                }
            },
            20,
        );
        assert_eq!(s.choice(), Some(Variant::Hinted));
        assert_eq!(s.medians(), [Some(1.0), Some(0.85)]);
    }

    #[test]
    fn no_decision_until_both_have_enough_and_late_timings_are_ignored() {
        let mut s = Selector::new(cfg(2));
        assert_eq!(s.next(), Variant::Plain);
        s.launched(Variant::Plain);
        assert_eq!(s.next(), Variant::Hinted);
        s.launched(Variant::Hinted);
        assert_eq!(s.record(Variant::Plain, 1.0), None);
        assert_eq!(s.record(Variant::Plain, 1.0), None);
        assert_eq!(s.record(Variant::Plain, f32::NAN), None, "ignored");
        assert_eq!(s.record(Variant::Hinted, 2.0), None);
        assert_eq!(s.record(Variant::Hinted, 2.0), Some(Variant::Plain));
        assert_eq!(s.record(Variant::Hinted, 0.1), Some(Variant::Plain));
        assert_eq!(s.samples(), [2, 2]);
        assert_eq!(s.next(), Variant::Plain);
    }

    #[test]
    fn tuner_plans_alternate_per_kernel_and_decide_from_fed_timings() {
        let t = AutoTuner::new();
        t.set_config(cfg(1));
        let a = TuneKey {
            device: 0,
            source: 1,
            kernel: "a",
            shape: (256, 64),
            ptx_hash: 7,
        };
        let b = TuneKey { kernel: "b", ..a };
        let p = t.plan(a);
        assert_eq!(
            p,
            Plan {
                variant: Variant::Plain,
                measure: Some(a)
            }
        );
        t.launched(a, p.variant, None);
        assert_eq!(t.plan(a).variant, Variant::Hinted);
        // Another kernel starts its own alternation.
        assert_eq!(t.plan(b).variant, Variant::Plain);
        // Untimed launches are counted but decide nothing.
        t.launched(a, Variant::Hinted, None);
        assert_eq!(t.choice(a), None);
        let s = t.status(a).unwrap();
        assert_eq!((s.launches, s.samples), ([1, 1], [0, 0]));
        // Timings come from events on a GPU; feed the selector directly here.
        {
            let mut g = lock(&t.tunings);
            let sel = &mut g.get_mut(&a).unwrap().selector;
            sel.record(Variant::Plain, 2.0);
            sel.record(Variant::Hinted, 1.0);
        }
        assert_eq!(t.choice(a), Some(Variant::Hinted));
        assert_eq!(t.plan(a), Plan::fixed(Variant::Hinted));
        t.forget("a");
        assert_eq!(t.choice(a), None);
        assert_eq!(t.status_all().len(), 1);
        t.reset();
        assert!(t.status_all().is_empty());
    }

    fn decide(t: &AutoTuner, key: TuneKey, plain: f32, hinted: f32) {
        for _ in 0..2 {
            let p = t.plan(key);
            t.launched(key, p.variant, None);
        }
        let mut g = lock(&t.tunings);
        let sel = &mut g.get_mut(&key).unwrap().selector;
        sel.record(Variant::Plain, plain);
        sel.record(Variant::Hinted, hinted);
    }

    #[test]
    fn a_second_tuner_on_the_same_file_takes_the_decision_without_tuning_launches() {
        let dir = std::env::temp_dir().join(format!("lookahead-autotune-{}", std::process::id()));
        let path = dir.join("autotune.tsv");
        let _ = std::fs::remove_dir_all(&dir);
        let key = TuneKey {
            device: 0,
            source: 1,
            kernel: "k",
            shape: (256, 128),
            ptx_hash: 42,
        };
        let first = AutoTuner::with_store(DecisionStore::open(Some(path.clone())), Mode::Tune);
        first.set_config(cfg(1));
        decide(&first, key, 2.0, 1.0);
        let s = first.status(key).unwrap();
        assert_eq!(
            (s.choice, s.origin),
            (Some(Variant::Hinted), Some(Origin::Measured))
        );

        // "The next process": a new tuner reading the same file.
        let second = AutoTuner::with_store(DecisionStore::open(Some(path.clone())), Mode::Tune);
        assert_eq!(second.plan(key), Plan::fixed(Variant::Hinted));
        let s = second.status(key).unwrap();
        assert_eq!((s.origin, s.launches), (Some(Origin::Cached), [0, 0]));
        // Another shape, another PTX or another device is another decision.
        for other in [
            TuneKey {
                shape: (256, 256),
                ..key
            },
            TuneKey {
                ptx_hash: 43,
                ..key
            },
            TuneKey { device: 1, ..key },
        ] {
            assert!(second.plan(other).measure.is_some(), "{other:?}");
        }
        // Forgetting measures again, ignoring the file, and the new decision replaces it.
        second.forget("k");
        second.set_config(cfg(1));
        assert!(second.plan(key).measure.is_some());
        decide(&second, key, 1.0, 2.0);
        assert_eq!(second.choice(key), Some(Variant::Plain));
        let third = AutoTuner::with_store(DecisionStore::open(Some(path)), Mode::Tune);
        assert_eq!(third.plan(key), Plan::fixed(Variant::Plain));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_forced_mode_measures_nothing() {
        let t = AutoTuner::with_store(DecisionStore::open(None), Mode::Force(Variant::Plain));
        let key = TuneKey {
            device: 0,
            source: 1,
            kernel: "f",
            shape: (128, 1),
            ptx_hash: 1,
        };
        assert_eq!(t.plan(key), Plan::fixed(Variant::Plain));
        let s = t.status(key).unwrap();
        assert_eq!((s.origin, s.launches), (Some(Origin::Forced), [0, 0]));
    }

    #[test]
    fn shapes_bucket_blocks_by_powers_of_two() {
        let c = |g: u32, b: u32| LaunchConfig::new((g, 1, 1), (b, 1, 1));
        assert_eq!(shape_bucket(&c(264, 256)), (256, 512));
        assert_eq!(shape_bucket(&c(257, 256)), (256, 512));
        assert_eq!(shape_bucket(&c(256, 256)), (256, 256));
        assert_eq!(
            shape_bucket(&LaunchConfig::new((4, 2, 1), (16, 16, 1))),
            (256, 8)
        );
    }
}
