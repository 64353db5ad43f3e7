#!/usr/bin/env bash
# compute-sanitizer on the IVF kernels (run on the GPU machine, after
# `bash scripts/gpu-tests.sh build` here and with carry [".device"]):
#   memcheck: out-of-bounds and misaligned global/shared accesses, with every policy's
#             code path (faults, in-kernel hints, GPU-driven requests, GPU-driven pull);
#   racecheck: shared-memory hazards in the scan's tiles and the warp merges;
#   both again on a few queries over many lists (the coarse step in slices).
# A small index keeps the instrumented runs short. Exits non-zero on any reported error.
set -euo pipefail
cd "$(dirname "$0")/.."
SAN=${COMPUTE_SANITIZER:-compute-sanitizer}
command -v "$SAN" >/dev/null || SAN=/usr/local/cuda/bin/compute-sanitizer
BIN=.device/bin/ivf_search
ARGS=(--vectors 60000 --dim 64 --nlist 64 --queries 64 --nprobe 4 --recall-sample 8)
failed=0
for policy in faults kernel-hints gpu-requests gpu-pull; do
    echo "== memcheck, policy $policy"
    "$SAN" --tool memcheck --error-exitcode 99 "$BIN" "${ARGS[@]}" --policy "$policy" || failed=$((failed + 1))
done
for tool in racecheck synccheck; do
    for policy in faults gpu-pull; do
        echo "== $tool, policy $policy"
        "$SAN" --tool "$tool" --error-exitcode 99 "$BIN" "${ARGS[@]}" --policy "$policy" || failed=$((failed + 1))
    done
done
# A few queries over many lists: the coarse step runs in slices and coarse_merge merges them.
SLICED=(--vectors 60000 --dim 64 --nlist 1024 --queries 4 --nprobe 8 --recall-sample 4)
for tool in memcheck racecheck; do
    echo "== $tool, sliced coarse step"
    "$SAN" --tool "$tool" --error-exitcode 99 "$BIN" "${SLICED[@]}" --policy faults || failed=$((failed + 1))
done
echo "sanitize-ivf: $failed failing run(s)"
[ "$failed" = 0 ]
