//! A row gather over a table in managed memory under every Unified Memory policy: each
//! policy set up once (outside the times), then `--reps` times a cold gather (every page
//! moved back to the host first) and a warm one right after, each checked against the CPU
//! reference on random inputs. Prints a table (device, driver, policy, times); with `--out`,
//! writes it to `uvm_gather.md` and `uvm_gather.csv` there.
//!
//! `cargo run --release -p uvm-gather -- --mib 1024 --out results`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use lookahead::Gpu;
use lookahead_bench::args::{at_least, Validate};
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::stats::{gb_per_s, median_range, Summary};
use lookahead_bench::table::{Align, Table};
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig, UvmRuntime};
use rand::rngs::StdRng;
use rand::SeedableRng;
use uvm_gather::gpu::{GpuGather, Outcome};
use uvm_gather::{cpu_gather, first_mismatch, random_picks, random_table, Shape};
use uvm_gather_kernels::{STAT_MOVED, STAT_READY, STAT_TIMED_OUT, STAT_WENT_AHEAD};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Parser, Debug)]
#[command(about = "A row gather over managed memory under every Unified Memory policy")]
struct Args {
    /// MiB of table in managed memory.
    #[arg(long, default_value_t = 1024, value_parser = at_least(1usize))]
    mib: usize,
    /// Words (4 bytes) per row.
    #[arg(long, default_value_t = 1024, value_parser = at_least(1usize))]
    row_words: usize,
    /// Rows per tile: the ranges the policies move, ask for or pull.
    #[arg(long, default_value_t = 16, value_parser = at_least(1usize))]
    tile_rows: usize,
    /// Rows gathered per run, drawn uniformly at random.
    #[arg(long, default_value_t = 16384, value_parser = at_least(1usize))]
    picks: usize,
    /// Cold and warm gathers per policy.
    #[arg(long, default_value_t = 3, value_parser = at_least(1usize))]
    reps: usize,
    /// The policies, comma-separated (`auto` included).
    #[arg(long, value_delimiter = ',', default_values = [
        "faults", "kernel-hints", "prefetch-all", "host-selected", "gpu-requests",
        "remote-map", "gpu-pull", "auto",
    ])]
    policies: Vec<Policy>,
    /// Random seed (default: a fresh one each run).
    #[arg(long)]
    seed: Option<u64>,
    /// Folder to write uvm_gather.md and uvm_gather.csv into (default: print only).
    #[arg(long)]
    out: Option<PathBuf>,
}

impl Validate for Args {
    fn validate(&self) -> Result<(), String> {
        if self.policies.is_empty() {
            return Err("--policies: name at least one".into());
        }
        self.shape().map(|_| ())
    }
}

impl Args {
    fn shape(&self) -> Result<Shape, String> {
        let rows = (self.mib << 20) / (self.row_words.saturating_mul(4)).max(1);
        Shape::new(rows.max(1), self.row_words, self.tile_rows)
    }
}

/// One policy's measurements.
struct Row {
    policy: Policy,
    /// The first cold gather (its policy, counters).
    cold: Outcome,
    /// The first warm gather's counters.
    warm_stats: [u32; uvm_gather_kernels::STATS],
    cold_s: Summary,
    warm_s: Summary,
    correct: bool,
}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    lookahead_bench::exit_code(run(&args), "Nothing was measured.")
}

fn run(args: &Args) -> Res<bool> {
    let out = args.out.as_ref().map(OutDir::create).transpose()?;
    let gpu = Gpu::new(0)?;
    let header = RunHeader::for_gpu(&gpu)?;
    let shape = args.shape()?;
    let (free, _) = gpu.memory_info()?;
    // The table, its pull cache, the output and the pull cache's headroom.
    let need = 2 * shape.words() * 4 + args.picks * shape.row_words * 4;
    if need + lookahead_uvm::setup::PULL_CACHE_HEADROOM > free {
        return Err(format!(
            "a {} MiB table needs {} MiB of free GPU memory with its pull cache; {} MiB are \
             free: lower --mib or --picks",
            args.mib,
            (need + lookahead_uvm::setup::PULL_CACHE_HEADROOM) >> 20,
            free >> 20
        )
        .into());
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let mut rng = StdRng::seed_from_u64(seed);
    let table = random_table(shape, &mut rng);
    let picks = random_picks(args.picks, shape.rows, &mut rng);
    let want = cpu_gather(&table, shape.row_words, &picks);
    let rt = UvmRuntime::new(
        &gpu,
        shape.tiles(),
        MachineProfile::cached_or_probe(&gpu)?,
        ServiceConfig::default(),
    )?;
    let gather = GpuGather::new(&gpu, shape, &table, &picks)?;
    drop(table);
    let mut bench = Bench {
        gather,
        rt: &rt,
        reps: args.reps,
        want: &want,
        row_words: shape.row_words,
    };
    let resident = bench.resident_times()?;
    let mut rows = Vec::new();
    for &policy in &args.policies {
        rows.push(bench.measure(policy)?);
    }
    let gather = bench.gather;
    let meta = format!(
        "{}- table: {} MiB, {} rows of {} bytes in {} tiles of {} rows; {} rows gathered \
         ({:.1} MiB in their tiles); seed {seed}\n- each cell: median [min, max] of {} \
         gathers, wall time of the policy's host work and the kernel; cold after moving \
         every page to the host (and emptying the pull cache), warm right after; resident \
         (everything on the GPU, faults): {} ms\n",
        header.markdown(),
        (shape.words() * 4) >> 20,
        shape.rows,
        shape.row_words * 4,
        shape.tiles(),
        shape.tile_rows,
        args.picks,
        gather.needed_bytes() as f64 / (1u64 << 20) as f64,
        args.reps,
        median_range(&resident, 1e3, 3),
    );
    let tables = tables(&header, &rows, gather.needed_bytes());
    let md = format!("{meta}\n{}", tables.to_markdown());
    println!("{md}");
    if let Some(out) = out {
        out.write(
            "uvm_gather.md",
            format!("# Row gather under every Unified Memory policy\n\nWritten by `examples/uvm-gather/src/main.rs`.\n\n{md}"),
        )?;
        out.write("uvm_gather.csv", tables.to_csv()?)?;
        println!("wrote {}/uvm_gather.{{md,csv}}", out.path().display());
    }
    Ok(rows.iter().all(|r| r.correct))
}

/// The gather and what its runs are checked against.
struct Bench<'a> {
    gather: GpuGather,
    rt: &'a UvmRuntime,
    reps: usize,
    /// The CPU reference's output.
    want: &'a [u32],
    row_words: usize,
}

impl Bench<'_> {
    /// The times of warm gathers with every page on the GPU (unmapped, faults), after one
    /// checked warm-up.
    fn resident_times(&mut self) -> Res<Summary> {
        self.gather.table_mut().make_resident()?;
        let mut times = Vec::new();
        for rep in 0..=self.reps {
            let got = self.gather.run(Policy::Faults, self.rt)?;
            self.check(&got, "resident")?;
            if rep > 0 {
                times.push(got.seconds);
            }
        }
        Ok(Summary::of(&times).ok_or("no repetitions")?)
    }

    /// `reps` cold and warm gathers under `policy`, set up first (outside the times).
    fn measure(&mut self, policy: Policy) -> Res<Row> {
        self.gather.table_mut().prepare(policy)?;
        let (mut cold, mut warm) = (Vec::new(), Vec::new());
        let mut first = None;
        let mut correct = true;
        for _ in 0..self.reps {
            self.gather.table_mut().evict_to_host(self.rt)?;
            let c = self.gather.run(policy, self.rt)?;
            let w = self.gather.run(policy, self.rt)?;
            for (o, pass) in [(&c, "cold"), (&w, "warm")] {
                if let Err(e) = self.check(o, pass) {
                    eprintln!("error: {e}");
                    correct = false;
                }
            }
            cold.push(c.seconds);
            warm.push(w.seconds);
            first.get_or_insert((c, w.stats));
        }
        let (cold_first, warm_stats) = first.ok_or("no repetitions")?;
        Ok(Row {
            policy,
            cold: cold_first,
            warm_stats,
            cold_s: Summary::of(&cold).ok_or("no repetitions")?,
            warm_s: Summary::of(&warm).ok_or("no repetitions")?,
            correct,
        })
    }

    /// Whether `got` is the CPU reference's output, or where it first differs.
    fn check(&self, got: &Outcome, pass: &str) -> Res<()> {
        match first_mismatch(&got.rows, self.want, self.row_words) {
            None => Ok(()),
            Some(m) => Err(format!(
                "{pass} gather under {} differs from the CPU reference: {m:?}",
                got.policy
            )
            .into()),
        }
    }
}

/// The table of every policy, with the device and driver in each row (for the CSV).
fn tables(header: &RunHeader, rows: &[Row], needed: u64) -> Table {
    let device = header.device.as_ref();
    let (name, driver) = (
        device.map_or("none".into(), |d| d.describe()),
        device.map_or("none".into(), |d| d.driver()),
    );
    let mut t = Table::new([
        "device",
        "driver",
        "policy",
        "ran",
        "cold ms",
        "cold GB/s",
        "warm ms",
        "rows ready / went ahead / timed out (cold)",
        "tiles moved (cold / warm)",
        "same as CPU",
    ]);
    for c in [4, 5, 6] {
        t = t.align(c, Align::Right);
    }
    for r in rows {
        let s = &r.cold.stats;
        t.push([
            name.clone(),
            driver.clone(),
            r.policy.name().to_string(),
            r.cold.policy.name().to_string(),
            median_range(&r.cold_s, 1e3, 3),
            format!("{:.1}", gb_per_s(needed as f64, r.cold_s.median)),
            median_range(&r.warm_s, 1e3, 3),
            format!(
                "{} / {} / {}",
                s[STAT_READY], s[STAT_WENT_AHEAD], s[STAT_TIMED_OUT]
            ),
            format!("{} / {}", s[STAT_MOVED], r.warm_stats[STAT_MOVED]),
            if r.correct { "yes" } else { "NO" }.to_string(),
        ]);
    }
    t
}
