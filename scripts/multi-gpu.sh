#!/usr/bin/env bash
# The multi-GPU run, in two halves because the GPU machine has no Rust toolchain:
#   bash scripts/multi-gpu.sh build   # here: the benchmark and the multi-GPU tests into .device-multi/
#   bash scripts/multi-gpu.sh run     # on a machine of two GPUs or more (carry .device-multi):
#                                     # the tests that need two GPUs, then `ivf_shards` over
#                                     # every GPU, in one process and one process per GPU;
#                                     # results and logs into $OUT (or ./multi-gpu-out).
# NCCL is loaded at run time: `run` looks for libnccl.so.2 in Python's nvidia-nccl wheel (as
# PyTorch installs it) or the system's library path, and links it as libnccl.so, the name the
# bindings look for. IVF_SHARDS_ARGS adds arguments to the benchmark (sizes, batches).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.device-multi

build() {
    bash scripts/setup.sh >/dev/null
    rm -rf "$DEST"
    mkdir -p "$DEST"
    cargo build --release -p lookahead-ivf --bin ivf_shards
    cp target/release/ivf_shards "$DEST/"
    for spec in "lookahead-multi two_gpus" "lookahead-ivf shards_two_gpus" "lookahead-ivf shards_gpu"; do
        set -- $spec
        cargo test --release -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null |
            python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        shutil.copy(m["executable"], sys.argv[2])
' "$2" "$DEST/$2"
        test -x "$DEST/$2" || { echo "no test binary $2" >&2; exit 1; }
    done
    strip "$DEST"/* 2>/dev/null || true
    du -sh "$DEST"
}

# Prints a folder holding libnccl.so (a link made to libnccl.so.2 where only that exists).
find_nccl() {
    local dir=""
    dir=$(python3 - <<'EOF' 2>/dev/null || true
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for r in roots:
    for lib in sorted(glob.glob(os.path.join(r, "nvidia", "nccl", "lib", "libnccl.so*"))):
        print(os.path.dirname(lib)); raise SystemExit
EOF
)
    if [ -z "$dir" ]; then
        local lib
        lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so/ {print $NF; exit}')
        [ -n "$lib" ] && dir=$(dirname "$lib")
    fi
    [ -n "$dir" ] || return 1
    local link
    link=$(mktemp -d)
    for f in "$dir"/libnccl.so*; do
        ln -sf "$f" "$link/libnccl.so"
        break
    done
    echo "$link:$dir"
}

run() {
    local out=${OUT:-$PWD/multi-gpu-out}
    mkdir -p "$out/results"
    local started=$SECONDS
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv,noheader | tee "$out/gpus.txt" || true
    nvidia-smi topo -m > "$out/topology.txt" 2>&1 || true
    cat "$out/topology.txt"
    # What NCCL and the pinned host memory depend on, for reading a failure.
    {
        echo "cpus: $(nproc); memory: $(free -g | awk '/Mem:/ {print $2 " GiB, " $7 " GiB available"}')"
        echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
        echo "locked-memory limit: $(ulimit -l); /dev/shm: $(df -h /dev/shm | awk 'NR == 2 {print $2}')"
    } | tee "$out/host.txt"
    local nccl
    if nccl=$(find_nccl); then
        export LD_LIBRARY_PATH="$nccl:${LD_LIBRARY_PATH:-}"
        echo "NCCL from ${nccl#*:}"
    else
        echo "NCCL not found (no nvidia-nccl wheel, nothing in ldconfig): the NCCL parts will fail"
    fi
    local failed=0 summary=""
    for t in two_gpus shards_two_gpus shards_gpu; do
        echo "== $t --ignored"
        if timeout 60 "$DEST/$t" --ignored --test-threads=1 2>&1 | tee "$out/test_$t.log"; then
            summary+="test $t: $(grep -E '^test result' "$out/test_$t.log" | tail -1)"$'\n'
        else
            failed=$((failed + 1))
            summary+="test $t: FAILED (see test_$t.log)"$'\n'
        fi
    done
    echo "== ivf_shards (tests took $((SECONDS - started)) s)"
    # Every GPU, one process each after the in-process runs (all GPUs in one process when
    # nvidia-smi cannot list them).
    local gpus gpu_args=""
    gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | paste -sd, - || true)
    if [ -n "$gpus" ]; then
        gpu_args="--gpus $gpus --ranks $(echo "$gpus" | tr ',' '\n' | wc -l)"
    fi
    # shellcheck disable=SC2086
    if ! timeout 400 "$DEST/ivf_shards" $gpu_args --out "$out/results" ${IVF_SHARDS_ARGS:-} 2>&1 |
        tee "$out/ivf_shards.log"; then
        failed=$((failed + 1))
        summary+="ivf_shards: FAILED (see ivf_shards.log)"$'\n'
    fi
    echo
    echo "== summary ($((SECONDS - started)) s in all; results in $out/results)"
    printf '%s' "$summary"
    # The benchmark's short table is the last thing it prints.
    awk '/^\| index \| configuration \| cold of pinned/ {keep = 1} keep' "$out/ivf_shards.log" || true
    [ "$failed" = 0 ]
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
    echo "usage: $0 build|run" >&2
    exit 2
    ;;
esac
