//! `*out += sum(x)`: grid-stride, warp shuffles, one atomic per warp.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use lookahead::launch::autotune::Variant;
use lookahead_bench::exact_sum::{self, SumInput};
use rand::rngs::StdRng;
use rand::Rng;

use super::{addr, launch_slices, launch_typed, scaled, typed_choice, Bench, Env, Typed, PAD};
use crate::Res;

pub struct Reduce {
    n: usize,
    x: CudaSlice<f32>,
    out: CudaSlice<f32>,
    /// The exact sum of `x[..n]`.
    want: u32,
    cfg: LaunchConfig,
}

/// The reduction's input: 64M elements at scale 1 whose f32 sum is exact in any order
/// ([`exact_sum`]), so every variant's result must equal the reference bit for bit.
pub(crate) fn input(rng: &mut StdRng, scale: f64) -> SumInput {
    exact_sum::input(scaled(64 << 20, scale), |k| rng.gen_range(0..k))
}

impl Reduce {
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let SumInput { values: mut x, sum } = input(rng, scale);
        let n = x.len();
        // Past the range: a variant that reads the padding adds a half and fails the check.
        x.resize(n + PAD, 0.5);
        Ok(Reduce {
            n,
            x: env.upload(&x)?,
            out: env.upload(&[0.0f32])?,
            want: sum,
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
    fn launch_m(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            (addr(&self.x, stream), self.n),
            (addr(&self.out, stream), 1),
        ];
        // SAFETY: (x: &[f32], out: &mut [f32]).
        unsafe { launch_slices(stream, f, self.cfg, &p) }
    }
    fn launch_typed(
        &mut self,
        stream: &Arc<CudaStream>,
        which: Typed,
        v: Option<Variant>,
    ) -> Res<()> {
        let x = self.x.slice(0..self.n);
        let (cfg, out) = (self.cfg, &mut self.out);
        launch_typed!(
            which,
            v,
            reduce_m_auto,
            reduce_m_tuned,
            (stream, cfg, &x, out)
        )
    }
    fn typed_choice(
        &self,
        stream: &Arc<CudaStream>,
        which: Typed,
    ) -> (Option<Variant>, &'static [Variant]) {
        typed_choice!(which, stream, reduce_m_auto, reduce_m_tuned)
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.out, 0.0)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        Ok(exact_sum::check(env.download(&self.out)?[0], self.want))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use vs_cuda_kernels::BLOCK_SIZE;

    /// At a sixteenth of the benchmark's size (4M; the full 64M is 0s and 1s the same way)
    /// and its grid on an H100 (132 SMs x 8 blocks of 256: 15 grid-stride passes and a
    /// partial one), the result in the kernels' order passes the check and the same result
    /// without one pass (270 336 elements) or one block fails it.
    #[test]
    fn the_check_is_exact_and_catches_a_missing_pass_or_block() {
        let data = input(&mut StdRng::seed_from_u64(5), 1.0 / 16.0);
        assert_eq!(data.values.len(), 4 << 20);
        let threads = 132 * 8 * BLOCK_SIZE as usize;
        let sum = |left_out: &dyn Fn(usize) -> bool| {
            exact_sum::grid_stride_sum(&data.values, threads, left_out)
        };
        let (ok, detail) = exact_sum::check(sum(&|_| false), data.sum);
        assert!(ok, "{detail}");
        let (ok, detail) = exact_sum::check(sum(&|i| i / threads == 10), data.sum);
        assert!(!ok, "a missing grid-stride pass passed: {detail}");
        let (ok, detail) = exact_sum::check(sum(&|i| (i % threads) / 256 == 7), data.sum);
        assert!(!ok, "a missing block passed: {detail}");
    }
}
