#!/usr/bin/env bash
# The OpenCL cases of the cross-backend suite on NVIDIA's OpenCL driver (a real
# GPU driver beside PoCL). The H200 image ships /usr/lib/libnvidia-opencl.so.1
# without registering it with the ICD loader, so a private vendors directory
# names it (OCL_ICD_VENDORS); PoCL stays listed beside it.
#   scripts/opencl_nvidia_check.sh      # logs under ${OUT:-./out}/opencl-nvidia
set -u
cd "$(dirname "$0")/.." || exit 2
OUT="${OUT:-$PWD/out}"
log="$OUT/opencl-nvidia"
mkdir -p "$log"
build="${BUILD_DIR:-build-opencl-nvidia}"
lib=${NVIDIA_OPENCL_LIB:-/usr/lib/libnvidia-opencl.so.1}
[ -e "$lib" ] || lib=$(ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 2>/dev/null || echo "$lib")
vendors=$(mktemp -d)
echo "$lib" >"$vendors/nvidia.icd"
export OCL_ICD_VENDORS="$vendors"
# The H200 image's loader lists PoCL first, so the NVIDIA GPU is
# device 1 unless told otherwise; clinfo -l below shows the order.
export NEXTTOK_OPENCL_DEVICE="${NEXTTOK_OPENCL_DEVICE:-1}"
{
  echo "# OpenCL on NVIDIA's driver, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
  echo "driver library: $lib ($( [ -e "$lib" ] && echo present || echo MISSING ))"
  command -v clinfo >/dev/null && clinfo -l 2>&1
} | tee "$log/summary.md"
if cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXTTOK_CUDA=OFF -DNEXTTOK_OPENCL=ON \
  -DNEXTTOK_TESTS=ON -DNEXTTOK_TOOLS=OFF >"$log/build.log" 2>&1 &&
  cmake --build "$build" -j "$(nproc)" >>"$log/build.log" 2>&1; then
  # The test device the harness picked, by name, for the record.
  NEXTTOK_TEST_REQUIRE=opencl "$build/tests/nexttok_op_tests" --gtest_filter='*EmptyBatchIsANoOp/opencl' 2>&1 |
    grep -m1 "opencl test device" | tee -a "$log/summary.md"
  NEXTTOK_TEST_REQUIRE=opencl timeout "${CTEST_LIMIT:-400}" ctest --test-dir "$build" -R 'opencl' -j 8 --timeout 120 \
    --output-on-failure >"$log/ctest.log" 2>&1
  echo "ctest rc=$?" | tee -a "$log/summary.md"
  grep -E "tests passed|Failed|\*\*\*" "$log/ctest.log" | tail -25 | tee -a "$log/summary.md"
else
  echo "build FAILED" | tee -a "$log/summary.md"
  grep -E "error|Error" "$log/build.log" | head -20 | tee -a "$log/summary.md"
fi
rm -rf "$vendors"
