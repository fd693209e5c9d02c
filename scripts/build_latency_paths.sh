#!/usr/bin/env bash
# Builds bench/micro/latency_paths.cu (one translation unit with the phase marks
# of src/cuda/timeline.cuh compiled in) into $1; device_check.sh (LATENCY=1) and
# device_profile.sh (PROFILE_LATENCY=1) run it beside their library builds.
set -eu
cd "$(dirname "$0")/.."
exec nvcc -std=c++17 -O3 -arch=sm_90a -Iinclude -Isrc --expt-relaxed-constexpr -o "$1" \
  bench/micro/latency_paths.cu src/core/check.cpp src/core/error.cpp
