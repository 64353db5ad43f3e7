#!/usr/bin/env bash
# The test command: set-up, formatting, lints, then every test that needs no GPU.
# GPU tests are `#[ignore = "needs a CUDA GPU"]`; scripts/gpu-tests.sh runs them on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace
