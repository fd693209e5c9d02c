#!/usr/bin/env bash
# Session driver (not part of the repository): the current tree beside the
# baseline tree in baseline-src/ (61b48cf) on one GPU.
#   compare.sh build   build both (Python package on), ctest -L gpu, bench both
#   compare.sh sanitize  the GPU tests of build-device under memcheck and racecheck
set -u
cd "$(dirname "$0")/.." || exit 2
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
t0=$(date +%s)
mode=${1:-build}

if [ "$mode" = build ]; then
  {
    date -u +%Y-%m-%dT%H:%M:%SZ
    echo "commit $(cat baseline-src/NEW_COMMIT) against baseline 61b48cf"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    nvcc --version | tail -1
    python3 -c 'import torch; print("torch", torch.__version__)'
  } >"$OUT/summary.md" 2>&1
  common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXTTOK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a
    -DNEXTTOK_OPENCL=OFF -DNEXTTOK_TOOLS=OFF -DNEXTTOK_PYTHON=ON)
  (cmake -S . -B build-device "${common[@]}" -DNEXTTOK_TESTS=ON && cmake --build build-device -j 16) \
    >"$OUT/build.log" 2>&1 &
  (cmake -S baseline-src -B build-base "${common[@]}" -DNEXTTOK_TESTS=OFF && cmake --build build-base -j 16) \
    >>"$OUT/build-base.log" 2>&1 &
  wait
  echo "built in $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"
  grep -E "error|FAILED:" "$OUT/build.log" "$OUT/build-base.log" | head -20
  NEXTTOK_TEST_REQUIRE=cuda timeout 200 ctest --test-dir build-device -L gpu -j 8 --timeout 150 \
    --output-on-failure >"$OUT/tests.log" 2>&1
  echo "ctest rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.md"
  mkdir -p json-out
  w3='^W3 (greedy|plain T=0.7|top-p 0.9|k50\+p0.9\+min-p 0.05|mixed per-row) B=256 V=128256|^W3 (k50\+p0.9\+min-p 0.05|top-p 0.9|greedy) B=1 V=128256|^W3 k50\+p0.9\+min-p 0.05 B=256 V=248320|^W4 .* B=(1|256) '
  for b in build-base build-device; do
    PYTHONPATH=$b/python timeout 100 python3 bench/cuda_sampling_bench.py --match "$w3" --budget 70 \
      --json "json-out/sampling-$b.json" >"$OUT/bench-$b.log" 2>&1
    echo "$b sampling rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"
  done
  for b in build-base build-device; do
    PYTHONPATH=$b/python timeout 100 python3 bench/cuda_lm_head_bench.py --bench --budget 70 \
      --json "json-out/lm_head-$b.json" >>"$OUT/bench-$b.log" 2>&1
    echo "$b lm_head rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"
  done
  PYTHONPATH=build-device/python timeout 60 python3 bench/cuda_penalties_bench.py --check --runs 50 \
    --budget 30 >>"$OUT/bench-build-device.log" 2>&1
  echo "penalties rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"
  PYTHONPATH=build-device/python timeout 70 python3 bench/cuda_sampling_bench.py \
    --match '^W3r' --budget 45 --json json-out/w3r.json >"$OUT/bench-w3r.log" 2>&1
  echo "w3r rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"
  PYTHONPATH=build-device/python timeout 90 python3 bench/cuda_verify_bench.py --check --runs 30 \
    --budget 50 >"$OUT/bench-w6.log" 2>&1
  echo "w6 rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"
  python3 - "$OUT" <<'EOF' | tee -a "$OUT/summary.md"
import json, sys, os
out = sys.argv[1]
def rows(b):
    r = {}
    for kind in ("sampling", "lm_head"):
        p = os.path.join("json-out", f"{kind}-{b}.json")
        if os.path.exists(p):
            for row in json.load(open(p))["rows"]:
                r[row["row"]] = row
    return r
base, new = rows("build-base"), rows("build-device")
print("| row | baseline tree us | graph | this tree us | graph | ratio |")
print("|---|---:|---:|---:|---:|---:|")
for name, n in new.items():
    b = base.get(name)
    if b is None or "error" in n or "error" in b:
        print(f"| {name} | {b and b.get('ours_us')} | | {n.get('ours_us')} | | |")
        continue
    print(f"| {name} | {b['ours_us']:.1f} | {b['graph_us']:.1f} | {n['ours_us']:.1f} | {n['graph_us']:.1f} | "
          f"{n['ours_us'] / b['ours_us']:.3f} |")
EOF
fi

if [ "$mode" = sanitize ]; then
  ctest --test-dir build-device -L gpu --show-only=json-v1 | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    print(t["command"][0], next(a for a in t["command"] if a.startswith("--gtest_filter=")))
' >build-device/gpu_tests.txt
  for tool in memcheck racecheck; do
    limit=$([ $tool = memcheck ] && echo 100 || echo 150)
    list=build-device/gpu_tests.txt
    [ $tool = racecheck ] && { grep -v Distribution build-device/gpu_tests.txt >build-device/race.txt; list=build-device/race.txt; }
    rm -rf "san-$tool" && mkdir -p "san-$tool"
    nl -w1 -s' ' "$list" | TOOL=$tool LIMIT=$limit xargs -P 8 -L 1 bash -c \
      'timeout "$LIMIT" compute-sanitizer --tool "$TOOL" --error-exitcode 1 "$1" "$2" >"san-$TOOL/$0.log" 2>&1
       rc=$?; echo "rc=$rc $2" >>"san-$TOOL/$0.log"'
    n=$(wc -l <"$list")
    ok=$(grep -l "^rc=0 " san-$tool/*.log | wc -l)
    slow=$(grep -l "^rc=124 " san-$tool/*.log | wc -l)
    echo "$tool: $n tests, $ok clean, $slow over ${limit}s, at $(($(date +%s) - t0)) s" | tee -a "$OUT/sanitize.md"
    grep -h "^rc=124 " san-$tool/*.log | tee -a "$OUT/sanitize.md"
    for f in $(grep -L "^rc=0 \|^rc=124 " san-$tool/*.log); do
      { echo "---- $f"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Hazard|FAILED|rc=" "$f" | head -20; } | tee -a "$OUT/sanitize.md"
    done
    tail -c 3000000 <(cat san-$tool/*.log) >"$OUT/$tool.log"
  done
fi
