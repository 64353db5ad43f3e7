//! How fast the CPU emulator runs kernels, so users know what to expect: saxpy (elements per
//! second) and the IVF list scan on a small index (vector floats compared per second), with
//! every host core and with one. Medians of repeated runs after a warm-up; the table goes to
//! stdout and to `--out` (Markdown), whose folder is checked for writing before the runs.
//!
//! `cargo run --release -p emu-speed [-- --out results/emulator_speed.md]`

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use lookahead::emu::Emulator;
use lookahead::launch::LaunchConfig;
use lookahead_bench::args::{at_least, Validate};
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::stats::{median, repeat_after_warmup};
use lookahead_bench::table::Table;
use lookahead_ivf::cpu;
use lookahead_ivf::data::Clusters;
use lookahead_ivf::emulated;
use lookahead_ivf::index::IvfLayout;

type Res<T> = Result<T, Box<dyn Error>>;

#[derive(Parser, Debug)]
#[command(about = "Measure the CPU emulator's speed on saxpy and the IVF scan")]
struct Args {
    /// saxpy elements.
    #[arg(long, default_value_t = 1 << 22, value_parser = at_least(1usize))]
    n: usize,
    /// Timed repetitions (after one warm-up run).
    #[arg(long, default_value_t = 5, value_parser = at_least(1usize))]
    reps: usize,
    /// Write the table to this Markdown file too.
    #[arg(long)]
    out: Option<PathBuf>,
}

impl Validate for Args {}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    lookahead_bench::exit_code(run(&args), "")
}

fn run(args: &Args) -> Res<bool> {
    let out = args.out.as_deref().map(out_file).transpose()?;
    let header = RunHeader::host_only();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut table = Table::new(["kernel", "workers", "work", "median time", "rate"]);
    for workers in [cores, 1] {
        table.push(saxpy_row(args, workers)?);
    }
    let scan = ScanSetup::new();
    for workers in [cores, 1] {
        table.push(scan.row(args, workers)?);
    }
    let build = if cfg!(debug_assertions) {
        "Debug"
    } else {
        "Release"
    };
    let text = format!(
        "# CPU emulator speed\n\n{}\n{build} build; medians of {} runs after a warm-up.\n\n{}\n\
         A GPU runs these kernels thousands of times faster: the emulator is for checking \
         kernel logic (CI, debugging, laptops), not for speed.\n",
        header.markdown(),
        args.reps,
        table.to_markdown()
    );
    print!("{text}");
    if let Some((dir, name)) = out {
        println!("wrote {}", dir.write(&name, &text)?.display());
    }
    Ok(true)
}

/// The folder of the file `path` (created and checked for writing) and the file's name.
fn out_file(path: &Path) -> Res<(OutDir, String)> {
    // Checked now: writing the table over a folder would fail only after every measurement.
    if path.is_dir() {
        return Err(format!(
            "--out {}: is a folder; give the file to write, e.g. {}",
            path.display(),
            path.join("emulator_speed.md").display()
        )
        .into());
    }
    let name = path
        .file_name()
        .ok_or_else(|| format!("--out {}: expected a file name", path.display()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((OutDir::create(dir)?, name.to_string_lossy().into_owned()))
}

/// saxpy, one element per thread, 256 threads per block, checked after every run.
fn saxpy_row(args: &Args, workers: usize) -> Res<[String; 5]> {
    let n = args.n;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let emu = Emulator::new().workers(workers);
    let times = repeat_after_warmup(args.reps, || -> Res<f64> {
        let mut y = vec![1.0f32; n];
        let t = Instant::now();
        demo_kernels::saxpy::launch(&emu, LaunchConfig::for_len(n, 256), 2.0, &x, &mut y)?;
        let s = t.elapsed().as_secs_f64();
        if !y.iter().zip(&x).all(|(y, x)| *y == 2.0 * x + 1.0) {
            return Err("saxpy on the emulator computed a wrong result".into());
        }
        Ok(s)
    })?;
    let m = median(&times).ok_or("no timed runs")?;
    let rate = format!("{:.1} M elements/s", n as f64 / m / 1e6);
    Ok(speed_row(
        "saxpy",
        workers,
        format!("{n} elements"),
        m,
        rate,
    ))
}

/// A row of the table: kernel, workers, work, median time and rate.
fn speed_row(
    kernel: &str,
    workers: usize,
    work: String,
    seconds: f64,
    rate: String,
) -> [String; 5] {
    [
        kernel.into(),
        workers.to_string(),
        work,
        format!("{:.1} ms", seconds * 1e3),
        rate,
    ]
}

/// The IVF scan on a small index: 20 000 vectors of 32 floats in 64 lists, 200 queries,
/// nprobe 4 (the whole pipeline runs; the scan kernel is timed alone).
struct ScanSetup {
    layout: IvfLayout,
    lists: Vec<f32>,
    queries: lookahead_ivf::data::Vectors,
}

impl ScanSetup {
    fn new() -> ScanSetup {
        let spec = Clusters {
            dim: 32,
            clusters: 64,
            spread: 4.0,
            sigma: 1.0,
            seed: 11,
        };
        let data = spec.points(20_000, 0, None);
        let centroids = cpu::kmeans(&spec.points(4000, 1, None), 64, 8, 5);
        let assignment = cpu::assign(&centroids, &data);
        let layout = IvfLayout::from_assignment(32, centroids, &assignment);
        let mut lists = vec![0.0; data.data.len()];
        layout.scatter(&data, &mut lists);
        ScanSetup {
            layout,
            lists,
            queries: spec.points(200, 2, None),
        }
    }

    fn row(&self, args: &Args, workers: usize) -> Res<[String; 5]> {
        let emu = Emulator::new().workers(workers);
        let mut floats = 0;
        let times = repeat_after_warmup(args.reps, || -> Res<f64> {
            let params = emulated::EmulatedParams {
                nprobe: 4,
                chunk_rows: 256,
                hints: false,
                scan_blocks: 16,
                ..emulated::EmulatedParams::default()
            };
            let r = emulated::search(
                &emu,
                &self.layout,
                &self.lists,
                &self.queries,
                params,
                lookahead_uvm::RingQueue::disabled(),
            )?;
            floats = r.scanned_floats;
            Ok(r.scan_seconds)
        })?;
        let m = median(&times).ok_or("no timed runs")?;
        let rate = format!(
            "{:.1} M floats/s ({:.2} M vectors/s)",
            floats as f64 / m / 1e6,
            floats as f64 / 32.0 / m / 1e6
        );
        Ok(speed_row(
            "IVF scan (20k x 32, 64 lists, 200 queries, nprobe 4)",
            workers,
            format!("{floats} floats compared"),
            m,
            rate,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use lookahead_bench::args::try_parse;

    #[test]
    fn arguments_are_checked() {
        Args::command().debug_assert();
        let e = try_parse::<Args>(&["--reps", "0"]).unwrap_err().to_string();
        assert!(
            e.contains("'--reps <REPS>'") && e.contains("at least 1"),
            "{e}"
        );
        let e = try_parse::<Args>(&["--n", "-5"]).unwrap_err().to_string();
        assert!(e.contains("'--n <N>'") && e.contains("at least 1"), "{e}");
        assert_eq!(try_parse::<Args>(&["--reps", "2"]).unwrap().reps, 2);
    }

    #[test]
    fn out_file_is_checked_in_its_folder() {
        let dir = std::env::temp_dir().join(format!("emu_speed_test_{}", std::process::id()));
        let (out, name) = out_file(&dir.join("speed.md")).unwrap();
        assert_eq!((out.path(), name.as_str()), (dir.as_path(), "speed.md"));
        assert!(out_file(Path::new("/")).is_err());
        let e = out_file(&dir).unwrap_err().to_string();
        assert!(
            e.contains("is a folder; give the file to write, e.g.")
                && e.ends_with("emulator_speed.md"),
            "{e}"
        );
        let (here, _) = out_file(Path::new("speed.md")).unwrap();
        assert_eq!(here.path(), Path::new("."));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_small_run_fills_the_table() {
        let args = try_parse::<Args>(&["--n", "4096", "--reps", "1"]).unwrap();
        let row = saxpy_row(&args, 1).unwrap();
        assert_eq!(row[2], "4096 elements");
    }
}
