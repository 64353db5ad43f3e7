//! Compiles this crate's kernels to PTX (sm_80 and sm_90 unless LOOKAHEAD_ARCHS says
//! otherwise), as docs/guide.md section 1 says.
fn main() {
    lookahead_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).build_for_cargo();
}
