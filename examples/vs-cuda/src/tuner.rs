//! The prefetch tuner against exhaustive measurement, in one run: every candidate of a
//! `level = auto, distance = auto` kernel is checked against the CPU reference and timed
//! (L2 flushed before each timed launch, as the tuner does), then the typed launcher tunes
//! itself on the same inputs, and its choice is compared with the best candidate and with
//! the plain entry.
//!
//! The pointer chase has no `#[prefetch_next]` form (its next address comes from the load
//! of the current iteration), so its hand-written entries are tuned by the same decision
//! logic (`Selector`) fed with event timings, as a user tuning their own variants would.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaFunction};
use lookahead::launch::autotune::{AutoTuner, Level, TuneStatus, Variant};
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::stats::Summary;
use lookahead_bench::table::Table;

use crate::bench::{Bench, Env, Typed};
use crate::lang::Lang;
use crate::Res;

/// The tuned variant must be within this fraction of the best candidate and of plain.
pub const TARGET: f64 = 0.02;

/// One candidate measured exhaustively.
#[derive(Debug, Clone)]
pub struct CandidateTime {
    pub variant: Variant,
    /// Event-timed milliseconds.
    pub ms: Summary,
    /// Its check against the CPU reference (fresh poisoned outputs).
    pub ok: bool,
    pub check: String,
}

/// How one kernel's tuning compares with its exhaustive measurement.
#[derive(Debug, Clone)]
pub struct TunerRow {
    pub kernel: &'static str,
    /// `#[prefetch_next]` (the typed launcher's tuner) or `hand` (a `Selector`).
    pub written: &'static str,
    pub candidates: Vec<CandidateTime>,
    pub chosen: Variant,
    /// `Measured` or `Cached` (a later run reading the decision cache).
    pub origin: String,
    /// Tuning launches (all real launches on the benchmark's inputs).
    pub launches: usize,
    /// Candidates dropped early.
    pub eliminated: usize,
    /// From the first tuning launch until the choice was made.
    pub settled_ms: f64,
}

impl TunerRow {
    fn time_of(&self, v: Variant) -> Option<&CandidateTime> {
        self.candidates.iter().find(|c| c.variant == v)
    }
    /// The fastest candidate measured exhaustively.
    pub fn best(&self) -> &CandidateTime {
        (self.candidates.iter())
            .min_by(|a, b| a.ms.median.total_cmp(&b.ms.median))
            .expect("at least the plain candidate")
    }
    /// The plain entry's exhaustive median.
    pub fn plain_ms(&self) -> f64 {
        self.time_of(Variant::PLAIN)
            .map_or(f64::NAN, |c| c.ms.median)
    }
    /// The chosen candidate's exhaustive median.
    pub fn chosen_ms(&self) -> f64 {
        self.time_of(self.chosen).map_or(f64::NAN, |c| c.ms.median)
    }
    /// Whether the choice is within [`TARGET`] of the best and of plain.
    pub fn meets_target(&self) -> bool {
        let c = self.chosen_ms();
        c <= self.best().ms.median * (1.0 + TARGET) && c <= self.plain_ms() * (1.0 + TARGET)
    }
    /// Whether every candidate passed its check.
    pub fn checks_ok(&self) -> bool {
        self.candidates.iter().all(|c| c.ok)
    }
}

fn new_event(ctx: &Arc<CudaContext>) -> Res<CudaEvent> {
    Ok(ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?)
}

/// Launches one candidate of the kernel under test.
type LaunchFn<'a> = dyn FnMut(&mut dyn Bench, &Env, Variant) -> Res<()> + 'a;

/// Checks every candidate on fresh poisoned outputs, then times `reps` launches of each,
/// the candidates taking turns (the first of a round rotating), the L2 flushed before each.
fn exhaustive(
    env: &mut Env,
    b: &mut dyn Bench,
    candidates: &[Variant],
    reps: usize,
    ctx: &Arc<CudaContext>,
    launch: &mut LaunchFn,
) -> Res<Vec<CandidateTime>> {
    let mut checks = Vec::new();
    for &v in candidates {
        b.reset(env)?;
        launch(b, env, v)?;
        env.stream.synchronize()?;
        checks.push(b.check(env)?);
    }
    for &v in candidates {
        launch(b, env, v)?; // warm-up: module loading, first-touch of the code
    }
    let n = candidates.len();
    let mut events: Vec<Vec<(CudaEvent, CudaEvent)>> = (0..n).map(|_| Vec::new()).collect();
    for rep in 0..reps {
        for k in 0..n {
            let i = (rep + k) % n;
            let (s, e) = (new_event(ctx)?, new_event(ctx)?);
            AutoTuner::global().flush_l2(&env.stream)?;
            s.record(&env.stream)?;
            launch(b, env, candidates[i])?;
            e.record(&env.stream)?;
            events[i].push((s, e));
        }
        env.stream.synchronize()?;
    }
    let mut out = Vec::new();
    for ((&variant, (ok, check)), evs) in candidates.iter().zip(checks).zip(events) {
        let ms: Vec<f64> = (evs.iter())
            .map(|(s, e)| s.elapsed_ms(e).map(|m| m as f64))
            .collect::<Result<_, _>>()?;
        let ms = Summary::of(&ms).ok_or("no timings")?;
        out.push(CandidateTime {
            variant,
            ms,
            ok,
            check,
        });
    }
    Ok(out)
}

/// `<kernel>_m_tuned`: every candidate exhaustively, then the typed launcher tuning itself
/// (from the decision cache when it holds one, as in a later process, unless `fresh`).
pub fn measure_typed(
    env: &mut Env,
    b: &mut dyn Bench,
    reps: usize,
    ctx: &Arc<CudaContext>,
    fresh: bool,
) -> Res<TunerRow> {
    let (_, candidates) = b.typed_choice(&env.stream, Typed::Tuned);
    let mut launch = |b: &mut dyn Bench, env: &Env, v: Variant| {
        b.launch_typed(&env.stream, Typed::Tuned, Some(v))
    };
    let times = exhaustive(env, b, candidates, reps, ctx, &mut launch)?;
    let (status, _) = crate::run::settle_typed(env, b, Typed::Tuned, fresh)?;
    Ok(row_from_status(b.kernel(), times, &status))
}

fn row_from_status(
    kernel: &'static str,
    candidates: Vec<CandidateTime>,
    s: &TuneStatus,
) -> TunerRow {
    TunerRow {
        kernel,
        written: "#[prefetch_next]",
        candidates,
        chosen: s.choice.unwrap_or(Variant::PLAIN),
        origin: s.origin.map_or("-".to_string(), |o| format!("{o:?}")),
        launches: s.launches,
        eliminated: s.candidates.iter().filter(|c| c.eliminated).count(),
        settled_ms: s.settled_after.unwrap_or_default().as_secs_f64() * 1e3,
    }
}

/// Hand-written entries (`(candidate, entry name)`, plain first) of `lang`: exhaustively,
/// then tuned by a `Selector` fed with event timings after the same L2 flush
/// ([`crate::run::settle_selector`]).
pub fn measure_hand(
    env: &mut Env,
    b: &mut dyn Bench,
    lang: &Lang,
    entries: &[(Variant, &str)],
    reps: usize,
    ctx: &Arc<CudaContext>,
) -> Res<TunerRow> {
    let fs: Vec<(Variant, CudaFunction)> = (entries.iter())
        .map(|(v, name)| Ok((*v, lang.function(name)?)))
        .collect::<Res<_>>()?;
    let function = |v: Variant| {
        fs.iter()
            .find(|(c, _)| *c == v)
            .map(|(_, f)| f.clone())
            .ok_or("no such entry")
    };
    let candidates: Vec<Variant> = entries.iter().map(|(v, _)| *v).collect();
    let mut launch =
        |b: &mut dyn Bench, env: &Env, v: Variant| b.launch(&env.stream, &function(v)?);
    let times = exhaustive(env, b, &candidates, reps, ctx, &mut launch)?;
    let started = std::time::Instant::now();
    let (sel, launches) = crate::run::settle_selector(env, b, ctx, &fs, |b, s, f| b.launch(s, f))?;
    Ok(TunerRow {
        kernel: b.kernel(),
        written: "hand",
        candidates: times,
        chosen: sel.choice().unwrap_or(Variant::PLAIN),
        origin: "Measured".into(),
        launches,
        eliminated: sel.report().iter().filter(|c| c.eliminated).count(),
        settled_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// The pointer chase's hand-written entries as candidates.
pub const CHASE_ENTRIES: [(Variant, &str); 3] = [
    (Variant::PLAIN, "chase_none"),
    (Variant::new(Level::L2, 1), "chase_l2_d1"),
    (Variant::new(Level::L2EvictLast, 1), "chase_el_d1"),
];

/// The summary table: one row per kernel.
pub fn table(rows: &[TunerRow]) -> String {
    let mut t = Table::new([
        "kernel",
        "written",
        "candidates",
        "best (exhaustive)",
        "best ms",
        "plain ms",
        "tuned choice",
        "its ms",
        "tuned / best",
        "tuned / plain",
        "tuning launches",
        "eliminated early",
        "settled after",
        "decision",
        "checks",
        "target",
    ]);
    for r in rows {
        let best = r.best();
        t.push([
            r.kernel.to_string(),
            r.written.to_string(),
            r.candidates.len().to_string(),
            best.variant.name(),
            format!("{:.4}", best.ms.median),
            format!("{:.4}", r.plain_ms()),
            r.chosen.name(),
            format!("{:.4}", r.chosen_ms()),
            format!("{:.3}", r.chosen_ms() / best.ms.median),
            format!("{:.3}", r.chosen_ms() / r.plain_ms()),
            r.launches.to_string(),
            r.eliminated.to_string(),
            format!("{:.1} ms", r.settled_ms),
            r.origin.clone(),
            format!(
                "{}/{}",
                r.candidates.iter().filter(|c| c.ok).count(),
                r.candidates.len()
            ),
            (if r.meets_target() { "met" } else { "MISSED" }).to_string(),
        ]);
    }
    t.to_markdown()
}

/// Every candidate's exhaustive timing, one line each.
pub fn csv(header: &RunHeader, rows: &[TunerRow]) -> Res<String> {
    let mut t = Table::new([
        "kernel",
        "variant",
        "median_ms",
        "min_ms",
        "max_ms",
        "check_ok",
        "chosen",
        "best",
        "device",
        "driver",
    ]);
    let (device, driver) = match &header.device {
        Some(d) => (d.describe(), d.driver()),
        None => ("no GPU".to_string(), "-".to_string()),
    };
    for r in rows {
        let best = r.best().variant;
        for c in &r.candidates {
            t.push([
                r.kernel.to_string(),
                c.variant.name(),
                format!("{:.5}", c.ms.median),
                format!("{:.5}", c.ms.min),
                format!("{:.5}", c.ms.max),
                c.ok.to_string(),
                (c.variant == r.chosen).to_string(),
                (c.variant == best).to_string(),
                device.clone(),
                driver.clone(),
            ]);
        }
    }
    Ok(t.to_csv()?)
}

/// The table, then every candidate's exhaustive median and the checks (Markdown).
pub fn details(rows: &[TunerRow]) -> String {
    let mut md = table(rows);
    md += "\nCandidates (exhaustive median ms; `*` the tuner's choice, `+` the best):\n\n";
    for r in rows {
        let best = r.best().variant;
        let list: Vec<String> = (r.candidates.iter())
            .map(|c| {
                let mark = match (c.variant == r.chosen, c.variant == best) {
                    (true, true) => "*+",
                    (true, false) => "*",
                    (false, true) => "+",
                    _ => "",
                };
                format!("{}{mark} {:.4}", c.variant, c.ms.median)
            })
            .collect();
        md += &format!("- {}: {}\n", r.kernel, list.join(", "));
    }
    let failed: Vec<String> = (rows.iter())
        .flat_map(|r| {
            r.candidates
                .iter()
                .filter(|c| !c.ok)
                .map(move |c| format!("{} {}: {}", r.kernel, c.variant, c.check))
        })
        .collect();
    md += &format!(
        "\nChecks: every candidate on fresh random inputs with its outputs poisoned, against the \
         CPU reference: {}\n",
        if failed.is_empty() {
            "all pass".to_string()
        } else {
            format!("FAILED: {}", failed.join("; "))
        }
    );
    md
}

/// Writes `prefetch_tuner.md` and `prefetch_tuner.csv` into `out`.
pub fn write_outputs(out: &OutDir, header: &RunHeader, reps: usize, rows: &[TunerRow]) -> Res<()> {
    let mut md = String::from(
        "# `level = auto, distance = auto`: the tuner against exhaustive measurement\n\n",
    );
    md += "Written by `prefetch_tuner` (`examples/vs-cuda`); every candidate's time: \
           [prefetch_tuner.csv](prefetch_tuner.csv).\n\n";
    md += &header.markdown();
    md += &format!(
        "- exhaustive: median of {reps} event-timed launches per candidate after one warm-up, \
         candidates taking turns, L2 flushed (a memset of twice its size) before each; the tuner \
         flushes the same way\n- target: the tuned choice within {:.0}% of the best candidate and \
         of plain\n\n",
        TARGET * 100.0
    );
    md += &details(rows);
    out.write("prefetch_tuner.md", md)?;
    out.write("prefetch_tuner.csv", csv(header, rows)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(v: Variant, ms: f64) -> CandidateTime {
        CandidateTime {
            variant: v,
            ms: Summary::of(&[ms]).unwrap(),
            ok: true,
            check: String::new(),
        }
    }

    #[test]
    fn a_row_compares_the_choice_with_the_best_and_plain() {
        let l2 = Variant::new(Level::L2, 1);
        let mut r = TunerRow {
            kernel: "k",
            written: "#[prefetch_next]",
            candidates: vec![
                cand(Variant::PLAIN, 1.0),
                cand(l2, 0.9),
                cand(Variant::new(Level::Bulk, 4), 2.0),
            ],
            chosen: l2,
            origin: "Measured".into(),
            launches: 30,
            eliminated: 1,
            settled_ms: 5.0,
        };
        assert_eq!(r.best().variant, l2);
        assert!(r.meets_target());
        r.chosen = Variant::PLAIN;
        assert!(!r.meets_target(), "plain is 11% slower than the best");
        let md = table(&[r]);
        assert!(
            md.contains(
                "| k | #[prefetch_next] | 3 | l2_d1 | 0.9000 | 1.0000 | plain | \
                             1.0000 | 1.111 | 1.000 | 30 | 1 | 5.0 ms | Measured | 3/3 | MISSED |"
            ),
            "{md}"
        );
    }
}
