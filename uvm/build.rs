//! Compiles the crate's device code (`kernels/`) to PTX for the probe and the request ring.
fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    lookahead_builder::KernelBuilder::new(dir).build_for_cargo();
}
