#!/usr/bin/env bash
# This tree timed beside an earlier one on one CUDA machine, in one device call
# (the re-measure that bench/results/<gpu>.md reports): build both (Release,
# sm_90a, the Python package), ctest -L gpu, W3/W4 and W1/W2 of both builds
# (bench-build-base.log, bench-build-device.log and the ratio table in
# summary.md), then of this tree W5 with its checks (bench-w5.log,
# fused_head.json), W7, the W3c per-row and W3r logprobs rows (bench-w7.log) and the
# profiler split of bench/profile_kernels.py (end of bench-w5.log), then
# compute-sanitizer memcheck and racecheck of the GPU tests
# (scripts/gpu_sanitize.sh) in the time left (sanitizers.log; racecheck of
# every test takes longer than one call leaves, so tests out of time are listed;
# a second call on the same warm machine finishes them: `. scripts/gpu_sanitize.sh;
# unjudged racecheck build-device/gpu_tests_racecheck.txt >build-device/rest.txt;
# sanitize racecheck build-device/rest.txt 500`, with PATH and SANITIZER set as
# below, and `judged racecheck <list>` for a list whose run a timeout cut short;
# the lists and their logs stay in the ignored build folder, since each call
# copies the tree afresh and removes files git does not know). Eight files in
# $OUT: the device tool returns no more. Both builds carry line tables
# (-lineinfo, the same code), so scripts/device_profile.sh can follow on the
# warm machine.
#
# The machine has no git history: the earlier tree travels as a git-excluded
# folder named in the call's carry, with the two commits written beside it:
#   git archive REV | tar -x -C baseline-src   # (mkdir first; baseline-src/ in .git/info/exclude)
#   echo REV >baseline-src/BASE_COMMIT; git rev-parse --short HEAD >baseline-src/NEW_COMMIT
#   scripts/device_compare.sh                  # run: carry ["baseline-src"]
# A call whose builds take most of its time (an old baseline) can stop there:
# the next call on the same warm machine runs SKIP_BUILD=1 scripts/device_compare.sh,
# which times the builds the first left (the copy of the tree each call makes
# would otherwise have ninja build everything again).
set -u
cd "$(dirname "$0")/.." || exit 2
BASE_DIR=${BASE_DIR:-baseline-src}
base_rev=$(cat "$BASE_DIR/BASE_COMMIT") && new_rev=$(cat "$BASE_DIR/NEW_COMMIT") || exit 2
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT" json-out
t0=$(date +%s); END=$((t0 + ${DEADLINE:-575}))
at() { echo "$1 at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"; }
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $new_rev beside $base_rev"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)'; } >"$OUT/summary.md" 2>&1
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXTTOK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_CUDA_FLAGS=-lineinfo
  -DNEXTTOK_OPENCL=OFF -DNEXTTOK_TOOLS=OFF -DNEXTTOK_PYTHON=ON)
if [ "${SKIP_BUILD:-0}" = 1 ]; then
  at "builds of an earlier call on this machine"
  for b in build-device build-base; do
    ls $b/python/nexttok/_nexttok*.so >/dev/null 2>&1 || at "$b has no Python module: its build did not finish"
  done
else
  (cmake -S . -B build-device "${common[@]}" -DNEXTTOK_TESTS=ON && cmake --build build-device -j 16) >build-device.log 2>&1 &
  (cmake -S "$BASE_DIR" -B build-base "${common[@]}" -DNEXTTOK_TESTS=OFF && cmake --build build-base -j 16) >build-base.log 2>&1 &
  wait
  at built; grep -hE "error:|FAILED:" build-device.log build-base.log | head -20 | tee -a "$OUT/summary.md"
  # The slowest compiles of this tree's build (what bounds the build's time).
  awk -F'\t' 'NR > 1 {d[$4] = ($2 - $1) / 1000} END {for (t in d) printf "%6.1f s %s\n", d[t], t}' \
    build-device/.ninja_log | sort -rn | head -5 | tee -a "$OUT/summary.md"
fi
NEXTTOK_TEST_REQUIRE=cuda timeout 150 ctest --test-dir build-device -L gpu -j 8 --timeout 120 --output-on-failure >"$OUT/tests.log" 2>&1
at "ctest rc=$?"; grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Failed  |\*\*\*" "$OUT/tests.log" | head -30 | tee -a "$OUT/summary.md"
w3='^W3 (greedy|plain T=0.7|top-p 0.9|k50\+p0.9\+min-p 0.05|mixed per-row) B=256 V=128256|^W3 (k50\+p0.9\+min-p 0.05|top-p 0.9|greedy) B=1 V=128256|^W3 k50\+p0.9\+min-p 0.05 B=256 V=248320|^W4 .* B=(1|256) '
for b in build-base build-device; do
  PYTHONPATH=$b/python timeout 90 python3 bench/cuda_sampling_bench.py --match "$w3" --budget 60 \
    --json "json-out/sampling-$b.json" >"$OUT/bench-$b.log" 2>&1; at "$b sampling rc=$?"
done
for b in build-base build-device; do
  PYTHONPATH=$b/python timeout 90 python3 bench/cuda_lm_head_bench.py --bench --budget 60 \
    --json "json-out/lm_head-$b.json" >>"$OUT/bench-$b.log" 2>&1; at "$b lm_head rc=$?"
done
# The ratio table before the rows of this tree alone, so that a call cut short keeps it.
BASE_REV=$base_rev python3 - <<'PY' | tee -a "$OUT/summary.md"
import json, os
def rows(b):
    r = {}
    for kind in ("sampling", "lm_head"):
        p = f"json-out/{kind}-{b}.json"
        if os.path.exists(p):
            for row in json.load(open(p))["rows"]:
                r[row["row"]] = row
    return r
base, new = rows("build-base"), rows("build-device")
print(f"| row | {os.environ['BASE_REV']} us | graph | this tree us | graph | ratio |\n|---|---:|---:|---:|---:|---:|")
for name, n in new.items():
    b = base.get(name)
    if b is None or "error" in n or "error" in b:
        print(f"| {name} | {b and b.get('ours_us')} | | {n.get('ours_us')} | | |"); continue
    print(f"| {name} | {b['ours_us']:.1f} | {b['graph_us']:.1f} | {n['ours_us']:.1f} | {n['graph_us']:.1f} | {n['ours_us'] / b['ours_us']:.3f} |")
PY
PYTHONPATH=build-device/python timeout 110 python3 bench/cuda_fused_head_bench.py --check --runs 50 --budget 45 \
  --json "$OUT/fused_head.json" >"$OUT/bench-w5.log" 2>&1; at "w5 rc=$?"
PYTHONPATH=build-device/python timeout 45 python3 bench/cuda_penalties_bench.py --check --runs 50 --budget 20 \
  >"$OUT/bench-w7.log" 2>&1; at "w7 rc=$?"
w3c='^W3c (k50\+p0.9|k50\+p0.9 per-row|top-p 0.9|top-p 0.9 per-row|mixed quarters per-row) B=(1|8|256) V=128256 peaked|^W3r .* B=(1|256) V=128256 peaked'
PYTHONPATH=build-device/python timeout 75 python3 bench/cuda_sampling_bench.py --match "$w3c" --budget 60 \
  >>"$OUT/bench-w7.log" 2>&1; at "w3c rc=$?"
PYTHONPATH=build-device/python timeout 70 python3 bench/profile_kernels.py --match "^W[1256] |^W3c |^W3 top-p" \
  >>"$OUT/bench-w5.log" 2>&1; at "profile rc=$?"
grep -E "^checks|FAIL|Error|^\|" "$OUT/bench-w5.log" "$OUT/bench-w7.log" | head -60
export SANITIZER=compute-sanitizer
# shellcheck source=scripts/gpu_sanitize.sh
. scripts/gpu_sanitize.sh  # gpu_test_lists, sanitize
gpu_test_lists build-device
for list in build-device/gpu_tests.txt build-device/gpu_tests_racecheck.txt; do
  tool=memcheck; [ $list = build-device/gpu_tests.txt ] || tool=racecheck
  left=$((END - $(date +%s) - 5)); [ $left -lt 20 ] && { at "$tool skipped"; continue; }
  timeout $left bash -c 'sanitize "$0" "$1" "$2"' $tool $list $((left - 10)) >>"$OUT/sanitizers.log" 2>&1
  at "$tool rc=$?"; grep -E "^$tool: |^rc=" "$OUT/sanitizers.log" | tail -20 | tee -a "$OUT/summary.md"
done
