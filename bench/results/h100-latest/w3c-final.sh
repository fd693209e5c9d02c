#!/usr/bin/env bash
# Session driver, last check: build this tree, ctest -L gpu, memcheck + racecheck of the sampler suites,
# W3c rows (every row against the scalar k50+p0.9 row of the same call) with the CPU checks.
set -u
cd "$(dirname "$0")/.." || exit 2
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
t0=$(date +%s)
{ date -u +%Y-%m-%dT%H:%M:%SZ; cat baseline-src/NEW_COMMIT; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$OUT/summary.md"
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXTTOK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DNEXTTOK_OPENCL=OFF -DNEXTTOK_TOOLS=OFF -DNEXTTOK_PYTHON=ON -DNEXTTOK_TESTS=ON >"$OUT/build.log" 2>&1 &&
  timeout 170 cmake --build build-device -j 16 >>"$OUT/build.log" 2>&1
echo "built rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"; grep -hE "error|FAILED:" "$OUT"/build.log | head -20
NEXTTOK_TEST_REQUIRE=cuda timeout 70 ctest --test-dir build-device -L gpu -j 8 --timeout 60 --output-on-failure >"$OUT/tests.log" 2>&1
echo "ctest rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"; grep -E "tests passed|tests failed|\(Failed\)|\*\*\*Failed|Timeout" "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.md"
T=build-device/tests/nexttok_op_tests
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 1 $T \
  --gtest_filter='*Sample*cuda*:*Logprobs*cuda*:-*Distribution*:*Planted*:*ExplicitDraw*' >"$OUT/memcheck.log" 2>&1 &
for f in NucleusAtTheCandidateListsLength KeepSetEndsAtAPlantedRecord LargeVocabularyMixedBatch GumbelDrawMatchesReference; do
  timeout 80 compute-sanitizer --tool racecheck --error-exitcode 1 $T --gtest_filter="Devices/Sample.$f/cuda" >"$OUT/racecheck-$f.log" 2>&1 &
done
wait
{ echo "memcheck: $(grep -hE 'ERROR SUMMARY|PASSED|FAILED' $OUT/memcheck.log | tr '\n' ' ')"
  for f in $OUT/racecheck-*.log; do echo "racecheck $(basename $f .log): $(grep -hE 'RACECHECK SUMMARY|PASSED|FAILED' $f | tr '\n' ' ')"; done
  echo "sanitizers done at $(($(date +%s) - t0)) s"; } | tee -a "$OUT/summary.md"
PYTHONPATH=build-device/python timeout 75 python3 bench/cuda_sampling_bench.py --check \
  --match '^W3c .* B=(1|64|256) V=128256' --budget 45 >"$OUT/bench-w3c.log" 2>&1
echo "W3c rc=$? at $(($(date +%s) - t0)) s" | tee -a "$OUT/summary.md"; grep -E "^checks|FAIL" "$OUT/bench-w3c.log" | head -5 | tee -a "$OUT/summary.md"
grep "^| W3c" "$OUT/bench-w3c.log"; sed -n '/^W3c ratios/,$p' "$OUT/bench-w3c.log" | tee -a "$OUT/summary.md"
