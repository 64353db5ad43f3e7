//! Checking and timing one benchmark's variants in both languages: checked pairs, timed
//! pairs (Rust and CUDA C++ alternating launch by launch), and settling `level = auto`.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaFunction, CudaStream};
use lookahead::launch::autotune::{AutoTuner, Level, Selector, TuneStatus, Variant};
use vs_cuda_kernels::{is_macro_variant, SUITE};

use crate::bench::{Bench, Env, Typed};
use crate::lang::Lang;
use crate::report::{AutoRow, Row, Timing};
use crate::Res;

/// Launches the variant under test in language `lang` (0: Rust, 1: CUDA C++).
type LaunchFn<'a> = dyn FnMut(&mut dyn Bench, &Env, usize) -> Res<()> + 'a;

/// How many launches to time and to warm up with.
#[derive(Clone, Copy)]
pub struct Reps {
    pub timed: usize,
    pub warmup: usize,
}

/// Checks one launch of each language on fresh (poisoned) outputs.
pub(crate) fn check_pair(
    env: &mut Env,
    b: &mut dyn Bench,
    launch: &mut LaunchFn,
) -> Res<(bool, [String; 2])> {
    let mut check = [String::new(), String::new()];
    let mut ok = true;
    for (k, c) in check.iter_mut().enumerate() {
        b.reset(env)?;
        launch(b, env, k)?;
        env.stream.synchronize()?;
        let (good, detail) = b.check(env)?;
        ok &= good;
        *c = format!("{}: {detail}", if good { "PASS" } else { "FAIL" });
    }
    Ok((ok, check))
}

fn new_event(ctx: &Arc<CudaContext>) -> Res<CudaEvent> {
    Ok(ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?)
}

/// Warm-up, then `reps.timed` event-timed launches of each language, alternating which goes
/// first; the milliseconds of each language's launches.
pub(crate) fn time_pair(
    env: &mut Env,
    b: &mut dyn Bench,
    reps: Reps,
    ctx: &Arc<CudaContext>,
    launch: &mut LaunchFn,
) -> Res<[Vec<f64>; 2]> {
    for _ in 0..reps.warmup {
        launch(b, env, 0)?;
        launch(b, env, 1)?;
    }
    let mut events = Vec::with_capacity(reps.timed);
    for rep in 0..reps.timed {
        // Alternate which language goes first, so neither always follows the other.
        let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut pair: [Option<(CudaEvent, CudaEvent)>; 2] = [None, None];
        for k in order {
            let (s, e) = (new_event(ctx)?, new_event(ctx)?);
            s.record(&env.stream)?;
            launch(b, env, k)?;
            e.record(&env.stream)?;
            pair[k] = Some((s, e));
        }
        events.push(pair);
    }
    env.stream.synchronize()?;
    let mut times = [Vec::new(), Vec::new()];
    for pair in &events {
        for (k, t) in times.iter_mut().enumerate() {
            let (s, e) = pair[k].as_ref().ok_or("missing event")?;
            t.push(s.elapsed_ms(e)? as f64);
        }
    }
    Ok(times)
}

/// Most launches a `level = auto` kernel may take to settle before the benchmark gives up.
pub const MAX_TUNING_LAUNCHES: usize = 1000;

/// Settles `<kernel>_m_auto` or `<kernel>_m_tuned` through the Rust typed launcher's own
/// tuner, after forgetting any earlier decision when `fresh` (the benchmark synchronises
/// every 4 launches so the events complete; the launcher never waits); its status and the
/// launches it took (1 for a decision from the cache: the launch that read it).
pub fn settle_typed(
    env: &mut Env,
    b: &mut dyn Bench,
    which: Typed,
    fresh: bool,
) -> Res<(TuneStatus, usize)> {
    let entry = b.typed_name(which);
    if fresh {
        AutoTuner::global().forget(&entry);
    }
    let mut launches = 0;
    while b.typed_choice(&env.stream, which).0.is_none() {
        if launches == MAX_TUNING_LAUNCHES {
            return Err(format!(
                "{entry}: the Rust launcher did not settle in {launches} launches"
            )
            .into());
        }
        b.launch_typed(&env.stream, which, None)?;
        launches += 1;
        if launches % 4 == 0 {
            env.stream.synchronize()?;
        }
    }
    let status = AutoTuner::global()
        .status_all()
        .into_iter()
        .find(|s| s.key.kernel == entry)
        .ok_or("no tuning status")?;
    Ok((status, launches))
}

/// The candidates of every `<kernel>_m_auto` (`level = auto(l2), distance = 4`).
const AUTO_CANDIDATES: [Variant; 2] = [Variant::PLAIN, Variant::new(Level::L2, 0)];

/// Launches an entry by its function: [`Bench::launch`] (hand-written) or [`Bench::launch_m`].
pub type EntryLaunch = fn(&dyn Bench, &CudaStream, &CudaFunction) -> Res<()>;

/// Settles a choice among `entries` (candidate, function; hand-written kernels or the CUDA
/// twin of `<kernel>_m_auto`) with the launcher's decision logic ([`Selector`]), fed with
/// event timings of launches made the way the launcher makes them (after the same L2
/// flush); the selector and the launches it took.
pub fn settle_selector(
    env: &mut Env,
    b: &mut dyn Bench,
    ctx: &Arc<CudaContext>,
    entries: &[(Variant, CudaFunction)],
    launch: EntryLaunch,
) -> Res<(Selector, usize)> {
    let candidates: Vec<Variant> = entries.iter().map(|e| e.0).collect();
    let mut sel = Selector::new(&candidates, AutoTuner::global().config());
    let mut pending = Vec::new();
    let mut launches = 0;
    while sel.choice().is_none() {
        if launches == MAX_TUNING_LAUNCHES {
            return Err(format!("{}: the selector did not settle", b.kernel()).into());
        }
        let v = sel.next();
        sel.launched(v);
        let f = &entries.iter().find(|e| e.0 == v).ok_or("no such entry")?.1;
        let (s, e) = (new_event(ctx)?, new_event(ctx)?);
        AutoTuner::global().flush_l2(&env.stream)?;
        s.record(&env.stream)?;
        launch(b, &env.stream, f)?;
        e.record(&env.stream)?;
        pending.push((v, s, e));
        launches += 1;
        if launches % 4 == 0 {
            env.stream.synchronize()?;
            for (v, s, e) in pending.drain(..) {
                sel.record(v, s.elapsed_ms(&e)?);
            }
        }
    }
    Ok((sel, launches))
}

/// Settles `<kernel>_m_auto` in both languages; the two choices and the CUDA twin's two
/// functions.
fn settle_auto(
    env: &mut Env,
    b: &mut dyn Bench,
    cuda: &Lang,
    ctx: &Arc<CudaContext>,
) -> Res<(AutoRow, [CudaFunction; 2])> {
    let entry = format!("{}_m_auto", b.kernel());
    let (rust, rust_launches) = settle_typed(env, b, Typed::Auto, true)?;
    let fs = [
        cuda.function(&entry)?,
        cuda.function(&format!("{entry}__l2"))?,
    ];
    let entries = [
        (AUTO_CANDIDATES[0], fs[0].clone()),
        (AUTO_CANDIDATES[1], fs[1].clone()),
    ];
    let (sel, cuda_launches) = settle_selector(env, b, ctx, &entries, |b, s, f| b.launch_m(s, f))?;
    let auto = AutoRow {
        rust: rust.choice.ok_or("no choice")?,
        cuda: sel.choice().ok_or("no choice")?,
        rust_launches,
        cuda_launches,
        rust_medians: AUTO_CANDIDATES.map(|v| {
            (rust.candidates.iter())
                .find(|c| c.variant == v)
                .and_then(|c| c.median_ms)
        }),
        cuda_medians: AUTO_CANDIDATES.map(|v| sel.median_of(v)),
    };
    Ok((auto, fs))
}

fn slot(v: Variant) -> usize {
    usize::from(!v.is_plain())
}

/// What checking and timing one variant found.
struct Measured {
    ok: bool,
    check: [String; 2],
    times: [Vec<f64>; 2],
    regs: (i32, i32),
    auto: Option<AutoRow>,
}

/// Checks a pair of launches, then times pairs; `about` is the pair's registers and, for
/// `m_auto`, how it settled.
fn check_and_time(
    env: &mut Env,
    b: &mut dyn Bench,
    reps: Reps,
    ctx: &Arc<CudaContext>,
    launch: &mut LaunchFn,
    about: ((i32, i32), Option<AutoRow>),
) -> Res<Measured> {
    let (ok, check) = check_pair(env, b, launch)?;
    let times = time_pair(env, b, reps, ctx, launch)?;
    let (regs, auto) = about;
    Ok(Measured {
        ok,
        check,
        times,
        regs,
        auto,
    })
}

/// `m_auto`: settles both languages, then checks and times what each settled on.
fn measure_auto(
    env: &mut Env,
    b: &mut dyn Bench,
    langs: &[Lang; 2],
    reps: Reps,
    ctx: &Arc<CudaContext>,
) -> Res<Measured> {
    let entry = format!("{}_m_auto", b.kernel());
    let (auto, fs) = settle_auto(env, b, &langs[1], ctx)?;
    let chosen = fs[slot(auto.cuda)].clone();
    let rust_entry = match auto.rust.is_plain() {
        true => entry.clone(),
        false => format!("{entry}__l2"),
    };
    let regs = (
        langs[0].function(&rust_entry)?.num_regs()?,
        chosen.num_regs()?,
    );
    let mut launch = |b: &mut dyn Bench, env: &Env, k: usize| {
        if k == 0 {
            b.launch_typed(&env.stream, Typed::Auto, None)
        } else {
            b.launch_m(&env.stream, &chosen)
        }
    };
    check_and_time(env, b, reps, ctx, &mut launch, (regs, Some(auto)))
}

/// A hand-written or `#[prefetch_next]` variant: checks and times its entry in both languages.
fn measure_entry(
    env: &mut Env,
    b: &mut dyn Bench,
    langs: &[Lang; 2],
    reps: Reps,
    ctx: &Arc<CudaContext>,
    variant: &str,
) -> Res<Measured> {
    let entry = format!("{}_{variant}", b.kernel());
    let f = [langs[0].function(&entry)?, langs[1].function(&entry)?];
    let by_macro = is_macro_variant(variant);
    let mut launch = |b: &mut dyn Bench, env: &Env, k: usize| {
        if by_macro {
            b.launch_m(&env.stream, &f[k])
        } else {
            b.launch(&env.stream, &f[k])
        }
    };
    let regs = (f[0].num_regs()?, f[1].num_regs()?);
    check_and_time(env, b, reps, ctx, &mut launch, (regs, None))
}

/// Checks and times every variant of one kernel in both languages, printing a line each.
pub fn run_bench(
    env: &mut Env,
    b: &mut dyn Bench,
    langs: &[Lang; 2],
    reps: Reps,
    ctx: &Arc<CudaContext>,
) -> Res<Vec<Row>> {
    let kernel = b.kernel();
    let variants = SUITE
        .iter()
        .find(|(k, _)| *k == kernel)
        .map(|(_, v)| *v)
        .ok_or("kernel not in SUITE")?;
    let mut rows = Vec::new();
    for &variant in variants {
        let m = if variant == "m_auto" {
            measure_auto(env, b, langs, reps, ctx)?
        } else {
            measure_entry(env, b, langs, reps, ctx, variant)?
        };
        let [tr, tc] = m.times;
        let [check_rust, check_cuda] = m.check;
        let row = Row {
            kernel,
            variant,
            bytes: b.bytes(),
            rust: Timing::of(&tr).ok_or("no timed launches")?,
            cuda: Timing::of(&tc).ok_or("no timed launches")?,
            regs: m.regs,
            check: (check_rust, check_cuda),
            ok: m.ok,
            auto: m.auto,
        };
        print_row(&row);
        rows.push(row);
    }
    Ok(rows)
}

fn print_row(row: &Row) {
    println!(
        "  {:<7} {:<40} rust {:>8.4} ms  cuda {:>8.4} ms  rust/cuda {:>5.3}  regs {}/{}  {}",
        row.kernel,
        row.label(),
        row.rust.median(),
        row.cuda.median(),
        row.rust.median() / row.cuda.median(),
        row.regs.0,
        row.regs.1,
        if row.ok {
            "checks pass"
        } else {
            "CHECK FAILED"
        }
    );
    if !row.ok {
        println!("    rust {}\n    cuda {}", row.check.0, row.check.1);
    }
}
