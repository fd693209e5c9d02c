#!/usr/bin/env bash
# One call on the H200 for performance work: builds the library only (fast),
# times the raw DRAM access patterns the kernels could use (bench/micro), and
# runs Nsight Compute with stall reasons and memory tables on the kernels that
# miss their targets. Logs go to $OUT (default ./out); no tests run here
# (scripts/device_check.sh does that). Toggles: PROFILE_DRAM, PROFILE_LM_HEAD,
# PROFILE_SAMPLING, PROFILE_ROW_READS (bench/micro/row_reads.cu) (on by default),
# PROFILE_LATENCY=1 (bench/micro/latency_paths.cu: a B=1 sampling call and the LM-head
# merge, warm and cold, with per-phase marks), PROFILE_LM_HEAD_BENCH=<M list> (W1/W2 timed),
# PROFILE_BENCH=<regex> (the W3/W4 rows that match, timed), PROFILE_SOURCE=1 (per-SASS stall
# samples of the sampling kernels of bench/profile_sampling.py --more; PROFILE_SOURCE_SKIP and
# PROFILE_SOURCE_COUNT pick launches: 3 and 1 is the B=1 k50+p0.9+min-p call) and
# PROFILE_SOURCE_LM_HEAD=<kernel regex> (the same for LM-head kernels of a W1 call at
# PROFILE_M rows, default 1; the value 1 means the M=1 scoring kernel, binary_rows).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
build="${BUILD_DIR:-build-profile}"
export PATH="/usr/local/cuda/bin:$PATH"
t0=$(date +%s)
mkdir -p "$build"
if [ "${PROFILE_LATENCY:-0}" = 1 ]; then
  scripts/build_latency_paths.sh "$build/latency_paths" >"$OUT/latency_build.log" 2>&1 &
  latency_build=$!
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXTTOK_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_CUDA_FLAGS=-lineinfo -DNEXTTOK_OPENCL=OFF -DNEXTTOK_TOOLS=OFF -DNEXTTOK_TESTS=OFF \
  >"$OUT/build.log" 2>&1 &&
  cmake --build "$build" -j "$(nproc)" >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(($(date +%s) - t0))s"
lib="$build/libnexttok.so"

if [ "${PROFILE_LATENCY:-0}" = 1 ]; then
  wait "$latency_build" && timeout 120 "$build/latency_paths" 2>&1 | tee "$OUT/latency_paths.log"
  echo "latency paths rc=$? $(($(date +%s) - t0))s"
fi

if [ "${PROFILE_DRAM:-1}" = 1 ]; then
  nvcc -O3 -arch=sm_90 -o "$build/dram_patterns" bench/micro/dram_patterns.cu &&
    timeout 60 "$build/dram_patterns" 2>&1 | tee "$OUT/dram_patterns.log"
fi

if [ "${PROFILE_ROW_READS:-1}" = 1 ]; then
  nvcc -O3 -arch=sm_90 -Isrc -o "$build/row_reads" bench/micro/row_reads.cu &&
    timeout 60 "$build/row_reads" 2>&1 | tee "$OUT/row_reads.log"
fi
if [ -n "${PROFILE_BENCH:-}" ]; then
  # The W3/W4 rows matching this regex, timed beside their baselines.
  timeout 200 python3 bench/cuda_sampling_bench.py --lib "$lib" --match "$PROFILE_BENCH" \
    >"$OUT/bench.log" 2>&1
  echo "bench rc=$? $(($(date +%s) - t0))s"
  sed -n '/^| row | ours us/,$p' "$OUT/bench.log"
fi

if [ -n "${PROFILE_LM_HEAD_BENCH:-}" ]; then
  # W1/W2 at the listed row counts (e.g. 1,64), timed beside cuBLAS + torch.topk.
  timeout 200 python3 bench/cuda_lm_head_bench.py --lib "$lib" --check --small --bench --m "$PROFILE_LM_HEAD_BENCH" \
    >"$OUT/bench_lm_head.log" 2>&1
  echo "lm head bench rc=$? $(($(date +%s) - t0))s"
  grep -E "^W[12] M=|kernels:|FAIL|check:" "$OUT/bench_lm_head.log"
fi

sections=(--section SpeedOfLight --section WarpStateStats --section SchedulerStats
  --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis)
if [ "${PROFILE_LM_HEAD:-1}" = 1 ]; then
  # The warm-up calls come first: prep, scoring and merge of W1 M=1, the dense
  # scoring kernel of W2 M=1, the binary scoring kernel at M=64.
  for what in "1 binary_|merge_topk 3" "1 dense_ 1" "64 binary_mma 1"; do
    set -- $what
    timeout 150 ncu --clock-control none -k regex:"$2" --launch-count "$3" "${sections[@]}" \
      python3 bench/cuda_lm_head_bench.py --lib "$lib" --bench --m "$1" --runs 2 --slow-runs 2 \
      >>"$OUT/ncu_lm_head.log" 2>&1
    echo "ncu lm head M=$1 $2 rc=$? $(($(date +%s) - t0))s"
  done
fi
if [ "${PROFILE_SAMPLING:-1}" = 1 ]; then
  timeout 200 ncu --clock-control none -k regex:'sample_|apply_token_bitmask' "${sections[@]}" \
    python3 bench/profile_sampling.py --lib "$lib" --more >"$OUT/ncu_sampling.log" 2>&1
  echo "ncu sampling rc=$? $(($(date +%s) - t0))s"
fi
if [ "${PROFILE_SOURCE:-0}" = 1 ]; then
  # Stall samples per SASS instruction of the sampling kernels (where in a
  # kernel the warps wait, not only why), as CSV for a local look.
  timeout 240 ncu --clock-control none -k regex:'sample_' --section SourceCounters \
    --launch-skip "${PROFILE_SOURCE_SKIP:-0}" --launch-count "${PROFILE_SOURCE_COUNT:-100}" \
    --section WarpStateStats -f -o "$build/source" \
    python3 bench/profile_sampling.py --lib "$lib" --more >"$OUT/ncu_source_run.log" 2>&1
  echo "ncu source rc=$? $(($(date +%s) - t0))s"
  ncu -i "$build/source.ncu-rep" --page source --csv --print-source sass >"$build/source_sass.csv" 2>&1
  gzip -c "$build/source_sass.csv" >"$OUT/ncu_source_sass.csv.gz"
  echo "ncu source page $(wc -c <"$OUT/ncu_source_sass.csv.gz") bytes (gzip)"
  python3 scripts/ncu_sass_summary.py "$build/source_sass.csv" >"$OUT/ncu_source_summary.txt" 2>&1
fi
lm_head_source="${PROFILE_SOURCE_LM_HEAD:-}"
[ "$lm_head_source" = 1 ] && lm_head_source=binary_rows
[ "$lm_head_source" = 0 ] && lm_head_source=
if [ -n "$lm_head_source" ]; then
  # Per-instruction stall samples of the matching LM-head kernels, the first
  # launch of each (the warm-up call), summarized like the sampling ones.
  timeout 200 ncu --clock-control none -k regex:"$lm_head_source" --launch-count 2 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight -f -o "$build/source_lm_head" \
    python3 bench/cuda_lm_head_bench.py --lib "$lib" --bench --m "${PROFILE_M:-1}" --runs 2 --slow-runs 2 \
    >"$OUT/ncu_lm_head_source_run.log" 2>&1
  echo "ncu lm head source rc=$? $(($(date +%s) - t0))s"
  ncu -i "$build/source_lm_head.ncu-rep" --page details >>"$OUT/ncu_lm_head_source_run.log" 2>&1
  ncu -i "$build/source_lm_head.ncu-rep" --page source --csv --print-source sass >"$build/source_lm_head.csv" 2>&1
  python3 scripts/ncu_sass_summary.py "$build/source_lm_head.csv" >>"$OUT/ncu_source_summary.txt" 2>&1
fi
# The short view: per kernel, time, DRAM and SM throughput, the top stall reasons.
python3 - "$OUT"/ncu_*.log <<'PY'
import re, sys
for path in sys.argv[1:]:
    name = None
    for line in open(path, errors="replace"):
        m = re.match(r"\s+(\S.*?)\s+\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
        if m:
            name = m.group(1)[:90]
            print("\n" + name)
        elif name and re.search(r"^\s+(Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Dynamic Shared Memory Per Block|Warp Cycles Per Issued Instruction|Issue Slots Busy)\b", line) or "stalled" in line:
            print("   " + " ".join(line.split())[:300])
PY
echo "total $(($(date +%s) - t0))s"
