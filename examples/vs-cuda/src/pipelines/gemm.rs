//! `pipe_gemm`: `C = A B` in FP32 on the CUDA cores (no tensor cores), 4096 x 4096 x 4096,
//! A given transposed; 128 x 128 block tiles, 8 x 8 outputs per thread, k-tiles of 8 staged.
//!
//! The check compares sampled outputs with an f64 reference against the rounding bound of
//! a length-`k` dot product in f32: `|c - ref| <= k u sum_k |a_ik| |b_kj|` (`u = 2^-24`, a
//! first-order bound on recursive summation with fused multiply-adds, valid in any order),
//! which a missing or repeated k-tile (an error of about `|a| |b|` per term) far exceeds.

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use rand::rngs::StdRng;
use rand::Rng;
use vs_cuda_kernels::{GemmDims, F4, GEMM_TILE};

use super::{blocks, launch_slices_then, PipeBench};
use crate::bench::{addr, rand_f32, Bench, Env};
use crate::Res;

/// Outputs compared with the reference per check.
const SAMPLES: usize = 4096;

pub struct PipeGemm {
    dims: GemmDims,
    at: CudaSlice<F4>,
    b: CudaSlice<F4>,
    c: CudaSlice<F4>,
    /// Host copies of A transposed and B, for the reference.
    host: (Vec<f32>, Vec<f32>),
    /// The outputs checked.
    sample: Vec<(usize, usize)>,
    cfg: LaunchConfig,
}

/// Floats as `F4`s (the length a multiple of 4).
pub fn quads(v: &[f32]) -> Vec<F4> {
    v.chunks_exact(4)
        .map(|q| F4([q[0], q[1], q[2], q[3]]))
        .collect()
}

/// `C[i][j]` in f64 and the bound on its f32 rounding error, from `at` (k x m) and `b`
/// (k x n).
pub fn reference_at(at: &[f32], b: &[f32], d: GemmDims, i: usize, j: usize) -> (f64, f64) {
    let (m, n, k) = (d.m as usize, d.n as usize, d.k as usize);
    let (mut sum, mut abs) = (0.0f64, 0.0f64);
    for kk in 0..k {
        let p = at[kk * m + i] as f64 * b[kk * n + j] as f64;
        sum += p;
        abs += p.abs();
    }
    (sum, k as f64 * f32::EPSILON as f64 / 2.0 * abs)
}

/// Checks the sampled outputs of `c` (row-major m x n floats).
pub fn check_c(
    c: &[f32],
    at: &[f32],
    b: &[f32],
    d: GemmDims,
    sample: &[(usize, usize)],
) -> (bool, String) {
    let n = d.n as usize;
    let (mut bad, mut worst) = (0, 0.0f64);
    for &(i, j) in sample {
        let (want, bound) = reference_at(at, b, d, i, j);
        let got = c[i * n + j] as f64;
        let err = (got - want).abs();
        if !got.is_finite() || err > bound {
            bad += 1;
        }
        if bound > 0.0 {
            worst = worst.max(err / bound);
        }
    }
    (
        bad == 0,
        format!(
            "{bad} of {} sampled outputs outside the bound, worst err/bound {worst:.2e}",
            sample.len()
        ),
    )
}

/// The dimensions for `m = n = k = side`.
pub fn dims(side: usize) -> GemmDims {
    GemmDims {
        m: side as u32,
        n: side as u32,
        k: side as u32,
        _pad: 0,
    }
}

/// Blocks: one per 128 x 128 tile of C.
pub fn grid(d: GemmDims) -> u32 {
    (d.m as usize / GEMM_TILE * (d.n as usize / GEMM_TILE)) as u32
}

impl PipeGemm {
    /// 4096 x 4096 x 4096 at scale 1 (each side a multiple of 128).
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let side = ((4096.0 * scale.cbrt()) as usize / GEMM_TILE).max(1) * GEMM_TILE;
        let d = dims(side);
        let (at, b) = (rand_f32(rng, side * side), rand_f32(rng, side * side));
        let sample = (0..SAMPLES)
            .map(|_| (rng.gen_range(0..side), rng.gen_range(0..side)))
            .collect();
        Ok(PipeGemm {
            dims: d,
            at: env.upload(&quads(&at))?,
            b: env.upload(&quads(&b))?,
            c: env.upload(&vec![F4([f32::NAN; 4]); side * side / 4])?,
            host: (at, b),
            sample,
            cfg: blocks(grid(d)),
        })
    }
}

impl Bench for PipeGemm {
    fn kernel(&self) -> &'static str {
        "pipe_gemm"
    }
    super::tuned_methods!(
        self,
        pipe_gemm_tuned,
        (&self.at, &self.b, &mut self.c, self.dims)
    );
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        16.0 * (self.at.len() + self.b.len() + self.c.len()) as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            (addr(&self.at, stream), self.at.len()),
            (addr(&self.b, stream), self.b.len()),
            (addr(&self.c, stream), self.c.len()),
        ];
        // SAFETY: (at: &[F4], b: &[F4], c: &mut [F4], dims: GemmDims).
        unsafe { launch_slices_then(stream, f, self.cfg, &p, &self.dims) }
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.c, F4([f32::NAN; 4]))
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        let c: Vec<f32> = env.download(&self.c)?.iter().flat_map(|q| q.0).collect();
        Ok(check_c(
            &c,
            &self.host.0,
            &self.host.1,
            self.dims,
            &self.sample,
        ))
    }
}

impl PipeBench for PipeGemm {
    /// The grid is the problem's (a block per output tile).
    fn set_grid(&mut self, _resident: u32) {}
    fn flops(&self) -> f64 {
        2.0 * self.dims.m as f64 * self.dims.n as f64 * self.dims.k as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookahead::emu::Emulator;
    use rand::SeedableRng;

    #[test]
    fn every_kind_is_inside_the_bound_on_the_emulator_and_a_missing_k_tile_is_not() {
        let mut rng = StdRng::seed_from_u64(3);
        let d = GemmDims {
            m: 128,
            n: 256,
            k: 24,
            _pad: 0,
        };
        let at = rand_f32(&mut rng, 24 * 128);
        let b = rand_f32(&mut rng, 24 * 256);
        let sample = (0..2048)
            .map(|x| (x % 128, (x * 7) % 256))
            .collect::<Vec<_>>();
        type Launch =
            fn(&Emulator, LaunchConfig, &[F4], &[F4], &mut [F4], GemmDims) -> lookahead::Result<()>;
        let kernels: [(&str, Launch); 2] = [
            ("cp_async_s2", |e, c, a, b, o, d| {
                vs_cuda_kernels::pipe_gemm_cp_async_s2::launch(e, c, a, b, o, d)
            }),
            ("bulk_s4", |e, c, a, b, o, d| {
                vs_cuda_kernels::pipe_gemm_bulk_s4::launch(e, c, a, b, o, d)
            }),
        ];
        for (name, launch) in kernels {
            let mut c = vec![F4([f32::NAN; 4]); 128 * 256 / 4];
            launch(
                &Emulator::new(),
                blocks(grid(d)),
                &quads(&at),
                &quads(&b),
                &mut c,
                d,
            )
            .unwrap();
            let flat: Vec<f32> = c.iter().flat_map(|q| q.0).collect();
            let (ok, detail) = check_c(&flat, &at, &b, d, &sample);
            assert!(ok, "{name}: {detail}");
        }
        // Negative control: the product without its last k-tile fails the check.
        let short = GemmDims { k: 16, ..d };
        let sampled: Vec<(usize, usize)> = (0..128).map(|i| (i, 5)).collect();
        let mut c = vec![0.0f32; 128 * 256];
        for &(i, j) in &sampled {
            c[i * 256 + j] = reference_at(&at, &b, short, i, j).0 as f32;
        }
        assert!(!check_c(&c, &at, &b, d, &sampled).0);
    }
}
