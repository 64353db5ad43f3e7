//! `out[i] = src[idx[i]]` at random indices.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use lookahead::launch::autotune::Variant;
use rand::rngs::StdRng;
use rand::Rng;

use super::{addr, launch_slices, launch_typed, rand_f32, scaled, typed_choice, Bench, Env, Typed};
use crate::Res;

pub struct Gather {
    n: usize,
    src: CudaSlice<f32>,
    idx: CudaSlice<u32>,
    out: CudaSlice<f32>,
    want: Vec<f32>,
    cfg: LaunchConfig,
}

/// The CPU reference: the gathered values themselves.
fn reference(src: &[f32], idx: &[u32]) -> Vec<f32> {
    idx.iter().map(|&i| src[i as usize]).collect()
}

/// How many of `got` differ from `want` bit for bit.
fn differing(got: &[f32], want: &[f32]) -> usize {
    got.iter()
        .zip(want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count()
}

impl Gather {
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let m = scaled(64 << 20, scale);
        let n = scaled(32 << 20, scale);
        let src = rand_f32(rng, m);
        let idx: Vec<u32> = (0..n).map(|_| rng.gen_range(0..m as u32)).collect();
        let want = reference(&src, &idx);
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
    fn launch_m(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            (addr(&self.src, stream), self.src.len()),
            (addr(&self.idx, stream), self.n),
            (addr(&self.out, stream), self.n),
        ];
        // SAFETY: (src: &[f32], idx: &[u32], out: &mut [f32]).
        unsafe { launch_slices(stream, f, self.cfg, &p) }
    }
    fn launch_typed(
        &mut self,
        stream: &Arc<CudaStream>,
        which: Typed,
        v: Option<Variant>,
    ) -> Res<()> {
        let (cfg, src, idx, out) = (self.cfg, &self.src, &self.idx, &mut self.out);
        launch_typed!(
            which,
            v,
            gather_m_auto,
            gather_m_tuned,
            (stream, cfg, src, idx, out)
        )
    }
    fn typed_choice(
        &self,
        stream: &Arc<CudaStream>,
        which: Typed,
    ) -> (Option<Variant>, &'static [Variant]) {
        typed_choice!(which, stream, gather_m_auto, gather_m_tuned)
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.out, f32::NAN)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        let wrong = differing(&env.download(&self.out)?, &self.want);
        Ok((wrong == 0, format!("{wrong} of {} differ", self.n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_and_compares_bit_for_bit() {
        let want = reference(&[0.5, 1.5, -2.0], &[2, 0, 2]);
        assert_eq!(want, vec![-2.0, 0.5, -2.0]);
        assert_eq!(differing(&want, &want), 0);
        assert_eq!(differing(&[-2.0, f32::NAN, -0.0], &want), 2);
    }
}
