#!/usr/bin/env bash
# The test command: installs dependencies, builds everything (every backend
# whose toolchain is present), runs the whole suite. With CI=true a missing
# CPU or OpenCL platform fails the run instead of skipping; GPU tests skip
# cleanly on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
BUILD_DIR="${BUILD_DIR:-build}" scripts/build.sh -DNEXTTOK_TESTS=ON
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" --timeout 900
# The Python package (tests/python): CPU-only pip build, numpy + hypothesis.
scripts/python_test.sh
# nexttok.compat / nexttok.integrations and the end-to-end decode (CPU): torch,
# transformers and xgrammar in a virtual environment of their own.
scripts/integration_test.sh
