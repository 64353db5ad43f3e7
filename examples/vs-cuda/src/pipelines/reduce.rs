//! `pipe_reduce`: `out[0] += sum(x)` over 1 GiB, tiles of `REDUCE_TILE` floats staged.

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use lookahead_bench::exact_sum::{self, SumInput};
use rand::rngs::StdRng;

use super::{blocks, PipeBench};
use crate::bench::reduce::input;
use crate::bench::{addr, launch_slices, Bench, Env};
use crate::Res;

pub struct PipeReduce {
    x: CudaSlice<f32>,
    out: CudaSlice<f32>,
    /// The exact sum of `x`.
    want: u32,
    cfg: LaunchConfig,
}

impl PipeReduce {
    /// 2^28 floats (1 GiB) at scale 1 whose f32 sum is exact in any order, as the suite's
    /// reduction's.
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let SumInput { values, sum } = input(rng, 4.0 * scale);
        Ok(PipeReduce {
            x: env.upload(&values)?,
            out: env.upload(&[0.0f32])?,
            want: sum,
            cfg: blocks(1),
        })
    }
}

impl Bench for PipeReduce {
    fn kernel(&self) -> &'static str {
        "pipe_reduce"
    }
    super::tuned_methods!(self, pipe_reduce_tuned, (&self.x, &mut self.out));
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        4.0 * self.x.len() as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            (addr(&self.x, stream), self.x.len()),
            (addr(&self.out, stream), 1),
        ];
        // SAFETY: (x: &[f32], out: &mut [f32]).
        unsafe { launch_slices(stream, f, self.cfg, &p) }
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.out, 0.0)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        Ok(exact_sum::check(env.download(&self.out)?[0], self.want))
    }
}

impl PipeBench for PipeReduce {
    fn set_grid(&mut self, resident: u32) {
        self.cfg = blocks(resident);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookahead::emu::Emulator;
    use rand::{Rng, SeedableRng};

    #[test]
    fn every_kind_and_stage_count_sums_on_the_emulator() {
        let mut rng = StdRng::seed_from_u64(11);
        // Whole tiles, a ragged last one, blocks with none.
        let SumInput { values: x, sum } = exact_sum::input(5 * 2048 + 300, |k| rng.gen_range(0..k));
        type Launch = fn(&Emulator, LaunchConfig, &[f32], &mut [f32]) -> lookahead::Result<()>;
        let kernels: [(&str, Launch); 3] = [
            ("cp_async_s2", |e, c, x, o| {
                vs_cuda_kernels::pipe_reduce_cp_async_s2::launch(e, c, x, o)
            }),
            ("cp_async_s4", |e, c, x, o| {
                vs_cuda_kernels::pipe_reduce_cp_async_s4::launch(e, c, x, o)
            }),
            ("bulk_s3", |e, c, x, o| {
                vs_cuda_kernels::pipe_reduce_bulk_s3::launch(e, c, x, o)
            }),
        ];
        for (name, launch) in kernels {
            let mut out = [0.0f32];
            launch(&Emulator::new(), blocks(4), &x, &mut out).unwrap();
            let (ok, detail) = exact_sum::check(out[0], sum);
            assert!(ok, "{name}: {detail}");
        }
        // The kernel written with `stages = auto, copy = auto`: every candidate entry.
        use vs_cuda_kernels::pipe_reduce_tuned as tuned;
        assert_eq!(
            tuned::CANDIDATES.len(),
            7,
            "plain and 2 kinds x 3 stage counts"
        );
        for &v in tuned::CANDIDATES {
            let mut out = [0.0f32];
            tuned::launch_variant(v, &Emulator::new(), blocks(4), &x[..], &mut out[..]).unwrap();
            let (ok, detail) = exact_sum::check(out[0], sum);
            assert!(ok, "tuned {v}: {detail}");
        }
        // The check fails a sum missing one stage (a tile), what a pipeline bug looks like.
        let tile: f32 = x[2048..4096].iter().sum();
        assert!(tile > 0.0 && !exact_sum::check(sum as f32 - tile, sum).0);
    }
}
