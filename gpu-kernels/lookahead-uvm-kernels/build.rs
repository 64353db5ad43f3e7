//! Compiles this crate's kernels to PTX for its host side to embed (nothing to do while the
//! crate itself is being compiled for the GPU).
fn main() {
    lookahead_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).build_for_cargo();
}
