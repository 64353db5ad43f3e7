//! The IVF list scan: per list, the squared L2 distance of each vector to the query, and
//! the list's minimum.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use lookahead::launch::autotune::Variant;
use rand::rngs::StdRng;
use vs_cuda_kernels::DIM;

use super::{
    addr, grid_cfg, launch_counted, launch_slices, launch_typed, par_fill, rand_f32,
    random_offsets, rel_check, scaled, typed_choice, Bench, Checked, Env, Typed, PAD,
};
use crate::Res;

pub struct Ivf {
    lists: usize,
    total: usize,
    list_off: CudaSlice<u32>,
    vecs: CudaSlice<f32>,
    query: CudaSlice<f32>,
    dist: Checked,
    list_min: CudaSlice<u32>,
    want_min: Vec<f64>,
    cfg: LaunchConfig,
}

/// Squared L2 distance of every `dim`-float vector of `vecs` to `query`, in f64, vectors
/// in parallel.
fn distances(vecs: &[f32], query: &[f32], dim: usize) -> Vec<f64> {
    let mut want = vec![0.0f64; vecs.len() / dim];
    par_fill(&mut want, |first, chunk| {
        for (k, w) in chunk.iter_mut().enumerate() {
            let v = &vecs[(first + k) * dim..(first + k + 1) * dim];
            *w = v
                .iter()
                .zip(query)
                .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
                .sum();
        }
    });
    want
}

/// The smallest of `dist` in each list (`list_off` holds the lists' offsets).
fn list_minima(dist: &[f64], list_off: &[u32]) -> Vec<f64> {
    list_off
        .windows(2)
        .map(|w| {
            dist[w[0] as usize..w[1] as usize]
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min)
        })
        .collect()
}

impl Ivf {
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let lists = scaled(2048, scale);
        let list_off = random_offsets(rng, lists, 256..=768);
        let total = list_off[lists] as usize;
        let mut vecs = rand_f32(rng, total * DIM);
        let query = rand_f32(rng, DIM);
        let want = distances(&vecs, &query, DIM);
        let want_min = list_minima(&want, &list_off);
        vecs.resize(total * DIM + PAD, 0.0);
        Ok(Ivf {
            lists,
            total,
            list_off: env.upload(&list_off)?,
            vecs: env.upload(&vecs)?,
            query: env.upload(&query)?,
            dist: Checked::new(env, want, 1e-5)?,
            list_min: env.upload(&vec![u32::MAX; lists])?,
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
            addr(&self.dist.buf, stream),
            addr(&self.list_min, stream),
        ];
        // SAFETY: (usize, *const u32, *const f32, *const f32, *mut f32, *mut u32).
        unsafe { launch_counted(stream, f, self.cfg, self.lists, &p) }
    }
    fn launch_m(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            (addr(&self.list_off, stream), self.lists + 1),
            (addr(&self.vecs, stream), self.total * DIM),
            (addr(&self.query, stream), DIM),
            (addr(&self.dist.buf, stream), self.total),
            (addr(&self.list_min, stream), self.lists),
        ];
        // SAFETY: (list_off: &[u32], vecs, query: &[f32], dist: &mut [f32],
        // list_min: &mut [u32]).
        unsafe { launch_slices(stream, f, self.cfg, &p) }
    }
    fn launch_typed(
        &mut self,
        stream: &Arc<CudaStream>,
        which: Typed,
        v: Option<Variant>,
    ) -> Res<()> {
        let vecs = self.vecs.slice(0..self.total * DIM);
        let (cfg, off, q) = (self.cfg, &self.list_off, &self.query);
        let (dist, mins) = (&mut self.dist.buf, &mut self.list_min);
        launch_typed!(
            which,
            v,
            ivf_m_auto,
            ivf_m_tuned,
            (stream, cfg, off, &vecs, q, dist, mins)
        )
    }
    fn typed_choice(
        &self,
        stream: &Arc<CudaStream>,
        which: Typed,
    ) -> (Option<Variant>, &'static [Variant]) {
        typed_choice!(which, stream, ivf_m_auto, ivf_m_tuned)
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        self.dist.reset(env)?;
        env.fill(&mut self.list_min, u32::MAX)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        let (ok_d, d) = self.dist.check(env)?;
        let mins: Vec<f32> = env
            .download(&self.list_min)?
            .into_iter()
            .map(f32::from_bits)
            .collect();
        let (ok_m, m) = rel_check(&mins, &self.want_min, 1e-5);
        Ok((ok_d && ok_m, format!("dist {d}; list min {m}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_and_list_minima() {
        // Three 2-float vectors, query (1, 1).
        let d = distances(&[1.0, 1.0, 3.0, 1.0, 0.0, 0.0], &[1.0, 1.0], 2);
        assert_eq!(d, vec![0.0, 4.0, 2.0]);
        // Lists [0, 1) and [1, 3).
        assert_eq!(list_minima(&d, &[0, 1, 3]), vec![0.0, 2.0]);
    }
}
