//! The choice among a kernel's candidates, from timings it is fed: round-robin over the
//! candidates still in the race, early elimination of the clearly slower ones, and a stop
//! once one is left or every survivor has enough timings.

use super::variant::Variant;

/// How [`Selector`] decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoConfig {
    /// Timings of every candidate before any is eliminated (at least 1; default 3).
    pub samples: usize,
    /// Timings of each survivor after which the one with the lowest median is chosen
    /// (at least `samples`; default 12).
    pub max_samples: usize,
    /// A candidate whose median is above the leader's by more than this fraction, once both
    /// have `samples` timings, leaves the race (default 0.05).
    pub eliminate: f64,
    /// A hinted candidate is chosen over the plain entry only when its median is lower by
    /// more than this fraction (default 0.01): a tie, or noise, keeps the plain entry.
    pub margin: f64,
    /// Timings of all candidates together after which the survivor with the lowest median is
    /// chosen, however close the race (default 128): a bound on what tuning costs. Every
    /// kernel of `results/prefetch_tuner.md` settles before it (12 to 112 launches on the
    /// H100), so it only cuts races of many close candidates short.
    pub max_launches: usize,
    /// Write a buffer of twice the L2's size before each timed launch, so every candidate is
    /// timed from a cold L2 (default true; the memset is on the launch stream, outside the
    /// timed events).
    pub flush_l2: bool,
}

impl Default for AutoConfig {
    fn default() -> Self {
        AutoConfig {
            samples: 3,
            max_samples: 12,
            eliminate: 0.05,
            margin: 0.01,
            max_launches: 128,
            flush_l2: true,
        }
    }
}

/// One candidate in a tuning: what it has cost and where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateReport {
    /// The candidate.
    pub variant: Variant,
    /// Launches made with it while tuning.
    pub launches: usize,
    /// Timings read back.
    pub samples: usize,
    /// Median milliseconds of those timings.
    pub median_ms: Option<f32>,
    /// Whether it left the race early (slower than the leader by more than
    /// [`AutoConfig::eliminate`]).
    pub eliminated: bool,
}

/// The choice among one kernel's candidates on one device, from timings it is fed.
///
/// ```
/// use lookahead::launch::autotune::{AutoConfig, Level, Selector, Variant};
/// let candidates = [Variant::PLAIN, Variant::new(Level::L2, 1), Variant::new(Level::L2, 8)];
/// let ms = |v: Variant| match v.distance { 0 => 1.0, 1 => 0.8, _ => 1.5 };
/// let cfg = AutoConfig { samples: 2, max_samples: 4, ..AutoConfig::default() };
/// let mut s = Selector::new(&candidates, cfg);
/// while s.choice().is_none() {
///     let v = s.next();
///     s.launched(v);
///     s.record(v, ms(v));
/// }
/// assert_eq!(s.choice(), Some(Variant::new(Level::L2, 1)));
/// ```
#[derive(Debug, Clone)]
pub struct Selector {
    config: AutoConfig,
    candidates: Vec<CandidateState>,
    choice: Option<Variant>,
}

#[derive(Debug, Clone)]
struct CandidateState {
    variant: Variant,
    launched: usize,
    times: Vec<f32>,
    eliminated: bool,
}

impl CandidateState {
    fn median(&self) -> Option<f32> {
        median(&self.times)
    }
}

impl Selector {
    /// A selector over `candidates` (duplicates are dropped) that has seen nothing.
    pub fn new(candidates: &[Variant], config: AutoConfig) -> Self {
        let samples = config.samples.max(1);
        let config = AutoConfig {
            samples,
            max_samples: config.max_samples.max(samples),
            ..config
        };
        let mut list: Vec<CandidateState> = Vec::new();
        for v in candidates {
            if !list.iter().any(|c| c.variant == *v) {
                list.push(CandidateState {
                    variant: *v,
                    launched: 0,
                    times: Vec::new(),
                    eliminated: false,
                });
            }
        }
        let choice = match list.as_slice() {
            [] => Some(Variant::PLAIN),
            [only] => Some(only.variant),
            _ => None,
        };
        Selector {
            config,
            candidates: list,
            choice,
        }
    }

    /// A selector whose choice is already `variant` (from the decision cache, or forced).
    pub fn decided(candidates: &[Variant], config: AutoConfig, variant: Variant) -> Self {
        Selector {
            choice: Some(variant),
            ..Selector::new(candidates, config)
        }
    }

    /// The candidate the next launch should run: the choice once made; before that the
    /// candidate in the race launched the fewest times (the first listed on a tie), so they
    /// take turns.
    pub fn next(&self) -> Variant {
        if let Some(v) = self.choice {
            return v;
        }
        (self.candidates.iter())
            .filter(|c| !c.eliminated)
            .min_by_key(|c| c.launched)
            .map_or(Variant::PLAIN, |c| c.variant)
    }

    /// Counts a launch of `variant` (made, its time not known yet).
    pub fn launched(&mut self, variant: Variant) {
        if let Some(c) = self.candidates.iter_mut().find(|c| c.variant == variant) {
            c.launched += 1;
        }
    }

    /// Adds one timing of `variant` in milliseconds (a negative or non-finite one, or one of
    /// a candidate not in the race, is ignored), eliminates and decides; returns the choice,
    /// if made. Timings arriving after the choice are ignored.
    pub fn record(&mut self, variant: Variant, ms: f32) -> Option<Variant> {
        if self.choice.is_some() {
            return self.choice;
        }
        if let Some(c) = self.candidates.iter_mut().find(|c| c.variant == variant) {
            if ms.is_finite() && ms >= 0.0 && !c.eliminated {
                c.times.push(ms);
            }
        }
        self.eliminate();
        self.decide();
        self.choice
    }

    /// Once every candidate in the race has `samples` timings: those slower than the leader
    /// by more than `eliminate` leave it.
    fn eliminate(&mut self) {
        let n = self.config.samples;
        let racing = || self.candidates.iter().filter(|c| !c.eliminated);
        if racing().any(|c| c.times.len() < n) {
            return;
        }
        let Some(best) = racing().filter_map(CandidateState::median).reduce(f32::min) else {
            return;
        };
        let limit = best as f64 * (1.0 + self.config.eliminate);
        for c in self.candidates.iter_mut().filter(|c| !c.eliminated) {
            if c.median().is_some_and(|m| m as f64 > limit) {
                c.eliminated = true;
            }
        }
    }

    /// The choice, once one candidate is left, every survivor has `max_samples` timings or
    /// there are `max_launches` timings in all: the lowest median, unless the plain entry
    /// survived and is within `margin` of it.
    fn decide(&mut self) {
        let racing: Vec<&CandidateState> =
            self.candidates.iter().filter(|c| !c.eliminated).collect();
        let timings: usize = self.candidates.iter().map(|c| c.times.len()).sum();
        let done = racing.len() == 1
            || timings >= self.config.max_launches.max(1)
            || racing
                .iter()
                .all(|c| c.times.len() >= self.config.max_samples);
        if !done {
            return;
        }
        let leader = racing
            .iter()
            .filter_map(|c| c.median().map(|m| (m, c.variant)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let Some((best, leader)) = leader else { return };
        let plain = racing
            .iter()
            .find(|c| c.variant.is_plain())
            .and_then(|c| c.median());
        self.choice = Some(match plain {
            Some(p) if (best as f64) >= p as f64 * (1.0 - self.config.margin) => Variant::PLAIN,
            _ => leader,
        });
    }

    /// The candidate every launch uses from now on, once decided.
    pub fn choice(&self) -> Option<Variant> {
        self.choice
    }

    /// The candidates it chooses among, in order.
    pub fn candidates(&self) -> Vec<Variant> {
        self.candidates.iter().map(|c| c.variant).collect()
    }

    /// Where every candidate stands.
    pub fn report(&self) -> Vec<CandidateReport> {
        (self.candidates.iter())
            .map(|c| CandidateReport {
                variant: c.variant,
                launches: c.launched,
                samples: c.times.len(),
                median_ms: c.median(),
                eliminated: c.eliminated,
            })
            .collect()
    }

    /// The median timing of `variant` so far, in milliseconds.
    pub fn median_of(&self, variant: Variant) -> Option<f32> {
        (self.candidates.iter())
            .find(|c| c.variant == variant)
            .and_then(CandidateState::median)
    }

    /// Launches counted so far, all candidates together.
    pub fn launches(&self) -> usize {
        self.candidates.iter().map(|c| c.launched).sum()
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

#[cfg(test)]
mod tests {
    use super::super::variant::Level;
    use super::*;

    fn cfg(samples: usize, max_samples: usize) -> AutoConfig {
        AutoConfig {
            samples,
            max_samples,
            ..AutoConfig::default()
        }
    }

    fn l2(d: u32) -> Variant {
        Variant::new(Level::L2, d)
    }

    #[test]
    fn a_close_race_stops_at_max_launches_with_the_leader() {
        // Sixteen candidates within 1% of each other never eliminate one another: without
        // the bound the race would take 16 x 12 timings.
        let candidates: Vec<Variant> = std::iter::once(Variant::PLAIN)
            .chain((1..16).map(l2))
            .collect();
        let ms = |v: Variant| 1.0 - 0.0005 * v.distance as f32;
        let mut s = Selector::new(&candidates, AutoConfig::default());
        while s.choice().is_none() {
            let v = s.next();
            s.launched(v);
            s.record(v, ms(v));
        }
        assert_eq!(s.launches(), 128);
        // The leader by median (l2 at distance 15, 0.75% ahead of plain: within `margin`
        // of it, so plain is kept).
        assert_eq!(s.choice(), Some(Variant::PLAIN));
        let faster = |v: Variant| {
            if v.is_plain() {
                1.0
            } else {
                0.9 - 0.0005 * v.distance as f32
            }
        };
        let mut s = Selector::new(
            &candidates,
            AutoConfig {
                eliminate: 0.5,
                ..AutoConfig::default()
            },
        );
        while s.choice().is_none() {
            let v = s.next();
            s.launched(v);
            s.record(v, faster(v));
        }
        assert_eq!((s.launches(), s.choice()), (128, Some(l2(15))));
    }

    /// Runs the selector like the launcher does: ask, launch, and feed timings back one
    /// launch late (as events complete after the next launch went out).
    fn drive(
        s: &mut Selector,
        ms: impl Fn(Variant, usize) -> f32,
        launches: usize,
    ) -> Vec<Variant> {
        let mut made = Vec::new();
        let mut late: Option<Variant> = None;
        for i in 0..launches {
            let v = s.next();
            s.launched(v);
            made.push(v);
            if let Some(prev) = late.replace(v) {
                s.record(prev, ms(prev, i));
            }
        }
        made
    }

    #[test]
    fn takes_turns_then_keeps_the_fastest() {
        let c = [Variant::PLAIN, l2(1), l2(4), l2(16)];
        let mut s = Selector::new(&c, cfg(3, 6));
        let ms = |v: Variant, _| [1.0, 0.8, 0.82, 1.5][c.iter().position(|x| *x == v).unwrap()];
        let made = drive(&mut s, ms, 200);
        assert_eq!(&made[..4], &c, "one of each first");
        assert_eq!(s.choice(), Some(l2(1)));
        let first_fixed = made.len() - made.iter().rev().take_while(|v| **v == l2(1)).count();
        assert!(first_fixed <= 30, "settled after {first_fixed} launches");
        let r = s.report();
        assert!(
            r[0].eliminated && r[3].eliminated && r[3].samples == 3,
            "{r:?}"
        );
        assert!(
            r[1].samples >= 6 && !r[2].eliminated && r[2].samples >= 6,
            "{r:?}"
        );
    }

    #[test]
    fn a_slower_hint_is_never_chosen_and_a_gain_inside_the_margin_keeps_plain() {
        for hinted in [1.0, 1.004, 0.995, 1.2, 3.0] {
            let mut s = Selector::new(&[Variant::PLAIN, l2(4)], cfg(3, 6));
            drive(&mut s, |v, _| if v.is_plain() { 1.0 } else { hinted }, 40);
            assert_eq!(s.choice(), Some(Variant::PLAIN), "hinted at {hinted}x");
        }
        let mut s = Selector::new(&[Variant::PLAIN, l2(4)], cfg(3, 6));
        drive(&mut s, |v, _| if v.is_plain() { 1.0 } else { 0.98 }, 40);
        assert_eq!(s.choice(), Some(l2(4)));
    }

    #[test]
    fn the_median_ignores_outliers_such_as_a_first_launch() {
        let mut s = Selector::new(&[Variant::PLAIN, l2(2)], cfg(5, 5));
        let ms = |v: Variant, i: usize| match (v.is_plain(), i) {
            (_, 0..=2) => 9.0,
            (true, _) => 1.0,
            (false, _) => 0.85,
        };
        drive(&mut s, ms, 40);
        assert_eq!(s.choice(), Some(l2(2)));
        assert_eq!(s.median_of(l2(2)), Some(0.85));
    }

    #[test]
    fn no_decision_until_enough_and_late_timings_are_ignored() {
        let mut s = Selector::new(&[Variant::PLAIN, l2(1)], cfg(2, 2));
        assert_eq!(s.record(Variant::PLAIN, 1.0), None);
        assert_eq!(s.record(Variant::PLAIN, 1.0), None);
        assert_eq!(s.record(Variant::PLAIN, f32::NAN), None, "ignored");
        assert_eq!(s.record(l2(1), 2.0), None);
        assert_eq!(s.record(l2(1), 2.0), Some(Variant::PLAIN));
        assert_eq!(s.record(l2(1), 0.1), Some(Variant::PLAIN));
        assert_eq!(s.report()[1].samples, 2);
        assert_eq!(s.next(), Variant::PLAIN);
    }

    #[test]
    fn one_candidate_or_none_is_decided_at_once() {
        assert_eq!(Selector::new(&[l2(4)], cfg(3, 6)).choice(), Some(l2(4)));
        assert_eq!(Selector::new(&[], cfg(3, 6)).choice(), Some(Variant::PLAIN));
        let twice = Selector::new(&[Variant::PLAIN, Variant::PLAIN], cfg(3, 6));
        assert_eq!(twice.choice(), Some(Variant::PLAIN));
    }
}
