//! Builds the project's kernel crates for every architecture the PTX tests check
//! (sm_70, sm_80, sm_90), independently of what LOOKAHEAD_ARCHS says for the host build:
//! `demo-kernels` (the example kernels) and `ptx-kernels` (one kernel per intrinsic and
//! `#[prefetch_next]` form); and the Rust-CUDA-style kernels of `examples/rust-cuda`
//! through `cuda_builder` (lookahead-cuda-builder), for sm_80 and sm_90, and once more for
//! sm_90 with the `extra-kernel` feature (`build_args`) into `OUT_DIR/rust_cuda_extra.ptx`.
use cuda_builder::{CudaBuilder, NvvmArch};
use lookahead_builder::{Arch, KernelBuilder};

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in [
        root.join("../examples/demo/kernels"),
        root.join("ptx-kernels"),
    ] {
        KernelBuilder::new(dir)
            .archs([Arch::SM_70, Arch::SM_80, Arch::SM_90])
            .build_for_cargo();
    }
    let rust_cuda = root.join("../examples/rust-cuda/kernels");
    CudaBuilder::new(&rust_cuda)
        .kernel_builder()
        .unwrap_or_else(|e| panic!("{e}"))
        .archs([Arch::SM_80, Arch::SM_90])
        .build_for_cargo();
    // sm_90, not sm_80: `examples/rust-cuda`'s build script builds the crate for sm_80
    // without the feature at the same time, and two builds of one crate with different
    // features in one build folder write the same artifact (cargo names a cdylib without
    // a hash), so one could link the other's bitcode.
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let extra = CudaBuilder::new(&rust_cuda)
        .arch(NvvmArch::Compute90)
        .build_args(&["--features", "extra-kernel"])
        .copy_to(out_dir.join("rust_cuda_extra.ptx"))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(extra, out_dir.join("rust_cuda_extra.ptx"));
}
