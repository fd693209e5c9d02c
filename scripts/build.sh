#!/usr/bin/env bash
# Configures and builds nexttok into ${BUILD_DIR:-build}. CUDA and OpenCL are
# on when their toolchains are present (nvcc on PATH or in /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >&2
cmake --build "$build_dir" -j "$(nproc)" >&2
