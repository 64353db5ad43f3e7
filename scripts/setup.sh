#!/usr/bin/env bash
# Installs what building Lookahead's kernels needs, idempotently, and says what it installs:
#   - a Rust toolchain that can build `core` for nvptx64-nvidia-cuda, with LLVM tools of the
#     same LLVM version: Debian's rustc-web + cargo-web + rust-web-src + llvm-22
#     (skipped when a rustup nightly with rust-src and llvm-tools is present);
#   - ptxas and libdevice: PyPI's nvidia-cuda-nvcc-cu12 wheel.
# Safe to run repeatedly; prints one line per component.
set -euo pipefail

APT_PACKAGES=(rustc-web cargo-web rust-web-src llvm-22)
PIP_PACKAGE="nvidia-cuda-nvcc-cu12==12.9.86"

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "setup: need root to run: $*" >&2; exit 1; fi
}

have_rustup_nightly_with_src() {
    command -v rustup >/dev/null 2>&1 || return 1
    local sysroot
    sysroot=$(rustup run nightly rustc --print sysroot 2>/dev/null) || return 1
    [ -f "$sysroot/lib/rustlib/src/rust/library/core/Cargo.toml" ] &&
        ls "$sysroot"/lib/rustlib/*/bin/llvm-link >/dev/null 2>&1
}

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found; install Rust (rustup or Debian's cargo) first" >&2
    exit 1
fi

if have_rustup_nightly_with_src; then
    echo "setup: device toolchain: rustup nightly with rust-src and llvm-tools (already present)"
else
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "setup: device toolchain: Debian ${APT_PACKAGES[*]} (already installed)"
    else
        echo "setup: installing Debian packages: ${missing[*]} (Rust 1.96 with library source, LLVM 22 tools; about 1 GB)"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        echo "setup: installed ${missing[*]}"
    fi
fi

PYTHON=$(command -v python3 || command -v python || true)
if [ -z "$PYTHON" ]; then
    echo "setup: python3 not found; install python3 and pip to get ptxas/libdevice" >&2
    exit 1
fi
# Capture first: `grep -q` stops reading early, and under pipefail pip's broken pipe would
# count as "not installed".
installed=$("$PYTHON" -m pip show nvidia-cuda-nvcc-cu12 2>/dev/null || true)
if grep -q '^Version: 12.9.86$' <<<"$installed"; then
    echo "setup: ptxas + libdevice: $PIP_PACKAGE (already installed)"
else
    echo "setup: installing PyPI package $PIP_PACKAGE (ptxas and libdevice, about 40 MB)"
    "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore "$PIP_PACKAGE"
    echo "setup: installed $PIP_PACKAGE"
fi
