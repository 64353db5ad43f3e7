//! Cross-crate tests for Lookahead live in `tests/`; this library carries the PTX the
//! build script compiled for them, a small PTX reader for loop-placement checks, and the
//! math kernel's reference and check ([`math`]).

pub mod math;

/// `demo-kernels` compiled for sm_70, sm_80 and sm_90.
pub mod demo_kernels_ptx {
    include!(concat!(env!("OUT_DIR"), "/demo_kernels_ptx.rs"));
}

/// `ptx-kernels` (tests/ptx-kernels) compiled for sm_70, sm_80 and sm_90.
pub mod ptx_kernels_ptx {
    include!(concat!(env!("OUT_DIR"), "/ptx_kernels_ptx.rs"));
}

/// `examples/rust-cuda/kernels` (Rust-CUDA style, through `cuda_builder`) for sm_80 and
/// sm_90.
pub mod rust_cuda_kernels_ptx {
    include!(concat!(env!("OUT_DIR"), "/rust_cuda_kernels_ptx.rs"));
}

/// The module of `modules` (one of the `*_ptx::PTX` lists) built for sm_`cc`.
pub fn module_for(modules: &'static [(u32, &'static str)], cc: u32) -> &'static str {
    modules
        .iter()
        .find(|(a, _)| *a == cc)
        .unwrap_or_else(|| panic!("no sm_{cc} module"))
        .1
}

/// The body of entry `kernel` in the sm_`cc` module of `modules`.
pub fn entry_in(modules: &'static [(u32, &'static str)], cc: u32, kernel: &str) -> &'static str {
    lookahead_builder::ptx::entry_body(module_for(modules, cc), kernel)
        .unwrap_or_else(|| panic!("sm_{cc} lacks {kernel}"))
}

/// `n` values in [-1, 1) from a xorshift generator seeded with `seed`: the GPU tests' inputs,
/// reproducible from the seed.
pub fn input(seed: u32, n: usize) -> Vec<f32> {
    let mut uniform = uniform(seed);
    (0..n)
        .map(|_| uniform(2000) as f32 / 1000.0 - 1.0)
        .collect()
}

/// The xorshift generator of [`input`] as `uniform(k)`: an integer in `0..k` per call.
pub fn uniform(seed: u32) -> impl FnMut(u32) -> u32 {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    move |k| {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s % k
    }
}

/// Runs `ptxas -arch=sm_XX` on every module of `modules` (written to a temporary folder as
/// `<name>.sm_XX.ptx`) and panics with ptxas's message on the first it refuses.
pub fn assert_ptxas_accepts(name: &str, modules: &[(u32, &str)]) {
    let ptxas = lookahead_builder::CudaTools::discover().ptxas.expect(
        "ptxas not found: run scripts/setup.sh (pip nvidia-cuda-nvcc-cu12) or set LOOKAHEAD_PTXAS",
    );
    let dir = std::env::temp_dir().join(format!("lookahead-ptxas-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (cc, text) in modules {
        let file = dir.join(format!("{name}.sm_{cc}.ptx"));
        std::fs::write(&file, text).unwrap();
        lookahead_builder::ptx::validate_with_ptxas(&ptxas, &file, &format!("sm_{cc}"))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Line numbers (within `body`) of `needle` occurrences that lie inside a loop: after a
/// label `L:` and before a later branch back to `L` (`bra ... L;`).
pub fn lines_inside_loops(body: &str, needle: &str) -> Vec<usize> {
    let lines: Vec<&str> = body.lines().collect();
    let mut loops: Vec<(usize, usize)> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.split("//").next().unwrap_or("").trim();
        if let Some(label) = t.strip_suffix(':') {
            if label.starts_with('$') {
                for (j, m) in lines.iter().enumerate().skip(i + 1) {
                    let m = m.split("//").next().unwrap_or("").trim();
                    if m.contains("bra") && m.trim_end_matches(';').trim_end().ends_with(label) {
                        loops.push((i, j));
                    }
                }
            }
        }
    }
    lines
        .iter()
        .enumerate()
        .filter(|(i, l)| l.contains(needle) && loops.iter().any(|&(s, e)| s < *i && *i < e))
        .map(|(i, _)| i)
        .collect()
}
