#!/usr/bin/env bash
# Builds bench/micro/lm_head_phases.cu (the LM heads' sm_90 kernels with the
# phase sums of src/cuda/timeline.cuh compiled in) into $1 (the dense head)
# and $1-binary (the binary head); device_check.sh (PHASES=1) runs both.
set -eu
cd "$(dirname "$0")/.."
# NEXTTOK_CUDA_SM90A as CMakeLists.txt sets it for an sm_90a build: without
# it the binary head never takes its warpgroup-MMA kernels (run 58 marked none).
common=(-std=c++17 -O3 -arch=sm_90a -DNEXTTOK_CUDA_SM90A -Iinclude -Isrc --expt-relaxed-constexpr -lcuda
  src/core/check.cpp src/core/error.cpp)
nvcc -o "$1" bench/micro/lm_head_phases.cu "${common[@]}" &
nvcc -DPHASES_BINARY -o "$1-binary" bench/micro/lm_head_phases.cu "${common[@]}" &
wait %1 && wait %2
