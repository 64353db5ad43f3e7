//! Embedding bag: each warp sums the rows of its bags, rows drawn at random from a table
//! well over the L2 (a kernel the prefetch tuner was not developed on; `#[prefetch_next]`
//! variants only: `bag_m_none` and `bag_m_tuned`).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use lookahead::launch::autotune::Variant;
use rand::rngs::StdRng;
use rand::Rng;
use vs_cuda_kernels::DIM;

use super::{
    addr, launch_slices, par_fill, rand_f32, random_offsets, scaled, Bench, Checked, Env, Typed,
};
use crate::Res;

pub struct Bag {
    lookups: usize,
    table: CudaSlice<f32>,
    idx: CudaSlice<u32>,
    bag_off: CudaSlice<u32>,
    out: Checked,
    cfg: LaunchConfig,
}

/// The CPU reference: each bag's rows summed, in f64.
fn reference(table: &[f32], idx: &[u32], bag_off: &[u32]) -> Vec<f64> {
    let mut want = vec![0.0f64; (bag_off.len() - 1) * DIM];
    par_fill(&mut want, |first, chunk| {
        for (k, w) in chunk.iter_mut().enumerate() {
            let (b, d) = ((first + k) / DIM, (first + k) % DIM);
            let rows = &idx[bag_off[b] as usize..bag_off[b + 1] as usize];
            *w = rows
                .iter()
                .map(|&r| table[r as usize * DIM + d] as f64)
                .sum();
        }
    });
    want
}

impl Bag {
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let rows = scaled(1 << 19, scale);
        let bags = scaled(1 << 16, scale);
        let table = rand_f32(rng, rows * DIM);
        let bag_off = random_offsets(rng, bags, 16..=48);
        let lookups = bag_off[bags] as usize;
        let idx: Vec<u32> = (0..lookups)
            .map(|_| rng.gen_range(0..rows as u32))
            .collect();
        let want = reference(&table, &idx, &bag_off);
        Ok(Bag {
            lookups,
            table: env.upload(&table)?,
            idx: env.upload(&idx)?,
            bag_off: env.upload(&bag_off)?,
            out: Checked::new(env, want, 1e-5)?,
            cfg: env.grid(8),
        })
    }
}

impl Bench for Bag {
    fn kernel(&self) -> &'static str {
        "bag"
    }
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        (self.lookups * (DIM * 4 + 4)) as f64 + self.out.buf.len() as f64 * 4.0
    }
    fn launch(&self, _: &CudaStream, _: &CudaFunction) -> Res<()> {
        Err("the embedding bag has no hand-written variants".into())
    }
    fn launch_m(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            (addr(&self.table, stream), self.table.len()),
            (addr(&self.idx, stream), self.idx.len()),
            (addr(&self.bag_off, stream), self.bag_off.len()),
            (addr(&self.out.buf, stream), self.out.buf.len()),
        ];
        // SAFETY: (table: &[f32], idx: &[u32], bag_off: &[u32], out: &mut [f32]).
        unsafe { launch_slices(stream, f, self.cfg, &p) }
    }
    fn launch_typed(
        &mut self,
        stream: &Arc<CudaStream>,
        which: Typed,
        v: Option<Variant>,
    ) -> Res<()> {
        use vs_cuda_kernels::bag_m_tuned as k;
        if which != Typed::Tuned {
            return Err("the embedding bag has no m_auto kernel".into());
        }
        let (cfg, out) = (self.cfg, &mut self.out.buf);
        match v {
            None => k::launch(stream, cfg, &self.table, &self.idx, &self.bag_off, out)?,
            Some(v) => {
                k::launch_variant(v, stream, cfg, &self.table, &self.idx, &self.bag_off, out)?
            }
        }
        Ok(())
    }
    fn typed_choice(
        &self,
        stream: &Arc<CudaStream>,
        which: Typed,
    ) -> (Option<Variant>, &'static [Variant]) {
        use vs_cuda_kernels::bag_m_tuned as k;
        match which {
            Typed::Tuned => (k::auto_choice(stream), k::CANDIDATES),
            Typed::Auto => (None, &[]),
        }
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
    fn sums_each_bag_s_rows() {
        let table: Vec<f32> = (0..3 * DIM).map(|i| (i / DIM) as f32 + 1.0).collect();
        let want = reference(&table, &[2, 0, 2, 1], &[0, 3, 4]);
        assert_eq!(want.len(), 2 * DIM);
        assert!(want[..DIM].iter().all(|w| *w == 7.0));
        assert!(want[DIM..].iter().all(|w| *w == 2.0));
    }
}
