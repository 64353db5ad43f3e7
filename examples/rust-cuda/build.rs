// As in a Rust-CUDA host crate: the build script works out its paths first, then builds the
// kernel crate into PTX and uses the path `build()` returns.
use std::env;
use std::path::PathBuf;

use cuda_builder::{CudaBuilder, NvvmArch};

fn main() {
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    // sm_80: the kernels use atomics with orderings, which need sm_70 or later.
    let ptx = CudaBuilder::new(manifest_dir.join("kernels"))
        .arch(NvvmArch::Compute80)
        .copy_to(out_dir.join("kernels.ptx"))
        .build()
        .unwrap();
    println!("cargo::rustc-env=RUST_CUDA_KERNELS_PTX={}", ptx.display());
}
