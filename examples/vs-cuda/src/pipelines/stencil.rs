//! `pipe_stencil`: `dst = 4 c - n - s - e - w` on a 16384 x 16384 grid (1 GiB in, 1 GiB out),
//! tiles of 128 x 16 with their halo staged, down column strips.

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use rand::rngs::StdRng;
use vs_cuda_kernels::{StencilShape, STENCIL_PAD, STENCIL_W};

use super::{blocks, exact_check, launch_slices_then, small_ints, PipeBench};
use crate::bench::{addr, par_fill, Bench, Env};
use crate::Res;

/// Rows of a column strip one block does.
const SEG_ROWS: usize = 256;

pub struct PipeStencil {
    src: CudaSlice<f32>,
    dst: CudaSlice<f32>,
    want: Vec<f32>,
    shape: StencilShape,
    cfg: LaunchConfig,
}

/// The input grid, `w` x `h` interior points, with `STENCIL_PAD` zero columns left and
/// right and a zero row above and below.
pub fn padded(interior: &[f32], w: usize, h: usize) -> Vec<f32> {
    let pitch = w + 2 * STENCIL_PAD;
    let mut g = vec![0.0f32; pitch * (h + 2)];
    for y in 0..h {
        g[(y + 1) * pitch + STENCIL_PAD..][..w].copy_from_slice(&interior[y * w..][..w]);
    }
    g
}

/// The CPU reference on the padded grid (exact: integer-valued inputs).
pub fn reference(g: &[f32], w: usize, h: usize) -> Vec<f32> {
    let pitch = w + 2 * STENCIL_PAD;
    let mut out = vec![0.0f32; w * h];
    par_fill(&mut out, |first, chunk| {
        for (k, o) in chunk.iter_mut().enumerate() {
            let (y, x) = ((first + k) / w, (first + k) % w);
            let at = |yy: usize, xx: usize| g[yy * pitch + xx];
            let (py, px) = (y + 1, x + STENCIL_PAD);
            *o = 4.0 * at(py, px)
                - at(py - 1, px)
                - at(py + 1, px)
                - at(py, px - 1)
                - at(py, px + 1);
        }
    });
    out
}

/// The grid's shape for `w` x `h` points.
pub fn shape(w: usize, h: usize) -> StencilShape {
    StencilShape {
        w: w as u32,
        h: h as u32,
        seg_rows: SEG_ROWS as u32,
        _pad: 0,
    }
}

/// Blocks: one per column strip and segment of [`SEG_ROWS`] rows.
pub fn grid(w: usize, h: usize) -> u32 {
    (w / STENCIL_W * h.div_ceil(SEG_ROWS)) as u32
}

impl PipeStencil {
    /// 16384 x 16384 points at scale 1 (width a multiple of 128).
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let side = ((16384.0 * scale.sqrt()) as usize / STENCIL_W).max(1) * STENCIL_W;
        let (w, h) = (side, side);
        let g = padded(&small_ints(rng, w * h, 1000), w, h);
        let want = reference(&g, w, h);
        Ok(PipeStencil {
            src: env.upload(&g)?,
            dst: env.upload(&vec![f32::NAN; w * h])?,
            want,
            shape: shape(w, h),
            cfg: blocks(grid(w, h)),
        })
    }
}

impl Bench for PipeStencil {
    fn kernel(&self) -> &'static str {
        "pipe_stencil"
    }
    super::tuned_methods!(
        self,
        pipe_stencil_tuned,
        (&self.src, &mut self.dst, self.shape)
    );
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        4.0 * (self.src.len() + self.dst.len()) as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            (addr(&self.src, stream), self.src.len()),
            (addr(&self.dst, stream), self.dst.len()),
        ];
        // SAFETY: (src: &[f32], dst: &mut [f32], shape: StencilShape).
        unsafe { launch_slices_then(stream, f, self.cfg, &p, &self.shape) }
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        env.fill(&mut self.dst, f32::NAN)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        Ok(exact_check(&env.download(&self.dst)?, &self.want))
    }
}

impl PipeBench for PipeStencil {
    /// The grid is the problem's (a block per strip segment), whatever is resident.
    fn set_grid(&mut self, _resident: u32) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookahead::emu::Emulator;
    use rand::SeedableRng;

    #[test]
    fn every_kind_matches_the_cpu_exactly_on_the_emulator() {
        // Two strips; a last tile cut short, and two segments.
        let (w, h) = (256, SEG_ROWS + 21);
        let g = padded(
            &small_ints(&mut StdRng::seed_from_u64(5), w * h, 1000),
            w,
            h,
        );
        let want = reference(&g, w, h);
        type Launch =
            fn(&Emulator, LaunchConfig, &[f32], &mut [f32], StencilShape) -> lookahead::Result<()>;
        let kernels: [(&str, Launch); 2] = [
            ("cp_async_s3", |e, c, s, d, sh| {
                vs_cuda_kernels::pipe_stencil_cp_async_s3::launch(e, c, s, d, sh)
            }),
            ("bulk_s2", |e, c, s, d, sh| {
                vs_cuda_kernels::pipe_stencil_bulk_s2::launch(e, c, s, d, sh)
            }),
        ];
        for (name, launch) in kernels {
            let mut out = vec![f32::NAN; w * h];
            launch(
                &Emulator::new(),
                blocks(grid(w, h)),
                &g,
                &mut out,
                shape(w, h),
            )
            .unwrap();
            let (ok, detail) = exact_check(&out, &want);
            assert!(ok, "{name}: {detail}");
        }
        // The reference is not the input: a kernel that copied its tile through would fail.
        let copied: Vec<f32> = (0..w * h)
            .map(|i| g[(i / w + 1) * (w + 8) + i % w + 4])
            .collect();
        assert!(!exact_check(&copied, &want).0);
    }
}
