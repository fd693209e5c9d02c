#!/usr/bin/env bash
# The GPU check, in one call on a CUDA machine:
#   1. configure and build: Release, CUDA for $CUDA_ARCHS (default 90a), the
#      tests and the Python package (for the benchmarks); no OpenCL, no tools
#   2. ctest -L gpu: every test that runs on the CUDA device
#   3. the same tests under compute-sanitizer memcheck, then racecheck, each test
#      its own process, 8 at a time
#   4. scripts/device_bench.sh: the CUDA benchmarks with their checks
# Each stage has a time limit, cut to what is left before $DEADLINE seconds
# (default 570; the device tool allows 600 a call). Logs go to $OUT (default
# ./out): summary.md, build.log, tests.log and bench.log here, the benchmarks'
# own logs and JSON in bench-<build>/; the stage table and the benchmark
# tables are printed last.
#
#   scripts/device_check.sh
#   BUILD_DIR=build-x CUDA_ARCHS=90 DEADLINE=500 scripts/device_check.sh
set -u
cd "$(dirname "$0")/.." || exit 2
OUT="${OUT:-$PWD/out}"
export OUT
mkdir -p "$OUT"
build="${BUILD_DIR:-build-device}"
archs="${CUDA_ARCHS:-90a}"
t_start=$(date +%s)
deadline=$((t_start + ${DEADLINE:-570}))
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export SANITIZER
export NEXTTOK_TEST_REQUIRE=cuda  # a missing GPU fails the tests instead of skipping them
rows=()

# stage NAME LIMIT LOG command...: runs the command with a time limit (cut to
# what is left before the deadline), output appended to LOG; records the result.
stage() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0 left rc what
  t0=$(date +%s)
  left=$((deadline - t0))
  if [ "$left" -lt 15 ]; then
    rows+=("| $name | SKIPPED (out of time) | 0s |")
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $name (limit ${limit}s) ===" >>"$log"
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  what="ok"
  [ $rc -ne 0 ] && what="FAILED (rc=$rc)"
  [ $rc -eq 124 ] && what="TIMED OUT after ${limit}s"
  rows+=("| $name | $what | $(($(date +%s) - t0))s |")
  echo "--- $name: $what" >>"$log"
  return $rc
}

# shellcheck source=scripts/gpu_sanitize.sh
. scripts/gpu_sanitize.sh  # gpu_test_lists, sanitize

{
  echo "# device check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) (plus the working tree)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} | tee "$OUT/summary.md"

# ---- 1. build ----------------------------------------------------------------------
stage configure 90 "$OUT/build.log" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DNEXTTOK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs" -DNEXTTOK_OPENCL=OFF -DNEXTTOK_TOOLS=OFF \
  -DNEXTTOK_TESTS=ON -DNEXTTOK_PYTHON=ON -DCMAKE_CUDA_FLAGS=-lineinfo &&
  stage build 300 "$OUT/build.log" cmake --build "$build" -j "$(nproc)"
built=$?
grep -E "error:|FAILED:" "$OUT/build.log" | head -20

# ---- 2. the CUDA tests -------------------------------------------------------------
if [ "$built" -eq 0 ]; then
  stage ctest 120 "$OUT/tests.log" ctest --test-dir "$build" -L gpu -j 8 --output-on-failure
  grep -E "tests passed|tests failed" "$OUT/tests.log"

  # ---- 3. the same tests under compute-sanitizer --------------------------------------
  gpu_test_lists "$build"
  # shellcheck disable=SC2016  # bash -c: stage runs a command; $0 is the list
  stage memcheck 120 "$OUT/tests.log" bash -c 'sanitize memcheck "$0" 100' "$build/gpu_tests.txt"
  # shellcheck disable=SC2016
  stage racecheck 150 "$OUT/tests.log" bash -c 'sanitize racecheck "$0" 130' \
    "$build/gpu_tests_racecheck.txt"
  grep -E "check: [0-9]+ tests, " "$OUT/tests.log"

  # ---- 4. benchmarks ------------------------------------------------------------
  left=$((deadline - $(date +%s) - 15))
  if [ "$left" -ge 60 ]; then
    stage bench $((left + 10)) "$OUT/bench.log" scripts/device_bench.sh "$build" "$left"
  else
    rows+=("| bench | SKIPPED (out of time) | 0s |")
  fi
else
  rows+=("| tests, bench | NOT RUN (no build) | - |")
fi

{
  echo
  echo "| stage | result | time |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo "total $(($(date +%s) - t_start))s; logs in $OUT"
  grep -vE "^===|^---" "$OUT/bench.log" 2>/dev/null
} | tee -a "$OUT/summary.md"
! printf '%s\n' "${rows[@]}" | grep -qvE '\| ok \|'
