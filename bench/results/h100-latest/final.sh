#!/usr/bin/env bash
# Last GPU call of the session: build the tree, ctest -L gpu, memcheck of the
# logprobs and verification suites, then the W3r and W6 benchmarks.
set -u
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null || cat COMMIT
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEXTTOK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DNEXTTOK_OPENCL=OFF -DNEXTTOK_TOOLS=OFF -DNEXTTOK_PYTHON=ON -DNEXTTOK_TESTS=ON >$OUT/build.log 2>&1 &&
  cmake --build build-device -j 16 >>$OUT/build.log 2>&1
echo "built rc=$? at $(($(date +%s)-t0)) s"; grep -E "error|FAILED:" $OUT/build.log | head
NEXTTOK_TEST_REQUIRE=cuda timeout 120 ctest --test-dir build-device -L gpu -j 8 --timeout 100 --output-on-failure >$OUT/tests.log 2>&1
echo "ctest rc=$? at $(($(date +%s)-t0)) s"; grep -E "tests passed|tests failed|\(Failed\)|\*\*\*Failed|Timeout" $OUT/tests.log | head -20
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 build-device/tests/nexttok_op_tests \
  --gtest_filter='*Logprobs*cuda*:*Verify*cuda*:-*Distribution*' >$OUT/memcheck.log 2>&1
echo "memcheck rc=$? at $(($(date +%s)-t0)) s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5
PYTHONPATH=build-device/python timeout 45 python3 bench/cuda_sampling_bench.py --match '^W3r' --budget 30 >$OUT/bench-w3r.log 2>&1
echo "w3r rc=$? at $(($(date +%s)-t0)) s"; grep -E "^\|" $OUT/bench-w3r.log
PYTHONPATH=build-device/python timeout 80 python3 bench/cuda_verify_bench.py --check --runs 30 --budget 40 >$OUT/bench-w6.log 2>&1
echo "w6 rc=$? at $(($(date +%s)-t0)) s"; grep -E "^checks|FAIL" $OUT/bench-w6.log | head; grep -E "^\|" $OUT/bench-w6.log | tail -18
