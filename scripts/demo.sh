#!/usr/bin/env bash
# The main demo: set-up, build the kernels to PTX, run them on the GPU and check them
# against the CPU. On a machine without a GPU it says so and runs them on the CPU emulator.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo run --release --quiet -p lookahead-demo --bin demo -- "$@"
