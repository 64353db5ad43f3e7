//! `pipe_gather`: bags of `GATHER_BAG` rows of `GATHER_DIM` floats picked at random from a
//! 1 GiB table, each bag summed into an output row; the gathered rows are staged.

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use rand::rngs::StdRng;
use rand::Rng;
use vs_cuda_kernels::{GATHER_BAG, GATHER_DIM};

use super::{blocks, exact_check, small_ints, PipeBench};
use crate::bench::{addr, launch_slices, par_fill, scaled, Bench, Env};
use crate::Res;

pub struct PipeGather {
    src: CudaSlice<f32>,
    idx: CudaSlice<u32>,
    out: CudaSlice<f32>,
    want: Vec<f32>,
    cfg: LaunchConfig,
}

/// The CPU reference: output row `g` is the sum of rows `idx[g * BAG..][..BAG]` (exact:
/// integer-valued inputs).
pub fn reference(src: &[f32], idx: &[u32]) -> Vec<f32> {
    let bags = idx.len() / GATHER_BAG;
    let mut out = vec![0.0f32; bags * GATHER_DIM];
    par_fill(&mut out, |first, chunk| {
        for (k, o) in chunk.iter_mut().enumerate() {
            let (g, col) = ((first + k) / GATHER_DIM, (first + k) % GATHER_DIM);
            *o = (0..GATHER_BAG)
                .map(|r| src[idx[g * GATHER_BAG + r] as usize * GATHER_DIM + col])
                .sum();
        }
    });
    out
}

/// `bags` bags of random rows of a table of `rows` rows.
pub fn random_bags(rng: &mut StdRng, rows: usize, bags: usize) -> Vec<u32> {
    (0..bags * GATHER_BAG)
        .map(|_| rng.gen_range(0..rows as u32))
        .collect()
}

impl PipeGather {
    /// A table of 2^21 rows (1 GiB) and as many gathered rows at scale 1.
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let rows = scaled(1 << 21, scale);
        let src = small_ints(rng, rows * GATHER_DIM, 100);
        let idx = random_bags(rng, rows, rows / GATHER_BAG);
        let want = reference(&src, &idx);
        Ok(PipeGather {
            src: env.upload(&src)?,
            idx: env.upload(&idx)?,
            out: env.upload(&vec![f32::NAN; want.len()])?,
            want,
            cfg: blocks(1),
        })
    }
}

impl Bench for PipeGather {
    fn kernel(&self) -> &'static str {
        "pipe_gather"
    }
    super::tuned_methods!(
        self,
        pipe_gather_tuned,
        (&self.src, &self.idx, &mut self.out)
    );
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        let gathered = self.idx.len() * GATHER_DIM;
        4.0 * (gathered + self.idx.len() + self.out.len()) as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            (addr(&self.src, stream), self.src.len()),
            (addr(&self.idx, stream), self.idx.len()),
            (addr(&self.out, stream), self.out.len()),
        ];
        // SAFETY: (src: &[f32], idx: &[u32], out: &mut [f32]).
        unsafe { launch_slices(stream, f, self.cfg, &p) }
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.out, f32::NAN)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        Ok(exact_check(&env.download(&self.out)?, &self.want))
    }
}

impl PipeBench for PipeGather {
    fn set_grid(&mut self, resident: u32) {
        self.cfg = blocks(resident);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookahead::emu::Emulator;
    use rand::SeedableRng;

    #[test]
    fn every_kind_matches_the_cpu_exactly_on_the_emulator() {
        let mut rng = StdRng::seed_from_u64(9);
        let rows = 300;
        let src = small_ints(&mut rng, rows * GATHER_DIM, 100);
        // An odd number of bags: the last stage holds one.
        let idx = random_bags(&mut rng, rows, 11);
        let want = reference(&src, &idx);
        type Launch =
            fn(&Emulator, LaunchConfig, &[f32], &[u32], &mut [f32]) -> lookahead::Result<()>;
        let kernels: [(&str, Launch); 2] = [
            ("cp_async_s4", |e, c, s, i, o| {
                vs_cuda_kernels::pipe_gather_cp_async_s4::launch(e, c, s, i, o)
            }),
            ("bulk_s2", |e, c, s, i, o| {
                vs_cuda_kernels::pipe_gather_bulk_s2::launch(e, c, s, i, o)
            }),
        ];
        for (name, launch) in kernels {
            let mut out = vec![f32::NAN; want.len()];
            launch(&Emulator::new(), blocks(2), &src, &idx, &mut out).unwrap();
            let (ok, detail) = exact_check(&out, &want);
            assert!(ok, "{name}: {detail}");
        }
        // A bag summed from the wrong rows fails.
        let mut shifted = idx.clone();
        shifted[3] = (shifted[3] + 1) % rows as u32;
        assert!(!exact_check(&reference(&src, &shifted), &want).0);
    }

    #[test]
    fn a_row_index_outside_the_table_is_refused_before_any_copy() {
        let mut rng = StdRng::seed_from_u64(4);
        let rows = 40;
        let src = small_ints(&mut rng, rows * GATHER_DIM, 100);
        let mut idx = random_bags(&mut rng, rows, 4);
        idx[9] = rows as u32; // one past the last row
        let mut out = vec![f32::NAN; 4 * GATHER_DIM];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            vs_cuda_kernels::pipe_gather_cp_async_s2::launch(
                &Emulator::new(),
                blocks(1),
                &src,
                &idx,
                &mut out,
            )
        }));
        let msg = match r {
            Err(p) => p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
            Ok(res) => format!("{res:?}"),
        };
        assert!(
            msg.contains("gather_rows: a row index is outside the table"),
            "{msg}"
        );
        assert!(msg.contains("pipe_gather_cp_async_s2"), "{msg}");
    }
}
