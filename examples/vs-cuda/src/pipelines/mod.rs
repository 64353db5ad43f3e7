//! The pipelined kernels (`vs_cuda_kernels::pipelined`) against their CUDA C++ twins
//! (`cuda/pipelined.cu`), in each copy kind and at 2, 3 and 4 stages: every entry checked
//! against a CPU reference on poisoned outputs in both languages, then timed (the two
//! alternating launch by launch), and compared with the run's own device-to-device copy
//! rate (streaming kernels) or the GPU's FP32 peak (the GEMM).

mod gather;
mod gemm;
mod reduce;
mod report;
mod stencil;

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaFunction, CudaStream, LaunchConfig};
use lookahead::timing::repeat_on_stream;
use rand::rngs::StdRng;
use vs_cuda_kernels::BLOCK_SIZE;

use crate::bench::{Bench, Env, Typed};
use crate::lang::Lang;
use crate::report::Timing;
use crate::run::{check_pair, time_pair, Reps};
use crate::tuner::TunerRow;
use crate::Res;

pub use report::{write_outputs, PipeMeta, PipeRow};

/// A pipelined kernel on its prepared data: a [`Bench`] (the kernel's base name, its
/// launch, reset and check) whose grid the runner sets per entry.
pub trait PipeBench: Bench {
    /// Sets the grid for the next launches: `resident` blocks fit on the GPU at once.
    fn set_grid(&mut self, resident: u32);
    /// Floating-point operations per launch (0: a streaming kernel, compared with the copy
    /// rate instead).
    fn flops(&self) -> f64 {
        0.0
    }
}

/// `Bench::typed_name`, `launch_typed` and `typed_choice` of a pipelined benchmark: its
/// kernel tuned by measurement (`$tuned`, `stages = auto, copy = auto`), launched with
/// `($arg, ..)` after the stream and launch configuration. The benchmark's `self` is passed
/// in so the arguments can name its fields.
macro_rules! tuned_methods {
    ($self:ident, $tuned:ident, ($($arg:expr),*)) => {
        fn typed_name(&$self, _: crate::bench::Typed) -> String {
            vs_cuda_kernels::$tuned::NAME.to_string()
        }
        fn launch_typed(
            &mut $self,
            stream: &std::sync::Arc<cudarc::driver::CudaStream>,
            which: crate::bench::Typed,
            v: Option<lookahead::launch::autotune::Variant>,
        ) -> crate::Res<()> {
            use vs_cuda_kernels::$tuned as k;
            crate::pipelines::tuned_only(which)?;
            let cfg = $self.cfg;
            match v {
                None => k::launch(stream, cfg, $($arg),*)?,
                Some(v) => k::launch_variant(v, stream, cfg, $($arg),*)?,
            }
            Ok(())
        }
        fn typed_choice(
            &$self,
            stream: &std::sync::Arc<cudarc::driver::CudaStream>,
            _: crate::bench::Typed,
        ) -> (
            Option<lookahead::launch::autotune::Variant>,
            &'static [lookahead::launch::autotune::Variant],
        ) {
            use vs_cuda_kernels::$tuned as k;
            (k::auto_choice(stream), k::CANDIDATES)
        }
    };
}
pub(crate) use tuned_methods;

/// The pipelined kernels have one typed kernel each, the tuned one.
pub(crate) fn tuned_only(which: Typed) -> Res<()> {
    match which {
        Typed::Tuned => Ok(()),
        Typed::Auto => Err("the pipelined kernels have no `level = auto` kernel".into()),
    }
}

/// The tuned kernel of `b` (`stages = auto, copy = auto`): every candidate measured
/// exhaustively, then its launcher tuning itself from scratch, all at one launch shape: the
/// blocks every candidate keeps resident (the grid-stride kernels) or the problem's grid.
pub fn run_tuned(
    env: &mut Env,
    b: &mut dyn PipeBench,
    rust: &Lang,
    reps: Reps,
    ctx: &Arc<CudaContext>,
) -> Res<TunerRow> {
    let name = b.typed_name(Typed::Tuned);
    let (_, candidates) = b.typed_choice(&env.stream, Typed::Tuned);
    let mut fit = u32::MAX;
    for v in candidates {
        let entry = if v.is_plain() {
            name.clone()
        } else {
            format!("{name}__{}", v.name())
        };
        fit = fit.min(resident(&rust.function(&entry)?, env.sms)?);
    }
    b.set_grid(fit);
    let row = crate::tuner::measure_typed(env, b, reps.timed, ctx, true)?;
    println!(
        "  {name}: tuned to {} after {} launches ({:.1} ms); best measured {} ({:.4} ms), chosen {:.4} ms",
        row.chosen.name(),
        row.launches,
        row.settled_ms,
        row.best().variant.name(),
        row.best().ms.median,
        row.chosen_ms()
    );
    Ok(row)
}

/// Makes one benchmark's inputs on the device: `(env, rng, scale)`.
pub type MakePipe = fn(&Env, &mut StdRng, f64) -> Res<Box<dyn PipeBench>>;

/// Every pipelined benchmark by kernel name, in the order they run.
pub const PIPE_BENCHES: [(&str, MakePipe); 4] = [
    ("pipe_reduce", |e, r, s| {
        Ok(Box::new(reduce::PipeReduce::new(e, r, s)?))
    }),
    ("pipe_stencil", |e, r, s| {
        Ok(Box::new(stencil::PipeStencil::new(e, r, s)?))
    }),
    ("pipe_gemm", |e, r, s| {
        Ok(Box::new(gemm::PipeGemm::new(e, r, s)?))
    }),
    ("pipe_gather", |e, r, s| {
        Ok(Box::new(gather::PipeGather::new(e, r, s)?))
    }),
];

/// The copy kinds the GPU of compute capability `cc` has.
pub fn kinds(cc: u32) -> &'static [&'static str] {
    if cc >= 90 {
        &["cp_async", "bulk"]
    } else {
        &["cp_async"]
    }
}

/// The stage counts every kernel is built with.
pub const STAGES: [u32; 3] = [2, 3, 4];

/// A launch configuration of `blocks` blocks of [`BLOCK_SIZE`].
pub fn blocks(blocks: u32) -> LaunchConfig {
    crate::bench::grid_cfg(blocks)
}

/// Device-to-device copy rate, GB/s counting bytes read and written (median of `reps`
/// copies of 1 GiB after `warmup`): what the streaming kernels are compared with.
pub fn copy_rate(env: &Env, reps: Reps) -> Res<f64> {
    let n = (1usize << 30) / 4;
    let src = env.stream.alloc_zeros::<f32>(n)?;
    let mut dst = env.stream.alloc_zeros::<f32>(n)?;
    let ms = repeat_on_stream(&env.stream, reps.warmup, reps.timed, || {
        env.stream.memcpy_dtod(&src, &mut dst)?;
        Ok(())
    })?;
    let median = Timing::of(&ms).ok_or("no timed copies")?.median();
    Ok(2.0 * (1u64 << 30) as f64 / (median * 1e-3) / 1e9)
}

/// Single-precision peak, GFLOP/s: SMs x FP32 lanes per SM (64 on sm_80, 128 on sm_86 and
/// later) x 2 (a fused multiply-add) x the maximum clock.
pub fn fp32_peak(ctx: &Arc<CudaContext>, cc: u32) -> Res<f64> {
    use sys::CUdevice_attribute::*;
    let sms = ctx.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as f64;
    let khz = ctx.attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as f64;
    let lanes = if cc == 80 { 64.0 } else { 128.0 };
    Ok(sms * lanes * 2.0 * khz * 1e3 / 1e9)
}

/// Blocks of `f` resident on the whole GPU at once.
fn resident(f: &CudaFunction, sms: u32) -> Res<u32> {
    Ok(f.occupancy_max_active_blocks_per_multiprocessor(BLOCK_SIZE, 0, None)? * sms)
}

/// Checks and times every entry of one benchmark in both languages; a line each.
pub fn run_pipe_bench(
    env: &mut Env,
    b: &mut dyn PipeBench,
    langs: &[Lang; 2],
    reps: Reps,
    ctx: &Arc<CudaContext>,
    cc: u32,
) -> Res<Vec<PipeRow>> {
    let mut rows = Vec::new();
    for &kind in kinds(cc) {
        for stages in STAGES {
            let entry = format!("{}_{kind}_s{stages}", b.kernel());
            let f = [langs[0].function(&entry)?, langs[1].function(&entry)?];
            // The same launch shape in both languages: what both can keep resident.
            b.set_grid(resident(&f[0], env.sms)?.min(resident(&f[1], env.sms)?));
            let mut launch = |b: &mut dyn Bench, env: &Env, k: usize| b.launch(&env.stream, &f[k]);
            let (ok, check) = check_pair(env, b, &mut launch)?;
            let [tr, tc] = time_pair(env, b, reps, ctx, &mut launch)?;
            let row = PipeRow {
                kernel: b.kernel(),
                kind,
                stages,
                grid: b.cfg().grid_dim.0,
                bytes: b.bytes(),
                flops: b.flops(),
                rust: Timing::of(&tr).ok_or("no timed launches")?,
                cuda: Timing::of(&tc).ok_or("no timed launches")?,
                regs: (f[0].num_regs()?, f[1].num_regs()?),
                check,
                ok,
            };
            report::print_row(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Launches `f` with `slices` (each a pointer and a length, as `#[kernel]` lowers them)
/// then `value` (a `#[repr(C)]` struct passed by value).
///
/// # Safety
/// `f`'s parameters must be exactly these slices and then a `T`, each pointer valid for its
/// length.
pub unsafe fn launch_slices_then<T: cudarc::driver::DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    slices: &[(u64, usize)],
    value: &T,
) -> Res<()> {
    use cudarc::driver::PushKernelArg;
    let mut l = stream.launch_builder(f);
    for (ptr, len) in slices {
        l.arg(ptr).arg(len);
    }
    l.arg(value);
    l.launch(cfg)?;
    Ok(())
}

/// Integer-valued floats in `[-range, range]`: sums and small multiples of them are exact
/// in f32, so the checks of the reduction-free kernels compare exactly.
pub fn small_ints(rng: &mut StdRng, n: usize, range: i32) -> Vec<f32> {
    use rand::Rng;
    (0..n)
        .map(|_| rng.gen_range(-range..=range) as f32)
        .collect()
}

/// `(ok, detail)` of an exact comparison of `got` with `want` (outputs poisoned with NaN,
/// so unwritten ones show).
pub fn exact_check(got: &[f32], want: &[f32]) -> (bool, String) {
    let wrong = (got.iter().zip(want)).filter(|(g, w)| g != w).count();
    let first = (got.iter().zip(want)).position(|(g, w)| g != w);
    let ok = wrong == 0 && got.len() == want.len();
    let detail = match first {
        Some(i) => format!(
            "{wrong} of {} differ, first at {i}: {} vs {}",
            want.len(),
            got[i],
            want[i]
        ),
        None => format!("all {} exact", want.len()),
    };
    (ok, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_check_finds_unwritten_and_wrong_outputs() {
        assert!(exact_check(&[1.0, 2.0], &[1.0, 2.0]).0);
        let (ok, detail) = exact_check(&[1.0, f32::NAN], &[1.0, 2.0]);
        assert!(
            !ok && detail.starts_with("1 of 2 differ, first at 1"),
            "{detail}"
        );
        assert!(!exact_check(&[1.0], &[1.0, 2.0]).0, "a short output fails");
    }

    #[test]
    fn every_entry_has_a_cuda_twin_and_each_bench_its_kernel() {
        let twins = vs_cuda_kernels::CUDA_TWINS;
        for entry in vs_cuda_kernels::PIPELINED {
            let (base, kind_stages) = entry.split_at(entry.rfind("_s").unwrap());
            let stages = &kind_stages[2..];
            let kind = if base.ends_with("_bulk") {
                "bulk"
            } else {
                "cp_async"
            };
            let kernel = base.strip_suffix(&format!("_{kind}")).unwrap();
            assert!(
                twins.contains(&format!("PIPE_ENTRIES({kind}, {stages}, ")),
                "{entry}"
            );
            assert!(
                twins.contains(&format!(" {kernel}_##kind##_s##S(")),
                "{entry}"
            );
            let archs = if kind == "bulk" {
                &[90][..]
            } else {
                &[80, 90][..]
            };
            for (arch, ptx) in vs_cuda_kernels::PTX {
                assert_eq!(
                    ptx.contains(&format!(".entry {entry}(")),
                    archs.contains(arch),
                    "{entry} in sm_{arch}"
                );
            }
            assert!(PIPE_BENCHES.iter().any(|(k, _)| *k == kernel), "{entry}");
        }
        for (kernel, _) in PIPE_BENCHES {
            for kind in kinds(90) {
                for s in STAGES {
                    let entry = format!("{kernel}_{kind}_s{s}");
                    assert!(
                        vs_cuda_kernels::PIPELINED.contains(&entry.as_str()),
                        "{entry}"
                    );
                }
            }
        }
    }
}
