//! `level = auto, distance = auto` against every candidate measured exhaustively, in one
//! run: for each suite kernel (saxpy, reduce, gather, SpMV, IVF scan as `<kernel>_m_tuned`;
//! the pointer chase's hand-written entries through the same decision logic) and for an
//! embedding bag the tuner was not developed on, every candidate is checked against the
//! CPU reference and timed, then the typed launcher tunes itself on the same inputs; the
//! table says how its choice compares with the best candidate and with the plain entry,
//! and what the tuning cost (launches, time).
//!
//! Decisions go to the tuning cache (`LOOKAHEAD_AUTOTUNE_CACHE`, else the user's cache
//! directory): a second run finds them there and makes no tuning launches (the `decision`
//! column says `Cached`). `--retune` measures again regardless.
//!
//! `cargo run --release -p vs-cuda --bin prefetch_tuner -- --out results`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::PossibleValuesParser;
use clap::Parser;
use lookahead::launch::autotune::AutoTuner;
use lookahead_bench::args::{at_least, float_range, Validate};
use rand::rngs::StdRng;
use rand::SeedableRng;
use vs_cuda::bench::{Make, BENCHES, EXTRA_BENCHES};
use vs_cuda::run::Reps;
use vs_cuda::session::{self, Session};
use vs_cuda::tuner::{self, TunerRow, CHASE_ENTRIES};
use vs_cuda::Res;

/// Every kernel the tuner is measured on.
fn kernels() -> Vec<(&'static str, Make)> {
    BENCHES
        .iter()
        .chain(EXTRA_BENCHES.iter())
        .copied()
        .collect()
}

#[derive(Parser, Debug)]
#[command(
    about = "The prefetch tuner (level = auto, distance = auto) against exhaustive measurement"
)]
struct Args {
    /// Folder for prefetch_tuner.{md,csv}.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Timed launches per candidate.
    #[arg(long, default_value_t = 20, value_parser = at_least(1usize))]
    reps: usize,
    /// Random seed (default: a fresh one each run).
    #[arg(long, value_parser = at_least(0u64))]
    seed: Option<u64>,
    /// Multiplies every problem size (1.0: all inputs well over the 50 MB L2).
    #[arg(long, default_value_t = 1.0, value_parser = float_range(0.0, None))]
    scale: f64,
    /// Measure again even where the decision cache holds a decision.
    #[arg(long)]
    retune: bool,
    /// Only these kernels (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = PossibleValuesParser::new([
            "saxpy", "reduce", "gather", "spmv", "ivf", "chase", "bag"
        ])
    )]
    only: Vec<String>,
}

impl Validate for Args {}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    lookahead_bench::exit_code(start(&args), "Nothing was tuned.")
}

fn start(args: &Args) -> Res<bool> {
    let reps = Reps {
        timed: args.reps,
        warmup: 0,
    };
    let mut session = Session::open(&args.out, args.seed, reps)?;
    let header = session.meta.header.clone();
    println!("prefetch_tuner: the tuner against every candidate measured exhaustively");
    print!("{}", header.markdown());
    let rows = run(&mut session, args)?;
    tuner::write_outputs(&session.out, &header, args.reps, &rows)?;
    println!("\n{}", tuner::table(&rows));
    let met = rows.iter().filter(|r| r.meets_target()).count();
    println!(
        "wrote {}/prefetch_tuner.{{md,csv}}; target met on {met} of {} kernels",
        session.out.path().display(),
        rows.len()
    );
    Ok(rows.iter().all(TunerRow::checks_ok))
}

fn run(s: &mut Session, args: &Args) -> Res<Vec<TunerRow>> {
    println!(
        "- seed {}, {} timed launches per candidate; decisions in {:?}",
        s.meta.seed,
        args.reps,
        AutoTuner::global().decisions().path()
    );
    let (ctx, env) = (s.gpu.context(), &mut s.env);
    let mut rng = StdRng::seed_from_u64(s.meta.seed);
    let mut rows = Vec::new();
    for (name, make) in kernels() {
        if !session::selected(&args.only, name) {
            continue;
        }
        let mut b = make(env, &mut rng, args.scale)?;
        let row = if name == "chase" {
            tuner::measure_hand(
                env,
                b.as_mut(),
                &s.compiled.langs[0],
                &CHASE_ENTRIES,
                args.reps,
                ctx,
            )?
        } else {
            tuner::measure_typed(env, b.as_mut(), args.reps, ctx, args.retune)?
        };
        println!(
            "{name}: {} candidates, best {} {:.4} ms, plain {:.4} ms, tuned {} {:.4} ms after {} \
             launches ({:?})",
            row.candidates.len(),
            row.best().variant,
            row.best().ms.median,
            row.plain_ms(),
            row.chosen,
            row.chosen_ms(),
            row.launches,
            row.origin
        );
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use lookahead_bench::args::try_parse;

    #[test]
    fn arguments_are_checked_before_anything_runs() {
        Args::command().debug_assert();
        let a = try_parse::<Args>(&["--only", "bag,chase", "--reps", "3", "--retune"]).unwrap();
        assert_eq!((a.only.len(), a.reps, a.retune), (2, 3, true));
        assert!(try_parse::<Args>(&["--reps", "0"]).is_err());
        assert!(try_parse::<Args>(&["--only", "fft"]).is_err());
        let names: Vec<&str> = kernels().iter().map(|k| k.0).collect();
        assert_eq!(
            names,
            ["saxpy", "reduce", "gather", "spmv", "ivf", "chase", "bag"]
        );
    }
}
