#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs `nexttok bench` on the
# best backend present (CUDA, then OpenCL, then the CPU). Extra arguments go
# to `nexttok bench` (e.g. --json, --svg chart.svg, --full).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
BUILD_DIR="${BUILD_DIR:-build}" scripts/build.sh -DNEXTTOK_TESTS=OFF
exec "${BUILD_DIR:-build}/tools/nexttok/nexttok" bench "$@"
