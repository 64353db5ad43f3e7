#!/usr/bin/env bash
# FAISS GPU beside Lookahead on the same IVF data, on a GPU machine with CUDA 13, cmake and
# ninja (no registry needed). FAISS's C++ source and an OpenBLAS build are given by path;
# nothing of them is kept in this repository.
#
#   bash scripts/faiss-baseline.sh compare FAISS_SRC OPENBLAS_TAR OUT   # all of the below
#   bash scripts/faiss-baseline.sh build FAISS_SRC OPENBLAS_TAR         # libfaiss.a + faiss_side
#   bash scripts/faiss-baseline.sh run DATA_DIR OUT_CSV [BATCHES] [REPS]
#
# `compare` builds FAISS's side, runs ours (`faiss_compare run`: the data set into
# $FAISS_DATA, default /tmp/faiss-data, and our rows), runs FAISS's on the same files, and
# writes results/faiss.{md,csv,svg} into OUT (`faiss_compare report`). `faiss_compare` is
# taken from $FAISS_COMPARE (default .device/bin/faiss_compare, which
# `bash scripts/gpu-tests.sh build` puts there). A `faiss_side` already linked can be given
# in $FAISS_SIDE to skip the build (its source must be this checkout's).
#
# `build` configures FAISS as its GPU users would (Release, sm_90, no Python, no cuVS, no
# MKL, OpenBLAS), builds the static libfaiss.a (about 3 minutes on 16 cores) and links
# examples/faiss-compare/cpp/faiss_side.cpp against it. It works in $FAISS_BUILD
# (default /tmp/faiss-build) and reuses a finished libfaiss.a there. `run` runs faiss_side
# on a data set written by `faiss_compare run`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${FAISS_BUILD:-/tmp/faiss-build}

die() { echo "faiss-baseline: $*" >&2; exit 1; }

build() {
    local src=$1 blas_tar=$2
    [ -f "$src/CMakeLists.txt" ] && [ -d "$src/faiss/gpu" ] || die "$src is not a FAISS source tree"
    [ -f "$blas_tar" ] || die "$blas_tar not found"
    command -v nvcc >/dev/null || die "nvcc not found (CUDA toolkit needed)"
    mkdir -p "$BUILD/openblas"
    tar xJf "$blas_tar" -C "$BUILD/openblas"
    local blas
    blas=$(ls "$BUILD"/openblas/libopenblas*.so | head -n 1)
    [ -n "$blas" ] || die "no libopenblas*.so in $blas_tar"
    if [ ! -f "$BUILD/faiss/faiss/libfaiss.a" ]; then
        local t=$SECONDS
        cmake -S "$src" -B "$BUILD/faiss" -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DFAISS_ENABLE_GPU=ON -DFAISS_ENABLE_PYTHON=OFF -DBUILD_TESTING=OFF \
            -DFAISS_ENABLE_EXTRAS=OFF -DFAISS_ENABLE_MKL=OFF -DFAISS_ENABLE_C_API=OFF \
            -DCMAKE_CUDA_ARCHITECTURES=90 -DFAISS_OPT_LEVEL=generic \
            -DBLAS_LIBRARIES="$blas" -DLAPACK_LIBRARIES="$blas" >"$BUILD/cmake.log" 2>&1 ||
            { tail -n 40 "$BUILD/cmake.log"; die "cmake failed"; }
        ninja -C "$BUILD/faiss" -j "$(nproc)" faiss >"$BUILD/ninja.log" 2>&1 ||
            { tail -n 40 "$BUILD/ninja.log"; die "ninja failed"; }
        echo "faiss-baseline: libfaiss.a built in $((SECONDS - t)) s"
    fi
    local cuda
    cuda=$(dirname "$(dirname "$(command -v nvcc)")")
    g++ -O2 -std=c++17 -fopenmp -I "$src" -I "$cuda/include" \
        examples/faiss-compare/cpp/faiss_side.cpp "$BUILD/faiss/faiss/libfaiss.a" "$blas" \
        -L "$cuda/lib64" -lcublas -lcudart \
        -Wl,--disable-new-dtags,-rpath,"$(dirname "$blas")" \
        -o "$BUILD/faiss_side"
    echo "faiss-baseline: $BUILD/faiss_side (FAISS $(cat "$src/COMMIT" 2>/dev/null || echo 'commit unknown'))"
}

compare() {
    local src=$1 blas_tar=$2 out=$3 data=${FAISS_DATA:-/tmp/faiss-data}
    local ours=${FAISS_COMPARE:-.device/bin/faiss_compare}
    [ -x "$ours" ] || die "$ours not found (bash scripts/gpu-tests.sh build)"
    if [ -n "${FAISS_SIDE:-}" ]; then
        mkdir -p "$BUILD/openblas" && tar xJf "$blas_tar" -C "$BUILD/openblas"
        install -m 755 "$FAISS_SIDE" "$BUILD/faiss_side"
    else
        build "$src" "$blas_tar"
    fi
    mkdir -p "$out"
    "$ours" run --dir "$data" --csv "$out/ours_rows.csv" ${FAISS_COMPARE_ARGS:-}
    LD_LIBRARY_PATH="$BUILD/openblas" "$BUILD/faiss_side" "$data" "$out/faiss_rows.csv" 300 5
    "$ours" report --ours "$out/ours_rows.csv" --faiss "$out/faiss_rows.csv" \
        --header "$data/run_header.md" --out "$out" \
        --faiss-build "commit $(cat "$src/COMMIT" 2>/dev/null || echo unknown), Release, sm_90, OpenBLAS 0.3.15, GpuIndexIVFFlat defaults (float32 lists, interleaved layout), nprobe and k from the data set"
}

case "${1:-}" in
compare)
    [ $# -eq 4 ] || die "usage: $0 compare FAISS_SRC OPENBLAS_TAR OUT"
    compare "$2" "$3" "$4"
    ;;
build)
    [ $# -eq 3 ] || die "usage: $0 build FAISS_SRC OPENBLAS_TAR"
    build "$2" "$3"
    ;;
run)
    [ $# -ge 3 ] || die "usage: $0 run DATA_DIR OUT_CSV [BATCHES] [REPS]"
    [ -x "$BUILD/faiss_side" ] || die "build first: $BUILD/faiss_side not found"
    LD_LIBRARY_PATH="$BUILD/openblas" "$BUILD/faiss_side" "$2" "$3" "${4:-300}" "${5:-5}"
    ;;
*)
    die "usage: $0 compare FAISS_SRC OPENBLAS_TAR OUT | build FAISS_SRC OPENBLAS_TAR | run DATA_DIR OUT_CSV [BATCHES] [REPS]"
    ;;
esac
