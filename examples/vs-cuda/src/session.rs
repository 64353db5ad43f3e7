//! What each program of the suite sets up before its first benchmark: the results folder, the
//! GPU, both languages' modules, the seed, the run's description and the timing environment.

use std::path::Path;

use cudarc::driver::sys;
use lookahead::Gpu;
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;

use crate::bench::Env;
use crate::lang::{self, Compiled};
use crate::report::Meta;
use crate::run::Reps;
use crate::Res;

/// A program's run on GPU 0.
pub struct Session {
    pub gpu: Gpu,
    pub out: OutDir,
    pub compiled: Compiled,
    pub env: Env,
    pub reps: Reps,
    pub meta: Meta,
}

impl Session {
    /// Creates `out` (before anything is measured, so a bad folder fails first), opens GPU 0,
    /// compiles both languages' modules, and draws the seed when none is given.
    pub fn open(out: &Path, seed: Option<u64>, reps: Reps) -> Res<Session> {
        let out = OutDir::create(out)?;
        let gpu = Gpu::new(0)?;
        let sms = (gpu.context())
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let compiled = lang::compile(&gpu)?;
        let meta = Meta {
            header: RunHeader::for_gpu(&gpu)?,
            rust_ptx: compiled.rust_desc.clone(),
            cuda_ptx: compiled.cuda_desc.clone(),
            nvrtc: compiled.nvrtc.clone(),
            seed: seed.unwrap_or_else(rand::random),
            reps: reps.timed,
            warmup: reps.warmup,
        };
        let env = Env {
            stream: gpu.stream().clone(),
            sms: sms as u32,
        };
        Ok(Session {
            gpu,
            out,
            compiled,
            env,
            reps,
            meta,
        })
    }
}

/// Whether benchmark `name` is among `only` (every one when `only` is empty).
pub fn selected(only: &[String], name: &str) -> bool {
    only.is_empty() || only.iter().any(|o| o == name)
}

/// The program's verdict: `ok`, after saying on stderr when a check failed.
pub fn verdict(ok: bool) -> bool {
    if !ok {
        eprintln!("some checks FAILED (see above)");
    }
    ok
}
