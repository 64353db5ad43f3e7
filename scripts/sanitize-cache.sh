#!/usr/bin/env bash
# compute-sanitizer on the GPU-driven cache over host memory (run on the GPU machine, after
# `bash scripts/gpu-tests.sh build` here and with carry [".device"]):
#   memcheck: out-of-bounds and misaligned accesses to the pinned data, the slots and the
#             tables, on a small case that misses, waits and evicts;
#   racecheck and synccheck: hazards and barrier misuse in the same kernels.
# Exits non-zero on any reported error.
set -euo pipefail
cd "$(dirname "$0")/.."
SAN=${COMPUTE_SANITIZER:-compute-sanitizer}
command -v "$SAN" >/dev/null || SAN=/usr/local/cuda/bin/compute-sanitizer
BIN=.device/tests/kernels__host_cache_kernels
failed=0
for tool in memcheck racecheck synccheck; do
    echo "== $tool"
    "$SAN" --tool "$tool" --error-exitcode 99 "$BIN" --ignored --exact tests::small_case_for_the_sanitizer || failed=$((failed + 1))
done
echo "sanitize-cache: $failed failing run(s)"
[ "$failed" = 0 ]
