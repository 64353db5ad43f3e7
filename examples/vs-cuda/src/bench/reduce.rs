//! `*out += sum(x)`: grid-stride, warp shuffles, one atomic per warp.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use lookahead::launch::autotune::Variant;
use rand::rngs::StdRng;

use super::{
    addr, launch_slices, launch_typed, rand_f32, scaled, typed_choice, Bench, Env, Typed, PAD,
};
use crate::Res;

pub struct Reduce {
    n: usize,
    x: CudaSlice<f32>,
    out: CudaSlice<f32>,
    want: f64,
    abs_sum: f64,
    cfg: LaunchConfig,
}

/// The sum and the sum of magnitudes (the scale of the rounding error), in f64.
pub(crate) fn reference(x: &[f32]) -> (f64, f64) {
    let sum = x.iter().map(|&v| v as f64).sum();
    let abs_sum = x.iter().map(|&v| (v as f64).abs()).sum();
    (sum, abs_sum)
}

/// Passes when `got` is within 1e-5 of `sum|x|` of the reference sum.
pub(crate) fn check_sum(got: f64, want: f64, abs_sum: f64) -> (bool, String) {
    let rel = (got - want).abs() / abs_sum;
    (
        got.is_finite() && rel < 1e-5,
        format!("sum {got:.3} vs {want:.3}, err/sum|x| {rel:.1e}"),
    )
}

impl Reduce {
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let n = scaled(64 << 20, scale);
        let mut x = rand_f32(rng, n);
        let (want, abs_sum) = reference(&x);
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
        let got = env.download(&self.out)?[0] as f64;
        Ok(check_sum(got, self.want, self.abs_sum))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_checks_relative_to_the_magnitudes() {
        let (sum, abs) = reference(&[1.0, -2.0, 0.5]);
        assert_eq!((sum, abs), (-0.5, 3.5));
        assert!(check_sum(-0.5 + 1e-6, sum, abs).0);
        assert!(!check_sum(-0.4, sum, abs).0);
        assert!(!check_sum(f64::NAN, sum, abs).0);
    }
}
