//! Compile tests of the DSL (trybuild): `ui/pass` must compile on the host with stable
//! rustc (kernel bodies are type-checked there too); every file in `ui/compile_fail` must
//! fail with exactly the checked-in `.stderr` (regenerate with `TRYBUILD=overwrite` after a
//! deliberate message change, and review the diff).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/compile_fail/*.rs");
    // lookahead-cuda-std's attributes (Rust-CUDA's `cuda_std` API).
    t.pass("ui/cuda_std_pass/*.rs");
    t.compile_fail("ui/cuda_std_fail/*.rs");
}
