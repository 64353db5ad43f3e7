//! Compiles the gather kernels to PTX (sm_80 and sm_90 unless LOOKAHEAD_ARCHS says
//! otherwise) for the host side to embed. While the crate itself is being compiled for the
//! GPU, the builder does nothing.
fn main() {
    lookahead_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).build_for_cargo();
}
