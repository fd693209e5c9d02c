#!/usr/bin/env bash
# Nsight Compute on the kernels whose rows are furthest from their targets (the
# sampler's top-p kernels first: the ones least often profiled), each
# split by source line (bench/profile_source.py), into $OUT/profile.md: one
# launch of each, from bench/profile_kernels.py --once; each kernel's source
# page (SASS with its counters, as CSV) goes to $OUT/profile-sources.tar.gz, so
# profile_source.py can split it again elsewhere against a build of the same
# tree with the same flags. Runs on a warm machine after
# scripts/device_compare.sh or device_check.sh (a build with -lineinfo and the
# Python package; BUILD, default build-device); about five minutes. Kernels are
# skipped once fewer than 90 s are left of DEADLINE (default 540 s), ncu gets
# what is left less 30 s (at most 120), and the source pages are packed after
# each kernel, so a call cut short keeps them.
#   scripts/device_profile.sh            # run: the same call may follow a compare
set -u
cd "$(dirname "$0")/.." || exit 2
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=${BUILD:-build-device}/python
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
module=$(ls "$PYTHONPATH"/nexttok/_nexttok*.so) || exit 2
scratch=$(mktemp -d); n=0; END=$(($(date +%s) + ${DEADLINE:-540}))
# name | kernel regex | calls of bench/profile_kernels.py
while IFS='|' read -r name kernel calls; do
  [ -n "$name" ] || continue
  echo "## $name" >>"$OUT/profile.md"
  left=$((END - $(date +%s)))
  if [ $left -lt 90 ]; then echo "    (skipped: $left s left)" >>"$OUT/profile.md"; continue; fi
  if timeout $((left - 30 < 120 ? left - 30 : 120)) ncu -k "regex:$kernel" --launch-count 1 --warp-sampling-interval 0 \
      --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
      --section SourceCounters -f -o "$scratch/r" python3 bench/profile_kernels.py --once --match "$calls" \
      >"$scratch/ncu.log" 2>&1 </dev/null; then
    ncu -i "$scratch/r.ncu-rep" --page details | grep -E "Duration|Grid Size|Block Size|Registers Per|Achieved Occ|Compute \(SM\) Th|Memory Throughput|Issued Warp Per" \
      | sed 's/^ */    /' >>"$OUT/profile.md"
    n=$((n + 1)); mkdir -p "$scratch/sources"
    ncu -i "$scratch/r.ncu-rep" --page source --csv --print-source sass >"$scratch/sources/$n.csv" 2>&1
    echo "    (source page: profile-sources.tar.gz, $n.csv)" >>"$OUT/profile.md"
    tar -czf "$OUT/profile-sources.tar.gz" -C "$scratch/sources" .
    python3 bench/profile_source.py "$scratch/sources/$n.csv" "$module" --top 25 >>"$OUT/profile.md" 2>&1
  else
    tail -5 "$scratch/ncu.log" >>"$OUT/profile.md"
  fi
  echo >>"$OUT/profile.md"
done <<'ROWS'
W3 top-p 0.9 alone B=256 peaked, the flagged-row kernel (a few rows listed)|sample_flagged_rows_kernel|^W3 top-p 0.9 B=256 V=128256$
W3 top-p 0.9 alone B=256 flat, the flagged-row kernel (every row listed)|sample_flagged_rows_kernel|^W3 top-p 0.9 B=256 V=128256 flat$
W3 top-p 0.9 alone B=256 peaked, the scan (one CTA a row, with the row's mass)|sample_scan_kernel|^W3 top-p 0.9 B=256 V=128256$
W3r logprobs n=20 raw B=256, the scan (with each chunk's raw mass)|sample_scan_kernel|^W3r logprobs n=20 raw B=256 
W3r logprobs n=20 raw B=256, the logprobs kernel (one CTA a row)|sample_logprobs_row_kernel|^W3r logprobs n=20 raw B=256 
W3c k50+p0.9 per-row B=1, the scan (a cluster of 16 CTAs that merges and resolves)|sample_scan_kernel|^W3c k50\+p0.9 per-row B=1 
W3 k50+p0.9+min-p B=1, the scan (a cluster of 16 CTAs)|sample_scan_kernel|^W3 k50.* B=1 
W3 top-p 0.9 alone B=1 flat, the scan (a cluster of 16 CTAs that merges and resolves)|sample_scan_kernel|^W3 top-p 0.9 B=1 V=128256 flat$
W3 k50+p0.9+min-p B=256, the scan (one CTA a row)|sample_scan_kernel|^W3 k50.* B=256 V=128256$
W5 binary M=1 mask+k50+p0.9, the scoring pass|binary_rows_kernel|^W5 binary M=1 mask
W1 binary M=1, the merge of the scoring CTAs' winners|merge_few_winners|^W1 binary M=1$
ROWS
rm -rf "$scratch"
grep -cE "^\| [0-9]" "$OUT/profile.md" | sed 's/^/source lines in profile.md: /'
