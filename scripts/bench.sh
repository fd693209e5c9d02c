#!/usr/bin/env bash
# The main job: installs dependencies, builds, and benchmarks nexttok on the
# best backend present. With a CUDA GPU, nvcc and torch, the W1-W4 workloads
# run through scripts/device_bench.sh (bench/cuda_*_bench.py on the Python
# package of this build: our kernels beside the torch baselines in one process,
# after their correctness checks); otherwise `nexttok bench` runs on the CPU
# backend (extra arguments go to it: --json, --svg chart.svg, --full, --backend opencl).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build="${BUILD_DIR:-build}"
if nvidia-smi -L >/dev/null 2>&1 && { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } &&
   python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  BUILD_DIR="$build" scripts/build.sh -DNEXTTOK_TESTS=OFF -DNEXTTOK_PYTHON=ON
  exec scripts/device_bench.sh "$build"
fi
BUILD_DIR="$build" scripts/build.sh -DNEXTTOK_TESTS=OFF
exec "$build/tools/nexttok/nexttok" bench "$@"
