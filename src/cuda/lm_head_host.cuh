// Host-side plumbing shared by the CUDA LM heads: the pass widths their
// kernels are instantiated for, the natural-alignment check of their
// arguments, and the workspace plan of the exact top-k and its candidate
// buffers (the rows' alignment, which picks a kernel, is cuda/device.cuh's
// row_alignment).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "core/error.h"
#include "cuda/device.cuh"
#include "cuda/topk_cta.cuh"
#include "nexttok/nexttok.h"

namespace nt::cuda::lm_head {

// Token rows handled by one pass of a scoring kernel; larger M runs in passes
// that reuse the same workspace (the weights are then read once per pass).
constexpr int kPassRows = 64;
// The largest vocabulary tile any scoring kernel works on; candidate buffers
// are sized for it so that every kernel fits one workspace size.
constexpr int kMaxTileRows = 256;

// n-tiles of 8 token rows the tensor-core kernels are instantiated for, for
// a pass of `rows`: 1, 2, 4 or 8.
inline int pass_n_tiles(int rows) { return rows <= 8 ? 1 : rows <= 16 ? 2 : rows <= 32 ? 4 : 8; }

// f(std::integral_constant<int, NT>) for the n-tiles of a pass of `rows`.
template <class F>
void with_n_tiles(int rows, F&& f) {
  switch (pass_n_tiles(rows)) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

// Every tensor must sit at its element's natural alignment: the kernels load
// elements with typed loads.
inline void require_natural_alignment(const char* op, const char* arg, const nt_tensor& t) {
  if (t.data == nullptr) return;
  const uintptr_t elt = dtype_size(t.dtype);
  if (reinterpret_cast<uintptr_t>(t.data) % elt != 0)
    fail_argument(op, arg, "must be aligned to its element size (" + std::to_string(elt) +
                               " bytes) on the CUDA backend");
}
inline void require_natural_alignment(const char* op,
                                      std::initializer_list<std::pair<const char*, const nt_tensor&>> args) {
  for (const auto& [arg, t] : args) require_natural_alignment(op, arg, t);
}

// A head entry point's prologue: nothing for M = `rows` = 0; else the
// operands' alignment checked (`check`: all but the size queries), then
// body(dev) on `device`.
template <class Body>
auto on_head_device(const char* op, int64_t rows, int device, bool check,
                    std::initializer_list<std::pair<const char*, const nt_tensor&>> aligned, Body&& body) {
  if (rows == 0) return decltype(body(DeviceLimits{}))();
  if (check) require_natural_alignment(op, aligned);
  DeviceScope scope(device, op);
  return body(device_limits(device, op));
}

// The exact top-k plan of a scoring kernel: a persistent grid of CTAs, each
// owning one contiguous vocabulary range, each keeping per token row a
// candidate buffer of `cap` slots; a merge kernel then picks the k best of
// the grid's candidates per row.
//
// Workspace (bytes, beyond inputs and outputs), from the aligned start:
//   grid * mp_stride * cap * 8   candidates (value, index)
//   grid * mp_stride * 4 * 2     candidate counts, then each CTA's final threshold
// with grid <= the SM count, mp_stride = min(M, 64) and
// cap = min(rows_per_cta, k + 256 + max(128, k/2)): bounded by
// SMs * 64 * (1.5k + 384) * 8 whatever V is.
struct TopkPlan {
  int grid = 0;
  int rows_per_cta = 0;
  int mp_stride = 0;
  int cap = 0;
  int k = 0;
  size_t counts_offset = 0, end = 0;  // the candidates start the workspace
};

inline TopkPlan make_topk_plan(int64_t vocab, int64_t rows, int32_t k, int sm_count) {
  TopkPlan p;
  const int64_t units = (vocab + 15) / 16;  // 16-row units: the MMA row granularity
  const int64_t per_cta = (units + sm_count - 1) / sm_count;
  p.rows_per_cta = static_cast<int>(per_cta * 16);
  p.grid = static_cast<int>((vocab + p.rows_per_cta - 1) / p.rows_per_cta);
  p.mp_stride = static_cast<int>(std::min<int64_t>(rows, kPassRows));
  p.k = k;
  const int64_t slack = std::max<int64_t>(kMaxTileRows / 2, k / 2);
  const int64_t cap = std::min<int64_t>(p.rows_per_cta, int64_t(k) + kMaxTileRows + slack);
  p.cap = static_cast<int>(cap);
  p.counts_offset = align_up(size_t(p.grid) * size_t(p.mp_stride) * size_t(p.cap) * 8, 256);
  p.end = p.counts_offset + size_t(p.grid) * size_t(p.mp_stride) * 4 * 2;
  return p;
}

// The plan's candidate buffers in the (aligned) workspace `ws`.
inline topk::CandidateArgs candidate_args(const TopkPlan& plan, char* ws) {
  return {reinterpret_cast<topk::Candidate*>(ws),
          reinterpret_cast<int32_t*>(ws + plan.counts_offset), plan.mp_stride, plan.cap, plan.k};
}

}  // namespace nt::cuda::lm_head
