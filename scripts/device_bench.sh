#!/usr/bin/env bash
# The CUDA benchmarks of one build, each with its correctness checks: W3/W4
# (bench/cuda_sampling_bench.py), W1/W2 (bench/cuda_lm_head_bench.py), W7
# (bench/cuda_penalties_bench.py, 60 s of the time) and W5
# (bench/cuda_fused_head_bench.py, 120 s),
# through the Python package of that build (configured with -DNEXTTOK_PYTHON=ON:
# <build>/python is importable). Logs and JSON go to $OUT/bench-<build name>/,
# and the two tables are printed last. Runs in at most SECONDS (default 540).
#
#   scripts/device_bench.sh build-device [SECONDS]
#   scripts/device_bench.sh ../old/build 250; scripts/device_bench.sh build 250   # two builds, one machine
set -u
if [ $# -lt 1 ] || [ ! -d "$1/python/nexttok" ]; then
  echo "usage: $0 BUILD_DIR [SECONDS]  (a build configured with -DNEXTTOK_PYTHON=ON)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
seconds=${2:-540}
cd "$(dirname "$0")/.." || exit 2
out="${OUT:-$PWD/out}/bench-$(basename "$build")"
mkdir -p "$out"
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

# W7 first, in 60 s, then W5 in 120 s; then half the rest each. The timed rows of each stop 60 s
# before its half ends (the checks come first and take about a minute), so
# that the table is written.
rc=0
timeout --kill-after=10 60 python3 bench/cuda_penalties_bench.py --check --runs 50 --budget 30 \
  --json "$out/penalties.json" >"$out/penalties.log" 2>&1 || rc=1
seconds=$((seconds - 60))
timeout --kill-after=10 120 python3 bench/cuda_fused_head_bench.py --check --runs 50 --budget 50 \
  --json "$out/fused_head.json" >"$out/fused_head.log" 2>&1 || rc=1
seconds=$((seconds - 120))
half=$((seconds / 2))
budget=$((half > 120 ? half - 60 : half / 2))
timeout --kill-after=10 "$half" python3 bench/cuda_sampling_bench.py --check --budget "$budget" \
  --json "$out/sampling.json" >"$out/sampling.log" 2>&1 || rc=1
timeout --kill-after=10 "$half" python3 bench/cuda_lm_head_bench.py --check --bench --budget "$budget" \
  --json "$out/lm_head.json" >"$out/lm_head.log" 2>&1 || rc=1

for log in "$out/sampling.log" "$out/lm_head.log" "$out/penalties.log" "$out/fused_head.log"; do
  echo
  echo "## $(basename "$log" .log) ($build)"
  grep -E "^device:|^copy ceiling|^checks:|FAIL|ERROR|Traceback|Error" "$log" | head -20
  grep -E "^\|" "$log"
done
exit "$rc"
