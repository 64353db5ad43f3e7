//! Rust versus CUDA C++ (issue 7): runs every kernel of `bench-kernels` twice in one
//! process, once from the PTX `lookahead-builder` compiled from Rust and once from its CUDA
//! C++ twin (`bench-kernels/cuda/twins.cu`) compiled now by NVRTC at `-O3` for the device's
//! architecture, in every prefetch-hint variant. Every variant of both is first checked
//! against a CPU reference on fresh random inputs with its outputs poisoned, then timed
//! with CUDA events after a warm-up (the two alternate launch by launch), and the median
//! of the repeats is reported with its spread.
//!
//! Writes `vs_cuda.md` (table), `vs_cuda.csv` (every number) and `vs_cuda.svg` (plot) into
//! `--out`, plus the two PTX modules (`rust.ptx`, `cuda.ptx`) for SASS inspection.
//!
//! `cargo run --release -p lookahead-examples --bin vs_cuda -- --out results`

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use bench_kernels::{Node, BLOCK_SIZE, DIM, SUITE};
use clap::Parser;
use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use lookahead::Gpu;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Res<T> = Result<T, Box<dyn Error>>;

#[derive(Parser)]
#[command(about = "Rust-built PTX versus CUDA C++ (NVRTC) on the same kernels and hints")]
struct Args {
    /// Folder for vs_cuda.{md,csv,svg} and the PTX.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Timed launches per variant and language.
    #[arg(long, default_value_t = 30)]
    reps: usize,
    /// Untimed launches per variant and language before timing.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Random seed (default: a fresh one each run).
    #[arg(long)]
    seed: Option<u64>,
    /// Multiplies every problem size (1.0: all inputs well over the 50 MB L2).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Only these kernels (comma-separated).
    #[arg(long)]
    only: Option<String>,
}

/// One language's compiled kernels.
enum Lang {
    Rust(lookahead::Module),
    Cuda(Arc<CudaModule>),
}

impl Lang {
    fn function(&self, name: &str) -> Res<CudaFunction> {
        Ok(match self {
            Lang::Rust(m) => m.function(name)?,
            Lang::Cuda(m) => m.load_function(name)?,
        })
    }
}

/// Timing summary of one variant in one language (milliseconds).
#[derive(Clone, Copy, Default)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
    p25: f64,
    p75: f64,
}

fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let x = p * (v.len() - 1) as f64;
        let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
    };
    Stats {
        median: q(0.5),
        min: v[0],
        max: v[v.len() - 1],
        p25: q(0.25),
        p75: q(0.75),
    }
}

/// One row of the results.
struct Row {
    kernel: &'static str,
    variant: &'static str,
    bytes: f64,
    rust: Stats,
    cuda: Stats,
    regs: (i32, i32),
    check: (String, String),
    ok: bool,
}

/// One kernel of the suite on its prepared data.
trait Bench {
    fn kernel(&self) -> &'static str;
    fn cfg(&self) -> LaunchConfig;
    /// Bytes the kernel must move at least (each input read once, each output written).
    fn bytes(&self) -> f64;
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()>;
    /// Poisons the outputs (and resets accumulators) before a checked run.
    fn reset(&mut self, env: &Env) -> Res<()>;
    /// Reads the outputs back and compares them with the CPU reference.
    fn check(&self, env: &Env) -> Res<(bool, String)>;
}

struct Env {
    stream: Arc<CudaStream>,
    sms: u32,
}

impl Env {
    fn upload<T: DeviceRepr>(&self, data: &[T]) -> Res<CudaSlice<T>> {
        Ok(self.stream.clone_htod(data)?)
    }
    fn download<T: DeviceRepr + Default + Clone>(&self, s: &CudaSlice<T>) -> Res<Vec<T>> {
        self.stream.synchronize()?;
        Ok(self.stream.clone_dtoh(s)?)
    }
    fn fill<T: DeviceRepr + Clone>(&self, s: &mut CudaSlice<T>, value: T) -> Res<()> {
        let v = vec![value; s.len()];
        self.stream.memcpy_htod(&v, s)?;
        Ok(())
    }
    /// `blocks_per_sm` blocks of [`BLOCK_SIZE`] per SM: 8 fills an H100 SM (2048 threads).
    fn grid(&self, blocks_per_sm: u32) -> LaunchConfig {
        grid_cfg(self.sms * blocks_per_sm)
    }
}

fn grid_cfg(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK_SIZE, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// ‖got − want‖ / ‖want‖ (want in f64) and how many outputs are not finite (unwritten:
/// outputs are poisoned with NaN first).
fn rel_check(got: &[f32], want: &[f64], tol: f64) -> (bool, String) {
    let bad = got.iter().filter(|g| !g.is_finite()).count();
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (g, w) in got.iter().zip(want) {
        num += (*g as f64 - w) * (*g as f64 - w);
        den += w * w;
    }
    let rel = (num / den.max(1e-300)).sqrt();
    let ok = bad == 0 && got.len() == want.len() && rel < tol;
    (ok, format!("rel err {rel:.1e}, {bad} not written"))
}

/// Fills `out` in parallel over the host's cores: `f(index of out[0], chunk)`.
fn par_fill<T: Send>(out: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let chunk = out.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (k, c) in out.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || f(k * chunk, c));
        }
    });
}

fn rand_f32(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

fn scaled(n: usize, scale: f64) -> usize {
    ((n as f64 * scale) as usize).max(4096)
}

/// Padding (elements) after every buffer a bulk variant reads: its 16-byte cover can end
/// up to 15 bytes past the range.
const PAD: usize = 16;

// ---------------------------------------------------------------------------------------

struct Saxpy {
    n: usize,
    a: f32,
    x: CudaSlice<f32>,
    y: CudaSlice<f32>,
    out: CudaSlice<f32>,
    want: Vec<f64>,
    cfg: LaunchConfig,
}

impl Saxpy {
    fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let n = scaled(64 << 20, scale);
        let a: f32 = rng.gen_range(-2.0..2.0);
        let (mut x, mut y) = (rand_f32(rng, n), rand_f32(rng, n));
        let want = (0..n)
            .map(|i| a as f64 * x[i] as f64 + y[i] as f64)
            .collect();
        x.resize(n + PAD, 0.5);
        y.resize(n + PAD, 0.5);
        Ok(Saxpy {
            n,
            a,
            x: env.upload(&x)?,
            y: env.upload(&y)?,
            out: env.upload(&vec![f32::NAN; n])?,
            want,
            cfg: env.grid(8),
        })
    }
}

impl Bench for Saxpy {
    fn kernel(&self) -> &'static str {
        "saxpy"
    }
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        12.0 * self.n as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let (x, y, o) = (
            addr(&self.x, stream),
            addr(&self.y, stream),
            addr(&self.out, stream),
        );
        let mut l = stream.launch_builder(f);
        l.arg(&self.a).arg(&x).arg(&y).arg(&o).arg(&self.n);
        // SAFETY: (f32, *const f32, *const f32, *mut f32, usize) as the kernel declares.
        unsafe { l.launch(self.cfg) }?;
        Ok(())
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.out, f32::NAN)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        Ok(rel_check(&env.download(&self.out)?, &self.want, 1e-6))
    }
}

struct Reduce {
    n: usize,
    x: CudaSlice<f32>,
    out: CudaSlice<f32>,
    want: f64,
    abs_sum: f64,
    cfg: LaunchConfig,
}

impl Reduce {
    fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let n = scaled(64 << 20, scale);
        let mut x = rand_f32(rng, n);
        let want = x.iter().map(|&v| v as f64).sum();
        let abs_sum = x.iter().map(|&v| (v as f64).abs()).sum();
        x.resize(n + PAD, 0.5);
        Ok(Reduce {
            n,
            x: env.upload(&x)?,
            out: env.upload(&[0.0f32])?,
            want,
            abs_sum,
            cfg: env.grid(8),
        })
    }
}

impl Bench for Reduce {
    fn kernel(&self) -> &'static str {
        "reduce"
    }
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        4.0 * self.n as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let (x, o) = (addr(&self.x, stream), addr(&self.out, stream));
        let mut l = stream.launch_builder(f);
        l.arg(&x).arg(&self.n).arg(&o);
        // SAFETY: (*const f32, usize, *mut f32) as the kernel declares.
        unsafe { l.launch(self.cfg) }?;
        Ok(())
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.out, 0.0)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        let got = env.download(&self.out)?[0] as f64;
        let rel = (got - self.want).abs() / self.abs_sum;
        Ok((
            got.is_finite() && rel < 1e-5,
            format!("sum {got:.3} vs {:.3}, err/sum|x| {rel:.1e}", self.want),
        ))
    }
}

struct Gather {
    n: usize,
    src: CudaSlice<f32>,
    idx: CudaSlice<u32>,
    out: CudaSlice<f32>,
    want: Vec<f32>,
    cfg: LaunchConfig,
}

impl Gather {
    fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let m = scaled(64 << 20, scale);
        let n = scaled(32 << 20, scale);
        let src = rand_f32(rng, m);
        let idx: Vec<u32> = (0..n).map(|_| rng.gen_range(0..m as u32)).collect();
        let want = idx.iter().map(|&i| src[i as usize]).collect();
        Ok(Gather {
            n,
            src: env.upload(&src)?,
            idx: env.upload(&idx)?,
            out: env.upload(&vec![f32::NAN; n])?,
            want,
            cfg: env.grid(8),
        })
    }
}

impl Bench for Gather {
    fn kernel(&self) -> &'static str {
        "gather"
    }
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        12.0 * self.n as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let (s, i, o) = (
            addr(&self.src, stream),
            addr(&self.idx, stream),
            addr(&self.out, stream),
        );
        let mut l = stream.launch_builder(f);
        l.arg(&s).arg(&i).arg(&o).arg(&self.n);
        // SAFETY: (*const f32, *const u32, *mut f32, usize) as the kernel declares.
        unsafe { l.launch(self.cfg) }?;
        Ok(())
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.out, f32::NAN)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        let got = env.download(&self.out)?;
        let wrong = got
            .iter()
            .zip(&self.want)
            .filter(|(g, w)| g.to_bits() != w.to_bits())
            .count();
        Ok((wrong == 0, format!("{wrong} of {} differ", self.n)))
    }
}

struct Spmv {
    rows: usize,
    nnz: usize,
    cols: usize,
    row_ptr: CudaSlice<u32>,
    col: CudaSlice<u32>,
    val: CudaSlice<f32>,
    x: CudaSlice<f32>,
    y: CudaSlice<f32>,
    want: Vec<f64>,
    cfg: LaunchConfig,
}

impl Spmv {
    fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let rows = scaled(1 << 20, scale);
        let cols = 4 << 20;
        let mut row_ptr = Vec::with_capacity(rows + 1);
        row_ptr.push(0u32);
        for _ in 0..rows {
            let len = rng.gen_range(8..=56u32);
            row_ptr.push(row_ptr.last().unwrap() + len);
        }
        let nnz = *row_ptr.last().unwrap() as usize;
        let mut col: Vec<u32> = (0..nnz).map(|_| rng.gen_range(0..cols as u32)).collect();
        let mut val = rand_f32(rng, nnz);
        let x = rand_f32(rng, cols);
        let mut want = vec![0.0f64; rows];
        par_fill(&mut want, |first, chunk| {
            for (k, w) in chunk.iter_mut().enumerate() {
                let r = first + k;
                let (s, e) = (row_ptr[r] as usize, row_ptr[r + 1] as usize);
                *w = (s..e)
                    .map(|j| val[j] as f64 * x[col[j] as usize] as f64)
                    .sum();
            }
        });
        col.resize(nnz + PAD, 0);
        val.resize(nnz + PAD, 0.0);
        Ok(Spmv {
            rows,
            nnz,
            cols,
            row_ptr: env.upload(&row_ptr)?,
            col: env.upload(&col)?,
            val: env.upload(&val)?,
            x: env.upload(&x)?,
            y: env.upload(&vec![f32::NAN; rows])?,
            want,
            cfg: env.grid(8),
        })
    }
}

impl Bench for Spmv {
    fn kernel(&self) -> &'static str {
        "spmv"
    }
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        8.0 * self.nnz as f64 + 8.0 * self.rows as f64 + 4.0 * self.cols as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            addr(&self.row_ptr, stream),
            addr(&self.col, stream),
            addr(&self.val, stream),
            addr(&self.x, stream),
            addr(&self.y, stream),
        ];
        let mut l = stream.launch_builder(f);
        l.arg(&self.rows);
        for a in &p {
            l.arg(a);
        }
        // SAFETY: (usize, *const u32, *const u32, *const f32, *const f32, *mut f32).
        unsafe { l.launch(self.cfg) }?;
        Ok(())
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.y, f32::NAN)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        Ok(rel_check(&env.download(&self.y)?, &self.want, 1e-5))
    }
}

struct Ivf {
    lists: usize,
    total: usize,
    list_off: CudaSlice<u32>,
    vecs: CudaSlice<f32>,
    query: CudaSlice<f32>,
    dist: CudaSlice<f32>,
    list_min: CudaSlice<u32>,
    want: Vec<f64>,
    want_min: Vec<f64>,
    cfg: LaunchConfig,
}

impl Ivf {
    fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let lists = scaled(2048, scale);
        let mut list_off = Vec::with_capacity(lists + 1);
        list_off.push(0u32);
        for _ in 0..lists {
            let len = rng.gen_range(256..=768u32);
            list_off.push(list_off.last().unwrap() + len);
        }
        let total = *list_off.last().unwrap() as usize;
        let mut vecs = rand_f32(rng, total * DIM);
        let query = rand_f32(rng, DIM);
        let mut want = vec![0.0f64; total];
        par_fill(&mut want, |first, chunk| {
            for (k, w) in chunk.iter_mut().enumerate() {
                let v = &vecs[(first + k) * DIM..(first + k + 1) * DIM];
                *w = v
                    .iter()
                    .zip(&query)
                    .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
                    .sum();
            }
        });
        let want_min = (0..lists)
            .map(|l| {
                want[list_off[l] as usize..list_off[l + 1] as usize]
                    .iter()
                    .copied()
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        vecs.resize(total * DIM + PAD, 0.0);
        Ok(Ivf {
            lists,
            total,
            list_off: env.upload(&list_off)?,
            vecs: env.upload(&vecs)?,
            query: env.upload(&query)?,
            dist: env.upload(&vec![f32::NAN; total])?,
            list_min: env.upload(&vec![u32::MAX; lists])?,
            want,
            want_min,
            cfg: grid_cfg(lists as u32),
        })
    }
}

impl Bench for Ivf {
    fn kernel(&self) -> &'static str {
        "ivf"
    }
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        (self.total * DIM * 4 + self.total * 4) as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            addr(&self.list_off, stream),
            addr(&self.vecs, stream),
            addr(&self.query, stream),
            addr(&self.dist, stream),
            addr(&self.list_min, stream),
        ];
        let mut l = stream.launch_builder(f);
        l.arg(&self.lists);
        for a in &p {
            l.arg(a);
        }
        // SAFETY: (usize, *const u32, *const f32, *const f32, *mut f32, *mut u32).
        unsafe { l.launch(self.cfg) }?;
        Ok(())
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.dist, f32::NAN)?;
        env.fill(&mut self.list_min, u32::MAX)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        let (ok_d, d) = rel_check(&env.download(&self.dist)?, &self.want, 1e-5);
        let mins: Vec<f32> = env
            .download(&self.list_min)?
            .into_iter()
            .map(f32::from_bits)
            .collect();
        let (ok_m, m) = rel_check(&mins, &self.want_min, 1e-5);
        Ok((ok_d && ok_m, format!("dist {d}; list min {m}")))
    }
}

struct Chase {
    chains: usize,
    steps: u32,
    /// [`Node`]s as (next, value bits) pairs of u32.
    nodes: CudaSlice<u32>,
    starts: CudaSlice<u32>,
    out: CudaSlice<f32>,
    want: Vec<f64>,
    cfg: LaunchConfig,
}

impl Chase {
    fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let count = scaled(32 << 20, scale);
        // One random cycle through all nodes (Sattolo's shuffle), so no chain gets stuck
        // in a short cycle that would stay in cache.
        let mut perm: Vec<u32> = (0..count as u32).collect();
        for i in (1..count).rev() {
            let j = rng.gen_range(0..i);
            perm.swap(i, j);
        }
        let mut nodes = vec![Node { next: 0, val: 0.0 }; count];
        for i in 0..count {
            nodes[perm[i] as usize] = Node {
                next: perm[(i + 1) % count],
                val: rng.gen_range(-1.0..1.0),
            };
        }
        drop(perm);
        let chains = env.sms as usize * 2048;
        let steps = 64u32;
        let starts: Vec<u32> = (0..chains)
            .map(|_| rng.gen_range(0..count as u32))
            .collect();
        let mut want = vec![0.0f64; chains];
        par_fill(&mut want, |first, chunk| {
            for (k, w) in chunk.iter_mut().enumerate() {
                let mut cur = starts[first + k] as usize;
                let mut acc = 0.0f32;
                for _ in 0..steps {
                    acc += nodes[cur].val;
                    cur = nodes[cur].next as usize;
                }
                *w = acc as f64;
            }
        });
        let flat: Vec<u32> = nodes
            .iter()
            .flat_map(|n| [n.next, n.val.to_bits()])
            .collect();
        Ok(Chase {
            chains,
            steps,
            nodes: env.upload(&flat)?,
            starts: env.upload(&starts)?,
            out: env.upload(&vec![f32::NAN; chains])?,
            want,
            cfg: grid_cfg(chains.div_ceil(BLOCK_SIZE as usize) as u32),
        })
    }
}

impl Bench for Chase {
    fn kernel(&self) -> &'static str {
        "chase"
    }
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        (self.chains * self.steps as usize * 8 + self.chains * 8) as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let (n, s, o) = (
            addr(&self.nodes, stream),
            addr(&self.starts, stream),
            addr(&self.out, stream),
        );
        let mut l = stream.launch_builder(f);
        l.arg(&n).arg(&s).arg(&self.chains).arg(&self.steps).arg(&o);
        // SAFETY: (*const Node, *const u32, usize, u32, *mut f32) as the kernel declares.
        unsafe { l.launch(self.cfg) }?;
        Ok(())
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.out, f32::NAN)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        Ok(rel_check(&env.download(&self.out)?, &self.want, 1e-6))
    }
}

/// The raw device address of a buffer: launches take plain addresses, so none of
/// cudarc's stream bookkeeping lands between the timing events and the kernel.
fn addr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

// ---------------------------------------------------------------------------------------

/// Checks and times every variant of one kernel in both languages.
fn run_bench(
    env: &mut Env,
    b: &mut dyn Bench,
    langs: &[Lang; 2],
    args: &Args,
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
        let entry = format!("{kernel}_{variant}");
        let f = [langs[0].function(&entry)?, langs[1].function(&entry)?];
        let mut check = [String::new(), String::new()];
        let mut ok = true;
        for k in 0..2 {
            b.reset(env)?;
            b.launch(&env.stream, &f[k])?;
            env.stream.synchronize()?;
            let (good, detail) = b.check(env)?;
            ok &= good;
            check[k] = format!("{}: {detail}", if good { "PASS" } else { "FAIL" });
        }
        for _ in 0..args.warmup {
            b.launch(&env.stream, &f[0])?;
            b.launch(&env.stream, &f[1])?;
        }
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut events = Vec::with_capacity(args.reps);
        for rep in 0..args.reps {
            // Alternate which language goes first, so neither always follows the other.
            let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
            let mut pair: [Option<(cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)>; 2] =
                [None, None];
            for k in order {
                let (s, e) = (ctx.new_event(timing)?, ctx.new_event(timing)?);
                s.record(&env.stream)?;
                b.launch(&env.stream, &f[k])?;
                e.record(&env.stream)?;
                pair[k] = Some((s, e));
            }
            events.push(pair);
        }
        env.stream.synchronize()?;
        let mut times = [Vec::new(), Vec::new()];
        for pair in &events {
            for k in 0..2 {
                let (s, e) = pair[k].as_ref().ok_or("missing event")?;
                times[k].push(s.elapsed_ms(e)? as f64);
            }
        }
        let [tr, tc] = times;
        let row = Row {
            kernel,
            variant,
            bytes: b.bytes(),
            rust: stats(tr),
            cuda: stats(tc),
            regs: (f[0].num_regs()?, f[1].num_regs()?),
            check: (check[0].clone(), check[1].clone()),
            ok,
        };
        println!(
            "  {:<7} {:<8} rust {:>8.4} ms  cuda {:>8.4} ms  rust/cuda {:>5.3}  regs {}/{}  {}",
            kernel,
            variant,
            row.rust.median,
            row.cuda.median,
            row.rust.median / row.cuda.median,
            row.regs.0,
            row.regs.1,
            if ok { "checks pass" } else { "CHECK FAILED" }
        );
        if !ok {
            println!("    rust {}\n    cuda {}", row.check.0, row.check.1);
        }
        rows.push(row);
    }
    Ok(rows)
}

fn ptx_version(ptx: &str) -> String {
    ptx.lines()
        .find_map(|l| l.trim().strip_prefix(".version "))
        .unwrap_or("?")
        .trim()
        .to_string()
}

/// The kernel module version of the NVIDIA driver (such as `580.159.04`), where Linux
/// shows it: the first dotted number in `/proc/driver/nvidia/version`.
fn driver_release() -> String {
    std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .find(|w| {
                    w.split('.').count() >= 2
                        && w.split('.')
                            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                })
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into())
}

struct Meta {
    device: String,
    driver: String,
    rust_ptx: String,
    cuda_ptx: String,
    nvrtc: String,
    seed: u64,
    reps: usize,
    warmup: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e @ (lookahead::Error::NoDriver | lookahead::Error::NoDevice { .. })) => {
            println!("No CUDA GPU here: {e}. Nothing was run, compiled by NVRTC or checked.");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&gpu, &args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("some checks FAILED (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(gpu: &Gpu, args: &Args) -> Res<bool> {
    let ctx = gpu.context().clone();
    let cc = gpu.compute_capability();
    let sms = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let (dmaj, dmin) = gpu.driver_version()?;
    let (rust_arch, rust_ptx) = bench_kernels::ptx_for(cc).ok_or("no PTX for this GPU")?;
    let rust = gpu.load_ptx(bench_kernels::PTX)?;

    // The CUDA twins, compiled now for the same architecture at -O3.
    let arch: &'static str = Box::leak(format!("compute_{cc}").into_boxed_str());
    let mut options = vec!["-O3".to_string()];
    let compiled = compile_ptx_with_opts(
        bench_kernels::CUDA_TWINS,
        CompileOptions {
            arch: Some(arch),
            options: options.clone(),
            ..Default::default()
        },
    );
    let cuda_ptx = match compiled {
        Ok(p) => p,
        Err(e) => {
            // NVRTC versions that do not take -O3 optimise fully by default.
            println!(
                "  NVRTC does not take -O3 ({e}); its default is full optimisation (-dopt on), used instead"
            );
            options.clear();
            compile_ptx_with_opts(
                bench_kernels::CUDA_TWINS,
                CompileOptions {
                    arch: Some(arch),
                    ..Default::default()
                },
            )?
        }
    };
    let cuda_src = cuda_ptx.to_src();
    let cuda = ctx.load_module(cuda_ptx)?;
    let (mut nmaj, mut nmin) = (0, 0);
    // SAFETY: writes two ints; NVRTC was loaded by the compile above.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut nmaj, &mut nmin) }.result()?;

    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("rust.ptx"), rust_ptx)?;
    std::fs::write(args.out.join("cuda.ptx"), &cuda_src)?;

    let seed = args.seed.unwrap_or_else(rand::random);
    let meta = Meta {
        device: format!("{} (sm_{cc}, {sms} SMs)", gpu.name()),
        driver: format!("{} (CUDA {dmaj}.{dmin})", driver_release()),
        rust_ptx: format!(
            "PTX ISA {} for sm_{rust_arch} by lookahead-builder ({})",
            ptx_version(rust_ptx),
            bench_kernels::PTX_TOOLCHAIN.lines().next().unwrap_or("")
        ),
        cuda_ptx: format!(
            "PTX ISA {} by NVRTC {nmaj}.{nmin}, --gpu-architecture={arch} {}",
            ptx_version(&cuda_src),
            options.join(" ")
        ),
        nvrtc: format!("{nmaj}.{nmin}"),
        seed,
        reps: args.reps,
        warmup: args.warmup,
    };
    println!("vs_cuda: Rust-built PTX versus CUDA C++ twins");
    println!("  device: {}", meta.device);
    println!("  driver: {}", meta.driver);
    println!("  rust:   {}", meta.rust_ptx);
    println!("  cuda:   {}", meta.cuda_ptx);
    println!(
        "  seed {seed}, {} timed launches each after {} warm-up",
        args.reps, args.warmup
    );

    let mut env = Env {
        stream: gpu.stream().clone(),
        sms: sms as u32,
    };
    let langs = [Lang::Rust(rust), Lang::Cuda(cuda)];
    let mut rng = StdRng::seed_from_u64(seed);
    let wanted = |k: &str| {
        args.only
            .as_deref()
            .is_none_or(|o| o.split(',').any(|w| w.trim() == k))
    };
    let mut rows = Vec::new();
    type Make = fn(&Env, &mut StdRng, f64) -> Res<Box<dyn Bench>>;
    let makers: [(&str, Make); 6] = [
        ("saxpy", |e, r, s| Ok(Box::new(Saxpy::new(e, r, s)?))),
        ("reduce", |e, r, s| Ok(Box::new(Reduce::new(e, r, s)?))),
        ("gather", |e, r, s| Ok(Box::new(Gather::new(e, r, s)?))),
        ("spmv", |e, r, s| Ok(Box::new(Spmv::new(e, r, s)?))),
        ("ivf", |e, r, s| Ok(Box::new(Ivf::new(e, r, s)?))),
        ("chase", |e, r, s| Ok(Box::new(Chase::new(e, r, s)?))),
    ];
    for (name, make) in makers {
        if !wanted(name) {
            continue;
        }
        let started = std::time::Instant::now();
        let mut b = make(&env, &mut rng, args.scale)?;
        println!(
            "{name}: inputs ready in {:.1} s, {:.0} MB moved per launch at least, {} blocks of {BLOCK_SIZE}",
            started.elapsed().as_secs_f64(),
            b.bytes() / 1e6,
            b.cfg().grid_dim.0
        );
        rows.extend(run_bench(&mut env, b.as_mut(), &langs, args, &ctx)?);
    }
    let all_ok = rows.iter().all(|r| r.ok);
    write_outputs(&args.out, &meta, &rows)?;
    println!("\n{}", table(&meta, &rows));
    println!(
        "wrote {}/vs_cuda.{{md,csv,svg}}; {} of {} variants pass their checks in both languages",
        args.out.display(),
        rows.iter().filter(|r| r.ok).count(),
        rows.len()
    );
    Ok(all_ok)
}

fn table(meta: &Meta, rows: &[Row]) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "- device: {}", meta.device);
    let _ = writeln!(t, "- driver: {}", meta.driver);
    let _ = writeln!(t, "- Rust: {}", meta.rust_ptx);
    let _ = writeln!(t, "- CUDA C++: {}", meta.cuda_ptx);
    let _ = writeln!(
        t,
        "- median of {} event-timed launches after {} warm-up launches, [min, max]; seed {}\n",
        meta.reps, meta.warmup, meta.seed
    );
    let _ = writeln!(
        t,
        "| kernel | variant | Rust ms [min, max] | CUDA ms [min, max] | Rust / CUDA | Rust vs none | CUDA vs none | Rust GB/s | regs Rust/CUDA | checks |"
    );
    let _ = writeln!(
        t,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for r in rows {
        let base = rows
            .iter()
            .find(|b| b.kernel == r.kernel && b.variant == "none")
            .unwrap_or(r);
        let pct = |x: f64, b: f64| format!("{:+.1}%", (x / b - 1.0) * 100.0);
        let _ = writeln!(
            t,
            "| {} | {} | {:.4} [{:.4}, {:.4}] | {:.4} [{:.4}, {:.4}] | {:.3} | {} | {} | {:.0} | {}/{} | {} |",
            r.kernel,
            r.variant,
            r.rust.median,
            r.rust.min,
            r.rust.max,
            r.cuda.median,
            r.cuda.min,
            r.cuda.max,
            r.rust.median / r.cuda.median,
            pct(r.rust.median, base.rust.median),
            pct(r.cuda.median, base.cuda.median),
            r.bytes / (r.rust.median * 1e-3) / 1e9,
            r.regs.0,
            r.regs.1,
            if r.ok { "pass" } else { "FAIL" }
        );
    }
    t
}

fn write_outputs(out: &Path, meta: &Meta, rows: &[Row]) -> Res<()> {
    let mut md = String::from("# Rust (lookahead-builder) versus CUDA C++ (NVRTC): results\n\n");
    md.push_str("Written by `examples/src/bin/vs_cuda.rs`; explained in [docs/rust-vs-cuda.md](../docs/rust-vs-cuda.md). Plot: [vs_cuda.svg](vs_cuda.svg), every number: [vs_cuda.csv](vs_cuda.csv).\n\n");
    md.push_str(&table(meta, rows));
    md.push_str("\nChecks (first launch of each variant, fresh random inputs, outputs poisoned with NaN):\n\n");
    for r in rows {
        let _ = writeln!(
            md,
            "- {} {}: Rust {}; CUDA {}",
            r.kernel, r.variant, r.check.0, r.check.1
        );
    }
    std::fs::write(out.join("vs_cuda.md"), md)?;

    let mut csv = String::from("kernel,variant,lang,median_ms,min_ms,p25_ms,p75_ms,max_ms,bytes,gb_per_s,regs,check_ok,device,driver,ptx,nvrtc,seed,reps\n");
    for r in rows {
        for (lang, s, regs, ptx) in [
            ("rust", r.rust, r.regs.0, &meta.rust_ptx),
            ("cuda", r.cuda, r.regs.1, &meta.cuda_ptx),
        ] {
            let _ = writeln!(
                csv,
                "{},{},{},{:.5},{:.5},{:.5},{:.5},{:.5},{:.0},{:.1},{},{},\"{}\",\"{}\",\"{}\",{},{},{}",
                r.kernel,
                r.variant,
                lang,
                s.median,
                s.min,
                s.p25,
                s.p75,
                s.max,
                r.bytes,
                r.bytes / (s.median * 1e-3) / 1e9,
                regs,
                r.ok,
                meta.device,
                meta.driver,
                ptx,
                meta.nvrtc,
                meta.seed,
                meta.reps
            );
        }
    }
    std::fs::write(out.join("vs_cuda.csv"), csv)?;
    plot(&out.join("vs_cuda.svg"), meta, rows)
}

/// Bars: each variant's median time over the CUDA no-hint median of the same kernel,
/// Rust and CUDA side by side, with whiskers from min to max.
fn plot(path: &Path, meta: &Meta, rows: &[Row]) -> Res<()> {
    use plotters::prelude::*;
    let base = |r: &Row| {
        rows.iter()
            .find(|b| b.kernel == r.kernel && b.variant == "none")
            .map_or(r.cuda.median, |b| b.cuda.median)
    };
    let ymax = rows
        .iter()
        .map(|r| r.rust.max.max(r.cuda.max) / base(r))
        .fold(1.2f64, f64::max)
        .min(4.0)
        * 1.05;
    let n = rows.len();
    let root = SVGBackend::new(path, (1400, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!(
        "Rust vs CUDA C++ per hint, time / CUDA no-hint time (lower is better) - {}",
        meta.device
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(110)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..ymax)?;
    let labels: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", r.kernel, r.variant))
        .collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .x_label_style(
            ("sans-serif", 11)
                .into_font()
                .transform(FontTransform::Rotate90),
        )
        .y_desc("time / CUDA no-hint time")
        .draw()?;
    let rust_color = RGBColor(222, 110, 40);
    let cuda_color = RGBColor(60, 120, 200);
    for (k, (color, label)) in [
        (rust_color, "Rust (lookahead-builder PTX)"),
        (cuda_color, "CUDA C++ (NVRTC -O3)"),
    ]
    .into_iter()
    .enumerate()
    {
        let bars = rows.iter().enumerate().map(move |(i, r)| {
            let s = if k == 0 { r.rust } else { r.cuda };
            let x0 = i as f64 - 0.4 + 0.4 * k as f64;
            Rectangle::new([(x0, 0.0), (x0 + 0.4, s.median / base(r))], color.filled())
        });
        chart
            .draw_series(bars)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        let whiskers = rows.iter().enumerate().map(move |(i, r)| {
            let s = if k == 0 { r.rust } else { r.cuda };
            let x = i as f64 - 0.2 + 0.4 * k as f64;
            PathElement::new(
                vec![(x, s.min / base(r)), (x, (s.max / base(r)).min(ymax))],
                BLACK,
            )
        });
        chart.draw_series(whiskers)?;
    }
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(-0.5, 1.0), (n as f64 - 0.5, 1.0)],
        BLACK.mix(0.5),
    )))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kernel: &'static str, variant: &'static str, r: f64, c: f64) -> Row {
        let s = |m: f64| Stats {
            median: m,
            min: m * 0.98,
            max: m * 1.03,
            p25: m * 0.99,
            p75: m * 1.01,
        };
        Row {
            kernel,
            variant,
            bytes: 1e9,
            rust: s(r),
            cuda: s(c),
            regs: (16, 18),
            check: ("PASS".into(), "PASS".into()),
            ok: true,
        }
    }

    #[test]
    fn stats_are_order_statistics() {
        let s = stats(vec![5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(
            (s.min, s.p25, s.median, s.p75, s.max),
            (1.0, 2.0, 3.0, 4.0, 5.0)
        );
    }

    #[test]
    fn writes_table_csv_and_plot() {
        let dir = std::env::temp_dir().join(format!("vs_cuda_test_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let meta = Meta {
            device: "test device".into(),
            driver: "test driver".into(),
            rust_ptx: "PTX ISA 8.0".into(),
            cuda_ptx: "PTX ISA 9.0".into(),
            nvrtc: "13.0".into(),
            seed: 1,
            reps: 3,
            warmup: 1,
        };
        let rows = vec![
            row("saxpy", "none", 1.0, 1.0),
            row("saxpy", "l2_d4", 1.1, 1.05),
        ];
        write_outputs(&dir, &meta, &rows).unwrap();
        let md = std::fs::read_to_string(dir.join("vs_cuda.md")).unwrap();
        assert!(md.contains("| saxpy | l2_d4 | 1.1000"), "{md}");
        let csv = std::fs::read_to_string(dir.join("vs_cuda.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 2 * rows.len());
        let svg = std::fs::read_to_string(dir.join("vs_cuda.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("saxpy l2_d4"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
