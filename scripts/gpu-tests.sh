#!/usr/bin/env bash
# GPU tests, in two halves because the GPU machine has no Rust toolchain:
#   bash scripts/gpu-tests.sh build   # here: build test binaries and programs into .device/
#   bash scripts/gpu-tests.sh run     # on the GPU machine (run tool, carry=[".device"]):
#                                     # runs every `#[ignore = "needs a CUDA GPU"]` test, the
#                                     # demo, the newcomer and rust-cuda examples, and the
#                                     # gather under every Unified Memory policy
#                                     # (uvm_gather); exits non-zero if any fails.
# Each test binary is run with --ignored: a GPU test that finds no GPU fails, it never passes.
# The demo and the newcomer run with --gpu, which fails without a GPU instead of falling back
# to the CPU emulator.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.device

case "${1:-}" in
build)
    bash scripts/setup.sh >/dev/null
    rm -rf "$DEST/tests" "$DEST/bin"
    mkdir -p "$DEST/tests" "$DEST/bin"
    cargo test --workspace --release --no-run --message-format=json 2>/dev/null |
        python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        t = m["target"]
        # proc-macro test binaries link libstd dynamically and hold no GPU tests
        if "proc-macro" in t.get("kind", []):
            continue
        name = (m["package_id"].split("#")[0].rsplit("/", 1)[-1] + "__" + t["name"]).replace("-", "_")
        shutil.copy(m["executable"], os.path.join(sys.argv[1], name))
        print("test binary:", name)
' "$DEST/tests"
    # Only binaries with GPU tests go to the GPU machine (the copy it gets is size-limited).
    for t in "$DEST"/tests/*; do
        grep -q "needs a CUDA GPU" "$t" || rm "$t"
    done
    cargo build --workspace --release --bins --quiet
    for b in target/release/*; do
        if [ -f "$b" ] && [ -x "$b" ] && [[ "$(basename "$b")" != *.* ]]; then cp "$b" "$DEST/bin/"; fi
    done
    strip "$DEST"/tests/* "$DEST"/bin/* 2>/dev/null || true
    du -sh "$DEST"
    ;;
run)
    nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader || true
    failed=0
    # A hung test fails its group instead of holding the machine: each binary gets at most
    # LOOKAHEAD_GPU_TEST_TIMEOUT seconds (timeout's status 124 says it ran out).
    limit=${LOOKAHEAD_GPU_TEST_TIMEOUT:-300}
    for t in "$DEST"/tests/*; do
        echo "== $(basename "$t") --ignored"
        if ! timeout "$limit" "$t" --ignored --test-threads=1; then
            failed=$((failed + 1)); echo "FAILED: $t"
        fi
    done
    for program in "demo --gpu" "lookahead-newcomer --gpu" rust-cuda-example; do
        echo "== $program"
        # shellcheck disable=SC2086 # the program's name, then its flags
        timeout "$limit" "$DEST"/bin/$program || { failed=$((failed + 1)); echo "FAILED: $program"; }
    done
    echo "== uvm_gather --mib 256 --reps 2"
    timeout "$limit" "$DEST/bin/uvm_gather" --mib 256 --reps 2 || { failed=$((failed + 1)); echo "FAILED: uvm_gather"; }
    echo "gpu-tests: $failed failing group(s)"
    [ "$failed" = 0 ]
    ;;
*)
    echo "usage: $0 build|run" >&2
    exit 2
    ;;
esac
