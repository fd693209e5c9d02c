#!/usr/bin/env bash
# Session driver, last call: this tree (build-device) beside baseline-src (e6329cc, build-base):
# build both, ctest -L gpu, memcheck + racecheck of the sampler suites, W3c / W3 rows with both builds, W3r.
set -u
cd "$(dirname "$0")/.." || exit 2
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
t0=$(date +%s)
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/summary.md"
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXTTOK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a
  -DNEXTTOK_OPENCL=OFF -DNEXTTOK_TOOLS=OFF -DNEXTTOK_PYTHON=ON)
(cmake -S . -B build-device "${common[@]}" -DNEXTTOK_TESTS=ON && cmake --build build-device -j 16) >"$OUT/build.log" 2>&1 &
(cmake -S baseline-src -B build-base "${common[@]}" -DNEXTTOK_TESTS=OFF && cmake --build build-base -j 16) >"$OUT/build-base.log" 2>&1 &
wait
echo "built at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"; grep -hE "error|FAILED:" "$OUT"/build*.log | head -20
NEXTTOK_TEST_REQUIRE=cuda timeout 100 ctest --test-dir build-device -L gpu -j 8 --timeout 90 --output-on-failure >"$OUT/tests.log" 2>&1
echo "ctest rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"; grep -E "tests passed|tests failed|\(Failed\)|\*\*\*Failed|Timeout" "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.md"
T=build-device/tests/nexttok_op_tests
timeout 110 compute-sanitizer --tool memcheck --error-exitcode 1 $T \
  --gtest_filter='*Sample*cuda*:*Logprobs*cuda*:*Verify*cuda*:-*Distribution*:*Planted*:*ExplicitDraw*' >"$OUT/memcheck.log" 2>&1 &
i=0
for f in NucleusAtTheCandidateListsLength KeepSetEndsAtAPlantedRecord LargeVocabularyMixedBatch GumbelDrawMatchesReference NonFiniteLogits PerRowSeedsMakeTokensBatchInvariant; do
  timeout 110 compute-sanitizer --tool racecheck --error-exitcode 1 $T --gtest_filter="Devices/Sample.$f/cuda" >"$OUT/racecheck-$f.log" 2>&1 &
done
wait
{ echo "memcheck: $(grep -hE 'ERROR SUMMARY|PASSED|FAILED' $OUT/memcheck.log | tr '\n' ' ')"
  for f in $OUT/racecheck-*.log; do echo "racecheck $(basename $f .log): $(grep -hE 'RACECHECK SUMMARY|PASSED|FAILED' $f | tr '\n' ' ')"; done
  echo "sanitizers done at $(($(date +%s) - t0)) s"; } | tee -a "$OUT/summary.md"
m1='^W3c .* B=(1|64|256) V=128256|^W3c .* B=256 V=248320'
m2='^W3 (top-p 0.9|mixed per-row|k50\+p0.9\+min-p 0.05) B=(1|256) V=128256'
for b in build-base build-device; do
  PYTHONPATH=$b/python timeout 80 python3 bench/cuda_sampling_bench.py $([ $b = build-device ] && echo --check) --match "$m1" --budget 60 \
    --json "$OUT/w3c-$b.json" >"$OUT/bench-w3c-$b.log" 2>&1
  echo "$b W3c rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"; grep -E "^checks|FAIL" "$OUT/bench-w3c-$b.log" | head -5
  PYTHONPATH=$b/python timeout 40 python3 bench/cuda_sampling_bench.py --match "$m2" --budget 25 \
    --json "$OUT/w3-$b.json" >"$OUT/bench-w3-$b.log" 2>&1
  echo "$b W3 rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"
done
PYTHONPATH=build-device/python timeout 40 python3 bench/cuda_sampling_bench.py --match '^W3r .*B=256' --budget 25 >"$OUT/bench-w3r.log" 2>&1
echo "W3r rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"; grep "^| W3r" "$OUT/bench-w3r.log"
python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.md"
import json, os, sys
out = sys.argv[1]
def rows(kind, b):
    p = os.path.join(out, f"{kind}-{b}.json")
    return {r["row"]: r for r in json.load(open(p))["rows"]} if os.path.exists(p) else {}
for kind in ("w3c", "w3"):
    base, new = rows(kind, "build-base"), rows(kind, "build-device")
    print(f"\n| row | e6329cc us | graph | this tree us | graph | ratio | vs baseline column (this tree) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, n in new.items():
        b = base.get(name, {})
        if "error" in n:
            print(f"| {name} | ERROR |"); continue
        bu = f"{b['ours_us']:.1f} | {b['graph_us']:.1f}" if "ours_us" in b else " | "
        r = f"{n['ours_us'] / b['ours_us']:.3f}" if "ours_us" in b else ""
        print(f"| {name} | {bu} | {n['ours_us']:.1f} | {n['graph_us']:.1f} | {r} | {n['ours_us'] / n['base_us']:.2f} |")
PY
for b in build-base build-device; do echo "== $b"; sed -n '/^W3c ratios/,$p' "$OUT/bench-w3c-$b.log"; done | tee -a "$OUT/summary.md"
