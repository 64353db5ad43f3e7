//! The benchmarks, one module each: their inputs (random, from the run's seed), launches of
//! every variant, CPU reference and check. What they share is here: the [`Bench`] trait,
//! the device [`Env`], and helpers for inputs, launches and checks.

mod bag;
mod chase;
mod gather;
mod ivf;
pub(crate) mod reduce;
mod saxpy;
mod spmv;

use std::ops::RangeInclusive;
use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg,
};
use lookahead::launch::autotune::Variant;
use rand::rngs::StdRng;
use rand::Rng;
use vs_cuda_kernels::BLOCK_SIZE;

use crate::Res;

/// One kernel of the suite on its prepared data.
pub trait Bench {
    fn kernel(&self) -> &'static str;
    fn cfg(&self) -> LaunchConfig;
    /// Bytes the kernel must move at least (each input read once, each output written).
    fn bytes(&self) -> f64;
    /// Launches a hand-written variant (raw pointers) by its function.
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()>;
    /// Launches a `#[prefetch_next]` variant (`m_*`: each slice a pointer and a length, the
    /// PTX entry `#[kernel]` generates; the CUDA twins take the same) by its function.
    fn launch_m(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let _ = (stream, f);
        Err(format!("{} has no #[prefetch_next] variants", self.kernel()).into())
    }
    /// Launches `<kernel>_m_auto` or `<kernel>_m_tuned` through its typed launcher: the
    /// candidate its tuner picks (`None`) or `variant`.
    fn launch_typed(
        &mut self,
        stream: &Arc<CudaStream>,
        which: Typed,
        variant: Option<Variant>,
    ) -> Res<()> {
        let _ = (stream, variant);
        Err(format!("{} has no {which:?} kernel", self.kernel()).into())
    }
    /// The name the tuner keys `which`'s decisions by: its kernel's.
    fn typed_name(&self, which: Typed) -> String {
        match which {
            Typed::Auto => format!("{}_m_auto", self.kernel()),
            Typed::Tuned => format!("{}_m_tuned", self.kernel()),
        }
    }
    /// The candidate `<kernel>_m_auto`'s or `<kernel>_m_tuned`'s launcher settled on, if it
    /// has, and its candidates.
    fn typed_choice(
        &self,
        stream: &Arc<CudaStream>,
        which: Typed,
    ) -> (Option<Variant>, &'static [Variant]) {
        let _ = (stream, which);
        (None, &[])
    }
    /// Poisons the outputs (and resets accumulators) before a checked run.
    fn reset(&mut self, env: &Env) -> Res<()>;
    /// Reads the outputs back and compares them with the CPU reference.
    fn check(&self, env: &Env) -> Res<(bool, String)>;
}

/// The typed-launcher kernels of a benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typed {
    /// `<kernel>_m_auto`: `level = auto(l2), distance = 4`.
    Auto,
    /// `<kernel>_m_tuned`: `level = auto, distance = auto`.
    Tuned,
}

/// The body of [`Bench::launch_typed`]: `$auto` or `$tuned` (modules of `vs_cuda_kernels`)
/// launched with `($args)`, through `launch` or `launch_variant`.
macro_rules! launch_typed {
    ($which:expr, $variant:expr, $auto:ident, $tuned:ident, ($($arg:expr),*)) => {{
        use vs_cuda_kernels::{$auto, $tuned};
        match ($which, $variant) {
            ($crate::bench::Typed::Auto, None) => $auto::launch($($arg),*)?,
            ($crate::bench::Typed::Auto, Some(v)) => $auto::launch_variant(v, $($arg),*)?,
            ($crate::bench::Typed::Tuned, None) => $tuned::launch($($arg),*)?,
            ($crate::bench::Typed::Tuned, Some(v)) => $tuned::launch_variant(v, $($arg),*)?,
        }
        Ok(())
    }};
}

/// The body of [`Bench::typed_choice`] for the modules `$auto` and `$tuned`.
macro_rules! typed_choice {
    ($which:expr, $stream:expr, $auto:ident, $tuned:ident) => {{
        use vs_cuda_kernels::{$auto, $tuned};
        match $which {
            $crate::bench::Typed::Auto => ($auto::auto_choice($stream), $auto::CANDIDATES),
            $crate::bench::Typed::Tuned => ($tuned::auto_choice($stream), $tuned::CANDIDATES),
        }
    }};
}
pub(crate) use {launch_typed, typed_choice};

/// Makes one benchmark's inputs on the device: `(env, rng, scale)`.
pub type Make = fn(&Env, &mut StdRng, f64) -> Res<Box<dyn Bench>>;

/// Benchmarks of kernels outside the suite (no CUDA twins), for the prefetch tuner.
pub const EXTRA_BENCHES: [(&str, Make); 1] =
    [("bag", |e, r, s| Ok(Box::new(bag::Bag::new(e, r, s)?)))];

/// Every benchmark by kernel name, in the order they run.
pub const BENCHES: [(&str, Make); 6] = [
    ("saxpy", |e, r, s| Ok(Box::new(saxpy::Saxpy::new(e, r, s)?))),
    ("reduce", |e, r, s| {
        Ok(Box::new(reduce::Reduce::new(e, r, s)?))
    }),
    ("gather", |e, r, s| {
        Ok(Box::new(gather::Gather::new(e, r, s)?))
    }),
    ("spmv", |e, r, s| Ok(Box::new(spmv::Spmv::new(e, r, s)?))),
    ("ivf", |e, r, s| Ok(Box::new(ivf::Ivf::new(e, r, s)?))),
    ("chase", |e, r, s| Ok(Box::new(chase::Chase::new(e, r, s)?))),
];

/// The device the benchmarks run on.
pub struct Env {
    pub stream: Arc<CudaStream>,
    pub sms: u32,
}

impl Env {
    pub fn upload<T: DeviceRepr>(&self, data: &[T]) -> Res<CudaSlice<T>> {
        Ok(self.stream.clone_htod(data)?)
    }
    pub fn download<T: DeviceRepr + Default + Clone>(&self, s: &CudaSlice<T>) -> Res<Vec<T>> {
        self.stream.synchronize()?;
        Ok(self.stream.clone_dtoh(s)?)
    }
    pub fn fill<T: DeviceRepr + Clone>(&self, s: &mut CudaSlice<T>, value: T) -> Res<()> {
        let v = vec![value; s.len()];
        self.stream.memcpy_htod(&v, s)?;
        Ok(())
    }
    /// `blocks_per_sm` blocks of [`BLOCK_SIZE`] per SM: 8 fills an H100 SM (2048 threads).
    pub fn grid(&self, blocks_per_sm: u32) -> LaunchConfig {
        grid_cfg(self.sms * blocks_per_sm)
    }
}

pub fn grid_cfg(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK_SIZE, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// ‖got − want‖ / ‖want‖ (want in f64) and how many outputs are not finite (unwritten:
/// outputs are poisoned with NaN first).
pub fn rel_check(got: &[f32], want: &[f64], tol: f64) -> (bool, String) {
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

/// An f32 output checked against a CPU reference in f64 with [`rel_check`], poisoned with
/// NaN before each checked run so that unwritten elements show.
pub struct Checked {
    pub buf: CudaSlice<f32>,
    want: Vec<f64>,
    tol: f64,
}

impl Checked {
    /// The output buffer, as long as `want`, and its reference.
    pub fn new(env: &Env, want: Vec<f64>, tol: f64) -> Res<Checked> {
        Ok(Checked {
            buf: env.upload(&vec![f32::NAN; want.len()])?,
            want,
            tol,
        })
    }
    pub fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.buf, f32::NAN)
    }
    pub fn check(&self, env: &Env) -> Res<(bool, String)> {
        Ok(rel_check(&env.download(&self.buf)?, &self.want, self.tol))
    }
}

/// Fills `out` in parallel over the host's cores: `f(index of out[0], chunk)`.
pub fn par_fill<T: Send>(out: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let chunk = out.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (k, c) in out.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || f(k * chunk, c));
        }
    });
}

pub fn rand_f32(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

/// Offsets of `count` consecutive ranges of random lengths in `lens`: `count + 1` values
/// from 0 (CSR row pointers, IVF list offsets).
pub fn random_offsets(rng: &mut StdRng, count: usize, lens: RangeInclusive<u32>) -> Vec<u32> {
    let mut off = Vec::with_capacity(count + 1);
    off.push(0u32);
    for _ in 0..count {
        let len = rng.gen_range(lens.clone());
        off.push(off[off.len() - 1] + len);
    }
    off
}

pub fn scaled(n: usize, scale: f64) -> usize {
    ((n as f64 * scale) as usize).max(4096)
}

/// Padding (elements) after every buffer a bulk variant reads: its 16-byte cover can end
/// up to 15 bytes past the range.
pub const PAD: usize = 16;

/// The raw device address of a buffer: launches take plain addresses, so none of
/// cudarc's stream bookkeeping lands between the timing events and the kernel.
pub fn addr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

/// Launches `f` with `count` and then `ptrs` as its parameters (the raw-pointer kernels
/// that take a count first: SpMV's rows, the IVF scan's lists).
///
/// # Safety
/// `f`'s parameters must be exactly a `usize` and these addresses, in this order, each
/// valid for what the kernel does with it.
pub unsafe fn launch_counted(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    count: usize,
    ptrs: &[u64],
) -> Res<()> {
    let mut l = stream.launch_builder(f);
    l.arg(&count);
    for p in ptrs {
        l.arg(p);
    }
    l.launch(cfg)?;
    Ok(())
}

/// Launches `f` with `slices` as its parameters, each lowered to a pointer and a length as
/// `#[kernel]` lowers `&[T]` / `&mut [T]`.
///
/// # Safety
/// `f`'s parameters must be exactly these slices, in this order, each pointer valid for its
/// length.
pub unsafe fn launch_slices(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    slices: &[(u64, usize)],
) -> Res<()> {
    let mut l = stream.launch_builder(f);
    for (ptr, len) in slices {
        l.arg(ptr).arg(len);
    }
    l.launch(cfg)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn rel_check_counts_unwritten_outputs() {
        let (ok, detail) = rel_check(&[1.0, 2.0], &[1.0, 2.0], 1e-6);
        assert!(ok, "{detail}");
        let (ok, detail) = rel_check(&[1.0, f32::NAN], &[1.0, 2.0], 1e-6);
        assert!(!ok);
        assert!(detail.ends_with("1 not written"), "{detail}");
        assert!(
            !rel_check(&[1.0], &[1.0, 2.0], 1e-6).0,
            "a short output fails"
        );
        assert!(!rel_check(&[1.1, 2.0], &[1.0, 2.0], 1e-6).0);
    }

    #[test]
    fn par_fill_covers_every_element_once() {
        let mut v = vec![0usize; 1001];
        par_fill(&mut v, |first, chunk| {
            for (k, x) in chunk.iter_mut().enumerate() {
                *x += first + k;
            }
        });
        assert!(v.iter().enumerate().all(|(i, x)| *x == i));
    }

    #[test]
    fn offsets_are_prefix_sums_of_lengths_in_range() {
        let off = random_offsets(&mut StdRng::seed_from_u64(1), 100, 8..=56);
        assert_eq!((off.len(), off[0]), (101, 0));
        assert!(off.windows(2).all(|w| (8..=56).contains(&(w[1] - w[0]))));
        assert_eq!(scaled(1 << 20, 0.5), 1 << 19);
        assert_eq!(scaled(1 << 20, 1e-9), 4096, "never below 4096");
    }

    #[test]
    fn benches_are_the_suite() {
        let names: Vec<&str> = BENCHES.iter().map(|(n, _)| *n).collect();
        let suite: Vec<&str> = vs_cuda_kernels::SUITE.iter().map(|(k, _)| *k).collect();
        assert_eq!(names, suite);
    }
}
