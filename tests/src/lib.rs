//! Cross-crate tests for Lookahead live in `tests/`; this library carries the PTX the
//! build script compiled for them and a small PTX reader for loop-placement checks.

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
