# Sourced by scripts/device_check.sh and scripts/device_compare.sh: the GPU
# tests of a build as compute-sanitizer runs them. Needs SANITIZER (the
# compute-sanitizer executable).

# gpu_test_lists BUILD: BUILD/gpu_tests.txt, one line per CUDA test
# ("executable --gtest_filter=..."), and BUILD/gpu_tests_racecheck.txt, the
# same without the distribution tests: they draw 20,000+ tokens by launching
# the same kernels thousands of times, so racecheck would spend minutes on them
# alone, and the other tests launch every kernel they do. Where ctest has run
# the tests before (its CTestCostData.txt), the longest come first, so that
# the sanitizers' slowest runs start while the short ones fill the other slots.
gpu_test_lists() {
  ctest --test-dir "$1" -L gpu --show-only=json-v1 | python3 -c '
import json, sys
cost = {}
try:
    for line in open(sys.argv[1] + "/Testing/Temporary/CTestCostData.txt"):
        f = line.rstrip("\n").rsplit(" ", 2)  # names may hold spaces
        if len(f) == 3:
            cost[f[0]] = float(f[2])
except (OSError, ValueError):
    pass
tests = json.load(sys.stdin)["tests"]
for t in sorted(tests, key=lambda t: -cost.get(t["name"], 0.0)):
    print(t["command"][0], next(a for a in t["command"] if a.startswith("--gtest_filter=")))
' "$1" >"$1/gpu_tests.txt"
  grep -v 'Distribution\.' "$1/gpu_tests.txt" >"$1/gpu_tests_racecheck.txt"
}

# sanitize TOOL LIST SECONDS: each line of LIST (one CUDA test) under
# compute-sanitizer TOOL, 8 processes at a time, each with its own log (in
# LIST's name with -TOOL for .txt) and at most SECONDS each (a list of many
# tests takes many times SECONDS in all). Fails if a test fails or
# the tool reports an error; a test that runs out of time is listed as not
# judged without failing it.
sanitize() {
  local dir="${2%.txt}-$1" failed slow
  rm -rf "$dir" && mkdir -p "$dir"
  # shellcheck disable=SC2016  # expanded by the inner shell: $0 line number, $1 $2 the test
  nl -w1 -s' ' "$2" | TOOL=$1 DIR=$dir LIMIT=$3 xargs -P 8 -L 1 bash -c \
    'timeout "$LIMIT" "$SANITIZER" --tool "$TOOL" --error-exitcode 1 "$1" "$2" >"$DIR/$0.log" 2>&1
     rc=$?; [ $rc -eq 0 ] && exit 0
     echo "rc=$rc for $1 $2" >>"$DIR/$0.log"
     if [ $rc -eq 124 ]; then mv "$DIR/$0.log" "$DIR/$0.slow"; else mv "$DIR/$0.log" "$DIR/$0.FAILED"; fi'
  failed=$(find "$dir" -name '*.FAILED' | wc -l)
  slow=$(find "$dir" -name '*.slow' | wc -l)
  echo "$1: $(wc -l <"$2") tests, $failed failed, $slow not judged (over ${3}s)"
  for f in "$dir"/*.slow; do [ -e "$f" ] && tail -1 "$f"; done
  for f in "$dir"/*.FAILED; do
    [ -e "$f" ] && { echo "---- $f"; tail -40 "$f"; }
  done
  [ "$failed" -eq 0 ]
}
export -f sanitize

# unjudged TOOL LIST: the lines of LIST that an earlier `sanitize TOOL LIST` did
# not pass (out of its time, failed, or never started), for a later call on
# the same machine: `unjudged racecheck L >build-device/rest.txt; sanitize
# racecheck build-device/rest.txt S` (in the ignored build folder, which the
# next call's copy of the tree keeps).
unjudged() {
  local dir="${2%.txt}-$1"
  nl -w1 -s' ' "$2" | while read -r n rest; do
    grep -qs '\[  PASSED  \]' "$dir/$n.log" || echo "$rest"
  done
}
export -f unjudged

# judged TOOL LIST: what an earlier `sanitize TOOL LIST` judged, from its
# per-test logs, for a run its timeout killed before its own summary line:
# the tests that passed, and every tool summary that reports a problem.
judged() {
  local dir="${2%.txt}-$1"
  echo "$1 of $2: $(grep -ls '\[  PASSED  \]' "$dir"/*.log 2>/dev/null | wc -l) of $(wc -l <"$2") tests passed"
  grep -h "SUMMARY" "$dir"/*.log "$dir"/*.FAILED 2>/dev/null | grep -v "SUMMARY: 0 " | sort | uniq -c
}
export -f judged
