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
//! The decision logic is [`Selector`], which can be fed timings by hand (tests, or a
//! benchmark timing a CUDA C++ twin); [`AutoTuner`] keeps one per (device, kernel) for the
//! whole process. On the CPU emulator nothing is measured: a plain `launch` runs the hinted
//! body, so the prefetch trace shows its prefetches.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::CudaEvent;

use crate::launch::LaunchOn;

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
    /// Median milliseconds of each entry so far (plain, hinted).
    pub medians: [Option<f32>; 2],
    /// Timings read so far (plain, hinted).
    pub samples: [usize; 2],
    /// Launches made so far while tuning (plain, hinted).
    pub launches: [usize; 2],
}

/// The process's tunings, one [`Selector`] per (device, kernel), shared by every launch of
/// `level = auto` kernels ([`AutoTuner::global`]).
pub struct AutoTuner {
    config: Mutex<AutoConfig>,
    tunings: Mutex<HashMap<TuneKey, Tuning>>,
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
        AutoTuner {
            config: Mutex::new(AutoConfig::default()),
            tunings: Mutex::new(HashMap::new()),
        }
    }

    /// The tuner every `#[kernel]` launcher uses.
    pub fn global() -> &'static AutoTuner {
        static GLOBAL: OnceLock<AutoTuner> = OnceLock::new();
        GLOBAL.get_or_init(AutoTuner::new)
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
        let config = self.config();
        let mut tunings = lock(&self.tunings);
        let t = tunings.entry(key).or_insert_with(|| Tuning {
            selector: Selector::new(config),
            pending: Vec::new(),
        });
        t.poll();
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
        let config = self.config();
        let mut tunings = lock(&self.tunings);
        let t = tunings.entry(key).or_insert_with(|| Tuning {
            selector: Selector::new(config),
            pending: Vec::new(),
        });
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
        Some(status(key, t))
    }

    /// Every tuning so far (reads completed timings first).
    pub fn status_all(&self) -> Vec<TuneStatus> {
        let mut tunings = lock(&self.tunings);
        tunings
            .iter_mut()
            .map(|(k, t)| {
                t.poll();
                status(*k, t)
            })
            .collect()
    }

    /// Forgets every tuning of the kernel named `kernel` (all devices): its next launches
    /// measure again.
    pub fn forget(&self, kernel: &str) {
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
        medians: t.selector.medians(),
        samples: t.selector.samples(),
        launches: t.selector.launches(),
    }
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
) -> Option<TuneKey> {
    on.tuning_device().map(|device| TuneKey {
        device,
        source: ptx.as_ptr() as usize,
        kernel,
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
) -> Plan {
    match (requested, key(on, ptx, kernel)) {
        (Some(v), _) => Plan::fixed(v),
        (None, None) => Plan::fixed(Variant::Hinted),
        (None, Some(k)) => AutoTuner::global().plan(k),
    }
}

/// The entry a plain `launch` of `kernel` on `on` uses from now on: the tuner's choice once
/// made (`None` while it is still measuring, or before the first launch), and always the
/// hinted one on the emulator.
pub fn choice<On: LaunchOn + ?Sized>(
    on: &On,
    ptx: &'static [(u32, &'static str)],
    kernel: &'static str,
) -> Option<Variant> {
    match key(on, ptx, kernel) {
        None => Some(Variant::Hinted),
        Some(k) => AutoTuner::global().choice(k),
    }
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
}
