//! Compiles the IVF kernels to PTX for the host side to embed.
fn main() {
    lookahead_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).build_for_cargo();
}
