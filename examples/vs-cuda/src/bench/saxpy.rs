//! `out[i] = a * x[i] + y[i]`.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use lookahead::launch::autotune::Variant;
use rand::rngs::StdRng;
use rand::Rng;

use super::{addr, launch_typed, rand_f32, scaled, typed_choice, Bench, Checked, Env, Typed, PAD};
use crate::Res;

pub struct Saxpy {
    n: usize,
    a: f32,
    x: CudaSlice<f32>,
    y: CudaSlice<f32>,
    out: Checked,
    cfg: LaunchConfig,
}

/// The CPU reference, in f64.
fn reference(a: f32, x: &[f32], y: &[f32]) -> Vec<f64> {
    x.iter()
        .zip(y)
        .map(|(x, y)| a as f64 * *x as f64 + *y as f64)
        .collect()
}

impl Saxpy {
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let n = scaled(64 << 20, scale);
        let a: f32 = rng.gen_range(-2.0..2.0);
        let (mut x, mut y) = (rand_f32(rng, n), rand_f32(rng, n));
        let want = reference(a, &x, &y);
        x.resize(n + PAD, 0.5);
        y.resize(n + PAD, 0.5);
        Ok(Saxpy {
            n,
            a,
            x: env.upload(&x)?,
            y: env.upload(&y)?,
            out: Checked::new(env, want, 1e-6)?,
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
            addr(&self.out.buf, stream),
        );
        let mut l = stream.launch_builder(f);
        l.arg(&self.a).arg(&x).arg(&y).arg(&o).arg(&self.n);
        // SAFETY: (f32, *const f32, *const f32, *mut f32, usize) as the kernel declares.
        unsafe { l.launch(self.cfg) }?;
        Ok(())
    }
    fn launch_m(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let (x, y, o) = (
            addr(&self.x, stream),
            addr(&self.y, stream),
            addr(&self.out.buf, stream),
        );
        let n = self.n;
        let mut l = stream.launch_builder(f);
        l.arg(&self.a)
            .arg(&x)
            .arg(&n)
            .arg(&y)
            .arg(&n)
            .arg(&o)
            .arg(&n);
        // SAFETY: (f32, x: &[f32], y: &[f32], out: &mut [f32]) lowered to pointer + length.
        unsafe { l.launch(self.cfg) }?;
        Ok(())
    }
    fn launch_typed(
        &mut self,
        stream: &Arc<CudaStream>,
        which: Typed,
        v: Option<Variant>,
    ) -> Res<()> {
        let n = self.n;
        let (x, y) = (self.x.slice(0..n), self.y.slice(0..n));
        let (cfg, a, out) = (self.cfg, self.a, &mut self.out.buf);
        launch_typed!(
            which,
            v,
            saxpy_m_auto,
            saxpy_m_tuned,
            (stream, cfg, a, &x, &y, out)
        )
    }
    fn typed_choice(
        &self,
        stream: &Arc<CudaStream>,
        which: Typed,
    ) -> (Option<Variant>, &'static [Variant]) {
        typed_choice!(which, stream, saxpy_m_auto, saxpy_m_tuned)
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        self.out.reset(env)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        self.out.check(env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_is_a_x_plus_y() {
        assert_eq!(reference(2.0, &[1.0, -0.5], &[0.25, 3.0]), vec![2.25, 2.0]);
    }
}
