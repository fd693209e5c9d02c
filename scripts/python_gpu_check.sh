#!/usr/bin/env bash
# The Python package on a CUDA machine without network (the H200 image: torch,
# nanobind, scikit-build-core, pytest, hypothesis, cupy, jax):
#   1. pip install --no-build-isolation . (CUDA on) into $OUT-independent $SITE
#   2. pytest tests/python with NEXTTOK_TEST_REQUIRE=cuda (CUDA cases fail, not skip)
#   3. the Hugging Face kernel directory (CMake target nexttok_hf_kernel) loaded by
#      the real `kernels` package from the wheels in .whl/ (scripts/hf_kernels_check.py)
#   4. bench/python_overhead_bench.py
# Logs under ${OUT:-./out}/python; a table of the stages is printed last.
#
#   scripts/python_gpu_check.sh        # carry .whl (pip download, see README)
#   CUDA_ARCHS=90 DEADLINE=570 scripts/python_gpu_check.sh
set -u
cd "$(dirname "$0")/.." || exit 2
OUT="${OUT:-$PWD/out}"
log="$OUT/python"
mkdir -p "$log"
site="${SITE:-/tmp/nexttok-site}"
build="${BUILD_DIR:-build-pygpu}"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
export CMAKE_BUILD_PARALLEL_LEVEL PYTHONUNBUFFERED=1
t_start=$(date +%s)
deadline=$((t_start + ${DEADLINE:-570}))
rows=()

# stage NAME LIMIT LOG command...: runs with a time limit cut to the deadline.
stage() {
  local name=$1 limit=$2 file=$3
  shift 3
  local t0 left
  t0=$(date +%s)
  left=$((deadline - t0))
  if [ "$left" -lt 10 ]; then rows+=("| $name | SKIPPED (out of time) | 0s |"); return 1; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $name (limit ${limit}s) ===" | tee -a "$file"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$file"
  local rc=${PIPESTATUS[0]} what=ok
  [ "$rc" -ne 0 ] && what="FAILED (rc=$rc)"
  [ "$rc" -eq 124 ] && what="TIMED OUT after ${limit}s"
  rows+=("| $name | $what | $(($(date +%s) - t0))s |")
  return "$rc"
}

{
  echo "# python gpu check $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi -L 2>&1
  python3 -c 'import sys, torch, nanobind, scikit_build_core as s; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nanobind", nanobind.__version__, "scikit-build-core", s.__version__)' 2>&1
} | tee "$log/summary.md"

rm -rf "$site"
stage build 300 "$log/build.log" python3 -m pip install --no-build-isolation --no-deps \
  --target "$site" -Cbuild-dir="$build" -Ccmake.define.NEXTTOK_CUDA="${NEXTTOK_PY_CUDA:-ON}" \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" -v . >/dev/null
tail -5 "$log/build.log"

stage pytest 240 "$log/pytest.log" env PYTHONPATH="$site" NEXTTOK_TEST_REQUIRE=cuda \
  python3 -m pytest -q -p no:cacheprovider -rs tests/python

# `kernels` and what the image lacks, from the wheels carried in .whl/, in a
# directory of their own so that they shadow nothing in the tests above.
hf_site=/tmp/nexttok-hf-site
rm -rf "$hf_site"
stage hf-kernel-dir 120 "$log/hf_kernels.log" cmake --build "$build" --target nexttok_hf_kernel &&
  stage hf-kernels-install 60 "$log/hf_kernels.log" python3 -m pip install -q --no-index \
    --find-links .whl --target "$hf_site" kernels &&
  stage hf-kernels-check 120 "$log/hf_kernels.log" env PYTHONPATH="$hf_site" \
    python3 scripts/hf_kernels_check.py "$build/hf-kernel"
find "$build/hf-kernel" -maxdepth 4 | sort >>"$log/hf_kernels.log"

stage overhead-bench 120 "$log/overhead.log" env PYTHONPATH="$site" \
  python3 bench/python_overhead_bench.py --json "$log/overhead.json"

{
  echo
  echo "| stage | result | time |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo "total $(($(date +%s) - t_start))s; logs in $log"
  echo
  grep -E "passed|failed" "$log/pytest.log" | tail -1
  grep -E "^(ok|FAIL)|checks passed|failed$" "$log/hf_kernels.log"
  grep -E "^\|" "$log/overhead.log"
} | tee -a "$log/summary.md"
# Any failed, timed-out or skipped stage fails the script (the table above says which).
! printf '%s\n' "${rows[@]}" | grep -qvE '\| ok \|'

