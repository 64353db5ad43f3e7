//! Builds the project's kernel crates for every architecture the PTX tests check
//! (sm_70, sm_80, sm_90), independently of what LOOKAHEAD_ARCHS says for the host build:
//! `demo-kernels` (the example kernels) and `ptx-kernels` (one kernel per intrinsic and
//! `#[prefetch_next]` form).
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
}
