//! Cross-crate tests for Lookahead live in `tests/`; this library only carries the PTX
//! the build script compiled for them.

/// `gpu-kernels` compiled for sm_70, sm_80 and sm_90.
pub mod gpu_kernels_ptx {
    include!(concat!(env!("OUT_DIR"), "/gpu_kernels_ptx.rs"));
}
