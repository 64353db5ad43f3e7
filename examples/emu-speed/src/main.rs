//! How fast the CPU emulator runs kernels, so users know what to expect: saxpy (elements per
//! second) and the IVF list scan on a small index (vector floats compared per second), with
//! every host core and with one. Medians of repeated runs after a warm-up; the table goes to
//! stdout and to `--out` (Markdown).
//!
//! `cargo run --release -p emu-speed [-- --out results/emulator_speed.md]`

use std::time::Instant;

use clap::Parser;
use lookahead::emu::Emulator;
use lookahead::launch::LaunchConfig;
use lookahead_ivf::cpu;
use lookahead_ivf::data::Clusters;
use lookahead_ivf::emulated;
use lookahead_ivf::index::IvfLayout;

#[derive(Parser)]
#[command(about = "Measure the CPU emulator's speed on saxpy and the IVF scan")]
struct Args {
    /// saxpy elements.
    #[arg(long, default_value_t = 1 << 22)]
    n: usize,
    /// Timed repetitions (after one warm-up run).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Write the table here too.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mut table = format!(
        "# CPU emulator speed\n\nHost: {cpu_model}, {cores} core(s). Release build; medians of {} runs after a warm-up.\n\
         Command: `cargo run --release -p emu-speed`\n\n\
         | kernel | workers | work | median time | rate |\n| --- | --- | --- | --- | --- |\n",
        args.reps
    );

    // saxpy: one element per thread, 256 threads per block.
    let n = args.n;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    for workers in [cores, 1] {
        let emu = Emulator::new().workers(workers);
        let mut times = Vec::new();
        for rep in 0..=args.reps {
            let mut y = vec![1.0f32; n];
            let t = Instant::now();
            demo_kernels::saxpy::launch(&emu, LaunchConfig::for_len(n, 256), 2.0, &x, &mut y)?;
            let s = t.elapsed().as_secs_f64();
            assert!(
                y.iter().zip(&x).all(|(y, x)| *y == 2.0 * x + 1.0),
                "saxpy is wrong"
            );
            if rep > 0 {
                times.push(s);
            }
        }
        let m = median(times);
        table += &format!(
            "| saxpy | {workers} | {n} elements | {:.1} ms | {:.1} M elements/s |\n",
            m * 1e3,
            n as f64 / m / 1e6
        );
    }

    // The IVF scan on a small index: 20 000 vectors of 32 floats in 64 lists, 200 queries,
    // nprobe 4 (the whole pipeline runs; the scan kernel is timed alone).
    let spec = Clusters {
        dim: 32,
        clusters: 64,
        spread: 4.0,
        sigma: 1.0,
        seed: 11,
    };
    let data = spec.points(20_000, 0, None);
    let centroids = cpu::kmeans(&spec.points(4000, 1, None), 64, 8, 5);
    let layout = IvfLayout::from_assignment(32, centroids.clone(), &cpu::assign(&centroids, &data));
    let mut lists = vec![0.0; data.data.len()];
    layout.scatter(&data, &mut lists);
    let queries = spec.points(200, 2, None);
    for workers in [cores, 1] {
        let emu = Emulator::new().workers(workers);
        let mut times = Vec::new();
        let mut floats = 0;
        for rep in 0..=args.reps {
            let params = emulated::EmulatedParams {
                nprobe: 4,
                chunk_rows: 256,
                hints: false,
                scan_blocks: 16,
                ..emulated::EmulatedParams::default()
            };
            let r = emulated::search(
                &emu,
                &layout,
                &lists,
                &queries,
                params,
                lookahead_uvm::RingQueue::disabled(),
            )?;
            floats = r.scanned_floats;
            if rep > 0 {
                times.push(r.scan_seconds);
            }
        }
        let m = median(times);
        table += &format!(
            "| IVF scan (20k x 32, 64 lists, 200 queries, nprobe 4) | {workers} | {floats} floats compared | {:.1} ms | {:.1} M floats/s ({:.2} M vectors/s) |\n",
            m * 1e3,
            floats as f64 / m / 1e6,
            floats as f64 / 32.0 / m / 1e6
        );
    }
    table += "\nA GPU runs these kernels thousands of times faster: the emulator is for checking \
              kernel logic (CI, debugging, laptops), not for speed.\n";
    print!("{table}");
    if let Some(path) = args.out {
        std::fs::write(&path, &table)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
