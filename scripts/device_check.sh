#!/usr/bin/env bash
# One call on a CUDA machine (the H200): build with the CUDA backend and the
# tests, run the CUDA cases of the cross-backend suite, the W3/W4 benchmark with
# its correctness checks, then the CUDA cases again under compute-sanitizer
# (memcheck, racecheck) with the time that is left. Every stage runs with a time
# limit and whatever happened before; the whole script stays under DEADLINE
# seconds (570). Full logs go to $OUT (default ./out); a short table is printed last.
#
#   scripts/device_check.sh            # about 6-9 minutes
#   BUILD_DIR=build-x CUDA_ARCHS=90 scripts/device_check.sh
#   LM_HEAD=0 scripts/device_check.sh  # sampling and masks only (about 4 minutes)
#   PDL=0 scripts/device_check.sh      # without the NEXTTOK_CUDA_PDL=1 stages (about 2 minutes)
#   NCU_SASS='merge_topk|binary_rows' scripts/device_check.sh  # plus a per-instruction profile
#   NCU_SASS_SAMPLING='sample_scan' ...  # the same for sampling kernels
#   SANITIZE=0 scripts/device_check.sh # without compute-sanitizer
#   MERGE_COMPARE=0 ...                # without timing small batches against the merge kernel
#   SAMPLING=0 scripts/device_check.sh # LM heads only (no W3/W4 bench, sampling profiles or sanitizer runs)
#   NCU_M=16 ...                       # the profiler stages at M = 16 instead of 1
#   NCU_KERNELS='dense_staged' NCU_EXTRA_METRICS='lts__t_bytes.sum' ...  # which kernels, more metrics
#   RACECHECK=0 ...                    # memcheck only
#   BENCH_MATCH='B=1 ' ...             # only the W3/W4 rows matching the regex
#   CTEST_MATCH='LmHeadBinary.*cuda' ...  # only these CUDA cases (ctest -R)
#   LM_HEAD_M=1,64 ...                 # W1/W2 at these M only, with the small checks
#   LATENCY=1 ...                      # plus bench/micro/latency_paths.cu (phase marks)
#   PHASES=1 ...                       # plus bench/micro/lm_head_phases.cu (LM-head warps' cycles)
#   MMA_RATES=1 ...                    # plus bench/micro/mma_rates.cu (warp MMAs' latency, throughput)
#   MASK_PATTERNS=1 ...                # plus bench/micro/mask_patterns.cu (W4 against copies, scatter stores)
#   EXTRA=0 ...                        # without kernel-times and ctest-pass-bulk-copies
#   CTEST_ENVS='N=V ...' ...           # plus the CUDA cases with each switch set
#   COMPARE_ENVS='N=V N=V2' ...        # plus the W3 rows matching COMPARE_MATCH (default
#                                      #   'B=256 V=128256') timed with each switch against none
#                                      #   (tokens compared); LM_COMPARE_ENVS: the same for W1/W2
#                                      #   at LM_COMPARE_M (1,4,16,64)
set -u
cd "$(dirname "$0")/.."
root=$PWD
OUT="${OUT:-$root/out}"
mkdir -p "$OUT"
build="${BUILD_DIR:-build-device}"
archs="${CUDA_ARCHS:-90a}"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export NEXTTOK_TEST_REQUIRE=cuda  # a missing GPU fails the tests instead of skipping them

summary="$OUT/summary.md"
: >"$summary"
rows=()
t_start=$(date +%s)

# The whole script stays under DEADLINE seconds (the device tool allows 600 a call).
deadline=$((t_start + ${DEADLINE:-570}))

# stage NAME LIMIT_SECONDS LOG command...: runs with a time limit (cut to what is
# left before the deadline), records rc and time.
stage() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$(date +%s)
  local left=$((deadline - t0))
  if [ "$left" -lt 15 ]; then
    rows+=("| $name | SKIPPED (out of time) | 0s |")
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $name (limit ${limit}s) ===" | tee -a "$log"
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  local dt=$(($(date +%s) - t0))
  local what="ok"
  [ $rc -ne 0 ] && what="FAILED (rc=$rc)"
  [ $rc -eq 124 ] && what="TIMED OUT after ${limit}s"
  rows+=("| $name | $what | ${dt}s |")
  echo "--- $name: $what in ${dt}s" | tee -a "$log"
  return $rc
}

{
  echo "# device check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) (plus the working tree)"
  nvidia-smi -L 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} | tee -a "$summary"

# ---- build -------------------------------------------------------------------
build_log="$OUT/build.log"
: >"$build_log"
mkdir -p "$build"
if [ "${LATENCY:-0}" = 1 ]; then
  scripts/build_latency_paths.sh "$build/latency_paths" >"$OUT/latency_build.log" 2>&1 &
  latency_build=$!
fi
if [ "${PHASES:-0}" = 1 ]; then
  scripts/build_lm_head_phases.sh "$build/lm_head_phases" >"$OUT/phases_build.log" 2>&1 &
  phases_build=$!
fi
configure=(cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXTTOK_CUDA=ON
  -DCMAKE_CUDA_ARCHITECTURES="$archs" -DCMAKE_CUDA_FLAGS=-lineinfo -DNEXTTOK_OPENCL=OFF
  -DNEXTTOK_TOOLS=OFF)
if ! stage configure 90 "$build_log" "${configure[@]}" -DNEXTTOK_TESTS=ON; then
  # No GoogleTest there: the library and the benchmark still build and run.
  stage configure-without-tests 60 "$build_log" "${configure[@]}" -DNEXTTOK_TESTS=OFF
fi
# -k 0: a broken target (someone's work in progress) does not stop the others.
stage build 210 "$build_log" cmake --build "$build" -j "$(nproc)" -- -k 0
grep -E "error|warning: .*(spill|stack)" "$build_log" | head -20

# ---- tests -------------------------------------------------------------------
op_tests="$build/tests/nexttok_op_tests"
if [ -x "$op_tests" ]; then
  stage ctest 90 "$OUT/ctest.log" ctest --test-dir "$build" -R "${CTEST_MATCH:-/cuda\$|CudaGraph|OptInPaths}" -j 8 \
    --timeout 60 --output-on-failure
  tail -15 "$OUT/ctest.log"
else
  rows+=("| tests | NOT BUILT ($op_tests missing) | - |")
fi

# ---- benchmark ----------------------------------------------------------------
lib="$build/libnexttok.so"
if [ -f "$lib" ]; then
  match=()
  [ -n "${BENCH_MATCH:-}" ] && match=(--match "$BENCH_MATCH")
  [ "${SAMPLING:-1}" = 1 ] && stage bench 160 "$OUT/bench.log" python3 bench/cuda_sampling_bench.py --lib "$lib" --check \
    --budget 100 --json "$OUT/bench.json" "${match[@]}"
  grep -E "FAIL|ERROR|checks:" "$OUT/bench.log" | head -30
  # W1/W2: the fused LM heads beside cuBLAS + torch.topk, with torch.equal checks.
  if [ -n "${LM_HEAD_M:-}" ]; then
    [ "${LM_HEAD:-1}" = 1 ] && stage bench-lm-head 120 "$OUT/bench_lm_head.log" python3 bench/cuda_lm_head_bench.py \
      --lib "$lib" --check --small --bench --m "$LM_HEAD_M"
  else
    [ "${LM_HEAD:-1}" = 1 ] && stage bench-lm-head 170 "$OUT/bench_lm_head.log" python3 bench/cuda_lm_head_bench.py \
      --lib "$lib" --check --check-wide --check-expanded --check-direct --check-pieces --check-sync-mma --check-pass-bulk-copies --check-pass-async-copies --bench
  fi
  grep -E "FAIL|ERROR|check" "$OUT/bench_lm_head.log" | head -30
else
  rows+=("| bench | NOT RUN ($lib missing) | - |")
fi

# Switches timed against the default on the same calls (COMPARE_ENVS, LM_COMPARE_ENVS),
# and the CUDA cases with each of CTEST_ENVS set.
for setting in ${CTEST_ENVS:-}; do
  [ -x "$op_tests" ] && stage "ctest-$setting" 90 "$OUT/ctest.log" env "$setting" ctest --test-dir "$build" \
    -R '/cuda$|CudaGraph|OptInPaths' -j 8 --timeout 60 --output-on-failure
done
if [ -f "$lib" ]; then
  for setting in ${COMPARE_ENVS:-}; do
    stage "bench-$setting" 60 "$OUT/bench.log" python3 bench/cuda_sampling_bench.py --lib "$lib" --only w3 \
      --match "${COMPARE_MATCH:-B=256 V=128256}" --compare-env "$setting" --budget 40
  done
  if [ -n "${LM_COMPARE_ENVS:-}" ]; then
    lm_compare=()
    for setting in $LM_COMPARE_ENVS; do lm_compare+=(--compare-env "$setting"); done
    stage bench-lm-head-compare 150 "$OUT/bench_lm_head.log" python3 bench/cuda_lm_head_bench.py --lib "$lib" \
      --bench --no-pins --m "${LM_COMPARE_M:-1,4,16,64}" "${lm_compare[@]}"
  fi
fi

# Small calls' phases, warm and cold (LATENCY=1): a B=1 sampling call with its
# cluster merge and with the merge kernel, the LM heads' two merges alone.
if [ "${LATENCY:-0}" = 1 ]; then
  if wait "$latency_build"; then
    stage latency-paths 90 "$OUT/latency_paths.log" "$build/latency_paths"
  else
    rows+=("| latency-paths | NOT BUILT (latency_build.log) | - |")
  fi
fi

# The warp MMAs' latency and SM throughput (MMA_RATES=1): 1-bit and int8.
if [ "${MMA_RATES:-0}" = 1 ]; then
  stage mma-rates 60 "$OUT/mma_rates.log" bash -c "nvcc -O3 -arch=sm_90a -o '$build/mma_rates' \
    bench/micro/mma_rates.cu && '$build/mma_rates'"
fi

# W4's DRAM patterns (MASK_PATTERNS=1): the bitmask against in-place copies,
# and scatter stores that never read the logits (bench/micro/mask_patterns.cu).
if [ "${MASK_PATTERNS:-0}" = 1 ]; then
  stage mask-patterns 90 "$OUT/mask_patterns.log" bash -c "nvcc -O3 -arch=sm_90 -o '$build/mask_patterns' \
    bench/micro/mask_patterns.cu && '$build/mask_patterns'"
fi

# Where the LM heads' sm_90 kernels' warps spend their cycles (PHASES=1):
# W2 and W1 at M = 16 and 64.
if [ "${PHASES:-0}" = 1 ]; then
  if wait "$phases_build"; then
    stage phases-dense 60 "$OUT/phases.log" "$build/lm_head_phases"
    stage phases-binary 60 "$OUT/phases.log" "$build/lm_head_phases-binary"
  else
    rows+=("| phases | NOT BUILT (phases_build.log) | - |")
  fi
fi

# B = 1 with its row's chunks merged in a cluster (the sm_90 default for B <= 8)
# against the merge kernel (NEXTTOK_CUDA_SAMPLE_MERGE=kernel), same tokens checked.
[ -f "$lib" ] && [ "${SAMPLING:-1}" = 1 ] && [ "${MERGE_COMPARE:-1}" = 1 ] && stage bench-merge 70 "$OUT/bench.log" \
  python3 bench/cuda_sampling_bench.py --lib "$lib" --only w3 --match "B=1 " \
  --compare-env NEXTTOK_CUDA_SAMPLE_MERGE=kernel --budget 50

# Per-kernel device time of a few W3 calls in a warm loop (CUPTI): how a
# call's time splits over its scan and merge kernels.
[ -f "$lib" ] && [ "${SAMPLING:-1}" = 1 ] && [ "${EXTRA:-1}" = 1 ] && stage kernel-times 60 "$OUT/bench.log" python3 bench/profile_kernels.py --lib "$lib"

# ---- the binary head's warpgroup-MMA kernel fed by bulk tensor copies, the
# default for calls of more than 2 rows where it fits: the LM-head cases with
# it pinned for every call (NEXTTOK_CUDA_LM_HEAD_PATH=pass-bulk-copies), so the
# decode rows take it too.
[ "${LM_HEAD:-1}" = 1 ] && [ "${EXTRA:-1}" = 1 ] && [ -x "$op_tests" ] && stage ctest-pass-bulk-copies 60 "$OUT/ctest.log" \
  env NEXTTOK_CUDA_LM_HEAD_PATH=pass-bulk-copies ctest --test-dir "$build" -R 'LmHead.*/cuda$' -j 8 --timeout 60 \
  --output-on-failure

# ---- programmatic dependent launch (cuda/launch.cuh; off by default, its gain
# mixed in run 34): the CUDA cases and the LM-head checks with NEXTTOK_CUDA_PDL=1,
# and the small-batch W3 rows and W1/W2 M=1/64 timed both ways. Logs are appended
# to the ones above (the device returns at most 8 files). PDL=0 skips it.
if [ "${PDL:-1}" = 1 ] && [ -f "$lib" ]; then
  [ -x "$op_tests" ] && stage ctest-pdl 60 "$OUT/ctest.log" env NEXTTOK_CUDA_PDL=1 \
    ctest --test-dir "$build" -R '/cuda$|CudaGraph|OptInPaths' -j 8 --timeout 60 --output-on-failure
  stage bench-pdl 60 "$OUT/bench.log" python3 bench/cuda_sampling_bench.py --lib "$lib" --only w3 \
    --match 'B=(1|64) ' --pdl-compare --budget 45
  [ "${LM_HEAD:-1}" = 1 ] && stage bench-lm-head-pdl 60 "$OUT/bench_lm_head.log" env NEXTTOK_CUDA_PDL=1 \
    python3 bench/cuda_lm_head_bench.py --lib "$lib" --check --small --bench --m 1,64
fi

# ---- sanitizers (last: they take whatever time is left) -------------------
if [ "${SANITIZE:-1}" = 1 ] && [ -x "$op_tests" ]; then
  # The cluster merge of small sampling batches and the LM heads' two merges,
  # compared in one process (tests/cuda/opt_in_paths_test.cpp), under both tools.
  cuda_tests="$build/tests/nexttok_cuda_tests"
  opt_in='OptInPaths.MergeKernelKeepsSampledTokens:OptInPaths.SortMergeKeepsLmHeadTopK'
  if [ -x "$cuda_tests" ] && [ "${OPT_IN_SANITIZE:-1}" = 1 ]; then
    stage memcheck-opt-in 60 "$OUT/memcheck.log" "$sanitizer" --tool memcheck --error-exitcode 1 \
      "$cuda_tests" --gtest_filter="$opt_in"
    [ "${RACECHECK:-1}" = 1 ] && stage racecheck-opt-in 90 "$OUT/memcheck.log" "$sanitizer" --tool racecheck \
      --error-exitcode 1 "$cuda_tests" --gtest_filter="$opt_in"
  fi
  # Under the sanitizers: every sampling and mask case except the 40,000-draw
  # distribution tests, smallest first for racecheck (it is the slowest).
  # SANITIZER_ENV='NAME=VALUE ...': these two memcheck stages run with the switches set.
  [ "${SAMPLING:-1}" = 1 ] && stage memcheck 70 "$OUT/memcheck.log" env ${SANITIZER_ENV:-} "$sanitizer" --tool memcheck --error-exitcode 1 \
    --show-backtrace device "$op_tests" \
    --gtest_filter='Devices/Sample.*/cuda:Devices/Bitmask.*/cuda'
  grep -E "ERROR SUMMARY|Invalid|PASSED|FAILED" "$OUT/memcheck.log" | head -20
  [ "${LM_HEAD:-1}" = 1 ] && stage memcheck-lm-head 90 "$OUT/memcheck.log" env ${SANITIZER_ENV:-} "$sanitizer" --tool memcheck --error-exitcode 1 \
    --show-backtrace device "$op_tests" --gtest_filter='Devices/LmHead*.*/cuda'
  grep -E "ERROR SUMMARY|Invalid|PASSED|FAILED" "$OUT/memcheck.log" | head -20
  # gtest runs the cases of a filter in source order, whatever the filter's:
  # the long DecodeRowsOverManyWarpCuts gets a stage of its own after the
  # rest, and SAMPLING=0 leaves the sampling cases out (in run 41 they took
  # the whole limit before the LM-head cases).
  race_sampling='Devices/Sample.GreedyTakesTheFirstMaximum/cuda:Devices/Sample.NonFiniteLogits/cuda:Devices/Sample.FullyMaskedRowsGiveMinusOne/cuda:Devices/Bitmask.AllRows/cuda:Devices/Sample.LargeVocabularyMixedBatch/cuda:Devices/Sample.TopKBoundaryTiesGoToTheLowerIndex/cuda:Devices/Sample.ExplicitDrawMatchesInverseCdf/cuda:Devices/Sample.KeepSetEndsAtAPlantedRecord/cuda'
  race_lm_head='Devices/LmHeadBinary.PassesOfManyRowsExact/cuda:Devices/LmHeadBinary.WinnersPlantedInOneChunk/cuda:Devices/LmHeadDense.WinnersPlantedInOneChunk/cuda:Devices/LmHeadBinary.RepeatedCallsAreBitwiseEqual/cuda'
  race_filter="$race_lm_head"
  [ "${SAMPLING:-1}" = 1 ] && race_filter="$race_sampling:$race_lm_head"
  [ "${SAMPLING:-1}" = 1 ] && [ "${LM_HEAD:-1}" = 0 ] && race_filter="$race_sampling"
  if [ "${RACECHECK:-1}" = 1 ]; then
    stage racecheck 110 "$OUT/memcheck.log" "$sanitizer" --tool racecheck --error-exitcode 1 \
      "$op_tests" --gtest_filter="$race_filter"
    [ "${LM_HEAD:-1}" = 1 ] && stage racecheck-decode-rows 90 "$OUT/memcheck.log" "$sanitizer" --tool racecheck \
      --error-exitcode 1 "$op_tests" --gtest_filter='Devices/LmHeadBinary.DecodeRowsOverManyWarpCuts/cuda'
  fi
  grep -E "RACECHECK SUMMARY|hazard|PASSED|FAILED" "$OUT/memcheck.log" | head -20
fi

# ---- profiler: what limits the kernels (DRAM throughput, occupancy) ------------
ncu_bin=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size
metrics+="${NCU_EXTRA_METRICS:+,$NCU_EXTRA_METRICS}"  # e.g. lts__throughput.avg.pct_of_peak_sustained_elapsed
if [ -f "$lib" ]; then
  [ "${SAMPLING:-1}" = 1 ] && stage ncu-sampling 60 "$OUT/ncu.log" "$ncu_bin" --clock-control none \
    -k regex:'sample_|apply_token_bitmask' --metrics "$metrics" \
    python3 bench/profile_sampling.py --lib "$lib"
  [ "${LM_HEAD:-1}" = 1 ] && stage ncu-lm-head 90 "$OUT/ncu.log" "$ncu_bin" --clock-control none \
    -k regex:"${NCU_KERNELS:-binary_|dense_|merge_topk}" --launch-count 8 --metrics "$metrics" \
    python3 bench/cuda_lm_head_bench.py --lib "$lib" --bench --m "${NCU_M:-1}" --runs 3 --slow-runs 3
fi

# ---- per-instruction profile (NCU_SASS=<kernel regex>; off by default): the
# first launch of each matching kernel in a W1/W2 run at M = NCU_M (1), SASS with its
# instruction counts and stall samples as CSV, appended to ncu.log.
if [ -n "${NCU_SASS:-}" ] && [ -f "$lib" ]; then
  stage ncu-sass 120 "$OUT/ncu.log" "$ncu_bin" --clock-control none -k "regex:$NCU_SASS" --launch-count 2 \
    --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
    python3 bench/cuda_lm_head_bench.py --lib "$lib" --bench --m "${NCU_M:-1}" --runs 2 --slow-runs 2
  # The CSV is ~7 MB a kernel: its summary in a file of its own, for the results.
  python3 scripts/ncu_sass_summary.py "$OUT/ncu.log" >"$OUT/ncu_sass_summary.txt" 2>&1
fi

# The same per-instruction profile for sampling kernels (NCU_SASS_SAMPLING=<regex>):
# the first B=256 greedy, plain and k50+p0.9+min-p calls and a B=1 filtered call
# (bench/profile_sampling.py --more), summarized into ncu_sass_summary.txt.
if [ -n "${NCU_SASS_SAMPLING:-}" ] && [ -f "$lib" ]; then
  stage ncu-sass-sampling 90 "$OUT/ncu.log" "$ncu_bin" --clock-control none -k "regex:$NCU_SASS_SAMPLING" \
    --launch-count 6 --section SourceCounters --section WarpStateStats -f -o "$build/sass_sampling" \
    python3 bench/profile_sampling.py --lib "$lib" --more
  "$ncu_bin" -i "$build/sass_sampling.ncu-rep" --page source --csv --print-source sass >"$build/sass_sampling.csv" 2>&1
  python3 scripts/ncu_sass_summary.py "$build/sass_sampling.csv" >>"$OUT/ncu_sass_summary.txt" 2>&1
fi

# ---- summary ------------------------------------------------------------------
{
  echo
  echo "| stage | result | time |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo "total $(($(date +%s) - t_start))s; logs in $OUT"
  echo
  sed -n '/^| row | ours us/,$p' "$OUT/bench.log" 2>/dev/null
  echo
  grep -E '^\|' "$OUT/bench_lm_head.log" 2>/dev/null | tail -12
} | tee -a "$summary"
