#!/usr/bin/env bash
# The main job: installs dependencies, builds, and benchmarks nexttok on the
# best backend present. With a CUDA GPU and torch, the W1-W4 workloads run
# through bench/cuda_*_bench.py (our kernels beside the torch baselines in one
# process); otherwise `nexttok bench` runs on the CPU backend (extra arguments go
# to it: --json, --svg chart.svg, --full, --backend opencl).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build="${BUILD_DIR:-build}"
BUILD_DIR="$build" scripts/build.sh -DNEXTTOK_TESTS=OFF
if nvidia-smi -L >/dev/null 2>&1 && [ -f "$build/libnexttok.so" ] &&
   python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  python3 bench/cuda_sampling_bench.py --lib "$build/libnexttok.so" --check
  exec python3 bench/cuda_lm_head_bench.py --lib "$build/libnexttok.so" --check --bench
fi
exec "$build/tools/nexttok/nexttok" bench "$@"
