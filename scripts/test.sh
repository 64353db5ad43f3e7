#!/usr/bin/env bash
# The test command: set-up, formatting, lints, documentation, packaging, then every test that
# needs no GPU. GPU tests are `#[ignore = "needs a CUDA GPU"]`; scripts/gpu-tests.sh runs them
# on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# A CI build runs once: incremental state would only take disk.
# Line tables keep backtraces readable at a fraction of full debug info's disk (a CI machine's
# disk is shared and has run out before).
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
    export CARGO_PROFILE_TEST_DEBUG=line-tables-only
fi
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "== cargo package (the library crates)"
# Cargo treats the packaged crates as registry crates, which never change for a version: it
# reuses their unpacked copies (in a registry folder named after a hash of this checkout's
# path) and what it compiled from them. The verification builds in its own target folder,
# and both are removed for our crates, so each run verifies the code as it is.
VERIFY=target/package-verify
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/lookahead-* target/package \
    "$VERIFY"/debug/deps/liblookahead* "$VERIFY"/debug/.fingerprint/lookahead*
# Verified: each packaged crate builds from its tarball, against the others' tarballs.
cargo package --quiet --allow-dirty --target-dir "$VERIFY" -p lookahead-macros -p lookahead-emu \
    -p lookahead-device -p lookahead -p lookahead-builder -p lookahead-bench \
    -p lookahead-cuda-std-macros -p lookahead-cuda-std -p lookahead-cuda-builder -p lookahead-multi
# Packaged, not verified: their build compiles kernels with a nested cargo that resolves
# lookahead-device from crates.io, which it can only do once that crate is published. The
# crates they depend on are packaged with them, so cargo resolves those from the tarballs.
cargo package --quiet --allow-dirty --no-verify --target-dir "$VERIFY" -p lookahead-macros -p lookahead-emu \
    -p lookahead-device -p lookahead -p lookahead-builder -p lookahead-uvm-kernels -p lookahead-uvm
echo "== cargo test"
cargo test --workspace
