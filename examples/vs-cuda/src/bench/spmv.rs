//! CSR `y = A x`, one warp per row.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use lookahead::launch::autotune::Variant;
use rand::rngs::StdRng;
use rand::Rng;

use super::{
    addr, launch_counted, launch_slices, launch_typed, par_fill, rand_f32, random_offsets, scaled,
    typed_choice, Bench, Checked, Env, Typed, PAD,
};
use crate::Res;

pub struct Spmv {
    rows: usize,
    nnz: usize,
    cols: usize,
    row_ptr: CudaSlice<u32>,
    col: CudaSlice<u32>,
    val: CudaSlice<f32>,
    x: CudaSlice<f32>,
    y: Checked,
    cfg: LaunchConfig,
}

/// The CPU reference `A x` in f64, rows in parallel.
fn reference(row_ptr: &[u32], col: &[u32], val: &[f32], x: &[f32]) -> Vec<f64> {
    let mut want = vec![0.0f64; row_ptr.len() - 1];
    par_fill(&mut want, |first, chunk| {
        for (k, w) in chunk.iter_mut().enumerate() {
            let r = first + k;
            let (s, e) = (row_ptr[r] as usize, row_ptr[r + 1] as usize);
            *w = (s..e)
                .map(|j| val[j] as f64 * x[col[j] as usize] as f64)
                .sum();
        }
    });
    want
}

impl Spmv {
    pub fn new(env: &Env, rng: &mut StdRng, scale: f64) -> Res<Self> {
        let rows = scaled(1 << 20, scale);
        let cols = 4 << 20;
        let row_ptr = random_offsets(rng, rows, 8..=56);
        let nnz = row_ptr[rows] as usize;
        let mut col: Vec<u32> = (0..nnz).map(|_| rng.gen_range(0..cols as u32)).collect();
        let mut val = rand_f32(rng, nnz);
        let x = rand_f32(rng, cols);
        let want = reference(&row_ptr, &col, &val, &x);
        col.resize(nnz + PAD, 0);
        val.resize(nnz + PAD, 0.0);
        Ok(Spmv {
            rows,
            nnz,
            cols,
            row_ptr: env.upload(&row_ptr)?,
            col: env.upload(&col)?,
            val: env.upload(&val)?,
            x: env.upload(&x)?,
            y: Checked::new(env, want, 1e-5)?,
            cfg: env.grid(8),
        })
    }
}

impl Bench for Spmv {
    fn kernel(&self) -> &'static str {
        "spmv"
    }
    fn cfg(&self) -> LaunchConfig {
        self.cfg
    }
    fn bytes(&self) -> f64 {
        8.0 * self.nnz as f64 + 8.0 * self.rows as f64 + 4.0 * self.cols as f64
    }
    fn launch(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            addr(&self.row_ptr, stream),
            addr(&self.col, stream),
            addr(&self.val, stream),
            addr(&self.x, stream),
            addr(&self.y.buf, stream),
        ];
        // SAFETY: (usize, *const u32, *const u32, *const f32, *const f32, *mut f32).
        unsafe { launch_counted(stream, f, self.cfg, self.rows, &p) }
    }
    fn launch_m(&self, stream: &CudaStream, f: &CudaFunction) -> Res<()> {
        let p = [
            (addr(&self.row_ptr, stream), self.rows + 1),
            (addr(&self.col, stream), self.nnz),
            (addr(&self.val, stream), self.nnz),
            (addr(&self.x, stream), self.cols),
            (addr(&self.y.buf, stream), self.rows),
        ];
        // SAFETY: (row_ptr, col: &[u32], val, x: &[f32], y: &mut [f32]).
        unsafe { launch_slices(stream, f, self.cfg, &p) }
    }
    fn launch_typed(
        &mut self,
        stream: &Arc<CudaStream>,
        which: Typed,
        v: Option<Variant>,
    ) -> Res<()> {
        let (col, val) = (self.col.slice(0..self.nnz), self.val.slice(0..self.nnz));
        let (cfg, row_ptr, x, y) = (self.cfg, &self.row_ptr, &self.x, &mut self.y.buf);
        launch_typed!(
            which,
            v,
            spmv_m_auto,
            spmv_m_tuned,
            (stream, cfg, row_ptr, &col, &val, x, y)
        )
    }
    fn typed_choice(
        &self,
        stream: &Arc<CudaStream>,
        which: Typed,
    ) -> (Option<Variant>, &'static [Variant]) {
        typed_choice!(which, stream, spmv_m_auto, spmv_m_tuned)
    }
    fn reset(&mut self, env: &Env) -> Res<()> {
        self.y.reset(env)
    }
    fn check(&self, env: &Env) -> Res<(bool, String)> {
        self.y.check(env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_multiplies_csr_by_x() {
        // [[1, 0, 2], [0, 0, 0], [0, 3, 0]] * [1, 2, 3]
        let y = reference(
            &[0, 2, 2, 3],
            &[0, 2, 1],
            &[1.0, 2.0, 3.0],
            &[1.0, 2.0, 3.0],
        );
        assert_eq!(y, vec![7.0, 0.0, 6.0]);
    }
}
