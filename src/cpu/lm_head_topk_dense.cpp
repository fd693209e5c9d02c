// Dense LM head with exact top-k: score[m,v] = hidden[m] . weight[v] (+ bias[v])
// in fp32, fed straight into per-(part, row) selectors; the [M,V] logits are
// never stored.
//
// Memory: each thread walks its own vocabulary range, 4 weight rows at a time,
// in column chunks that stay in L1 while every hidden row (widened to f32 once
// per call, in the workspace) passes against them. The weights are therefore
// read from memory once per call whatever M is.
//
// Arithmetic (identical on the AVX2 and portable paths): lane l = h mod 8 of
// (v, m) accumulates fma(hidden[m,h], weight[v,h], acc) in increasing h; the 8
// lanes are summed by the fixed tree lane_sum(); the bias is one fp32 add.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/portable.h"
#include "cpu/lm_head_scores.h"
#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/thread_pool.h"
#include "cpu/topk_select.h"

namespace nt::cpu {

#if defined(__x86_64__) || defined(_M_X64)
namespace dense_avx2 {  // lm_head_dense_avx2.cpp
void accumulate(const void* const* w, nt_dtype dtype, int rows, const float* x, int64_t x_stride,
                int64_t m_count, int64_t n, float* acc);
void widen(const uint16_t* src, nt_dtype dtype, int64_t n, float* dst);
}  // namespace dense_avx2
#endif

namespace {

constexpr int kTileRows = 4;     // weight rows per tile
constexpr int64_t kChunk = 512;  // columns per chunk: 4 f32 rows = 8 KiB, L1-resident
constexpr int64_t kMinRowsPerPart = 64;
// Above this many hidden rows, 16-bit weight chunks are widened once into a
// buffer rather than once per block of hidden rows inside the kernel.
constexpr int64_t kWidenInKernelRows = 3;

void accumulate_portable(const void* const* w, nt_dtype dtype, int rows, const float* x,
                         int64_t x_stride, int64_t m_count, int64_t n, float* acc) {
  for (int r = 0; r < rows; ++r)
    for (int64_t m = 0; m < m_count; ++m) {
      float* a = acc + (r * m_count + m) * 8;
      const float* xm = x + m * x_stride;
      for (int64_t h = 0; h < round8(n); h += 8)
        for (int l = 0; l < 8; ++l)
          a[l] = nt_fmaf(xm[h + l], h + l < n ? widen_element(w[r], dtype, h + l) : 0.0f, a[l]);
    }
}

void widen_portable(const uint16_t* src, nt_dtype dtype, int64_t n, float* dst) {
  for (int64_t i = 0; i < round8(n); ++i) dst[i] = i < n ? widen_element(src, dtype, i) : 0.0f;
}

// The hidden rows widened once (zero-padded to whole vectors), then per part
// a widened weight chunk and the [tile row][hidden row][lane] sums.
struct ScoreLayout {
  int64_t parts, rows, cols, padded_cols;
  size_t hidden, scratch, scratch_per_part, total;  // offsets from the piece's start; total size
};

ScoreLayout score_layout(const nt_tensor& hidden, const nt_tensor& weight) {
  ScoreLayout L;
  L.parts = num_threads();
  L.rows = hidden.shape[0];
  L.cols = weight.shape[1];
  L.padded_cols = round8(L.cols);
  L.hidden = 0;
  L.scratch = L.hidden + align64(size_t(L.rows) * size_t(L.padded_cols) * sizeof(float));
  L.scratch_per_part = align64(kTileRows * kChunk * sizeof(float)) +
                       align64(size_t(kTileRows) * size_t(L.rows) * 8 * sizeof(float));
  L.total = L.scratch + size_t(L.parts) * L.scratch_per_part;
  return L;
}

// Every score of the head, in the summation order of the file comment: each
// part of the vocabulary (one per pool thread) calls push(part, m, v, score)
// for its rows v in increasing order, then done(part).
template <class Push, class Done>
void score_pass(const nt_tensor& hidden, const nt_tensor& weight, const nt_tensor& bias,
                char* piece, Push push, Done done) {
  const ScoreLayout L = score_layout(hidden, weight);
  const int64_t vocab = weight.shape[0];
  const nt_dtype dtype = weight.dtype;
  const size_t elt = dtype == NT_F32 ? 4 : 2;

  float* x = reinterpret_cast<float*>(piece + L.hidden);
  for (int64_t m = 0; m < L.rows; ++m) {
    const char* src = row_address(hidden, m);
    float* dst = x + m * L.padded_cols;
    for (int64_t h = 0; h < L.cols; ++h) dst[h] = widen_element(src, dtype, h);
    std::fill(dst + L.cols, dst + L.padded_cols, 0.0f);
  }

  const bool widen_first = dtype != NT_F32 && L.rows > kWidenInKernelRows;
  auto accumulate = accumulate_portable;
  auto widen = widen_portable;
#if defined(__x86_64__) || defined(_M_X64)
  if (use_avx2()) {
    accumulate = dense_avx2::accumulate;
    widen = dense_avx2::widen;
  }
#endif

  parallel_for(vocab, kMinRowsPerPart, [&](int64_t begin, int64_t end, int part) {
    char* scratch = piece + L.scratch + size_t(part) * L.scratch_per_part;
    float* wide = reinterpret_cast<float*>(scratch);
    float* acc = reinterpret_cast<float*>(scratch + align64(kTileRows * kChunk * sizeof(float)));
    for (int64_t v0 = begin; v0 < end; v0 += kTileRows) {
      const int rows = int(std::min<int64_t>(kTileRows, end - v0));
      std::fill(acc, acc + size_t(rows) * size_t(L.rows) * 8, 0.0f);
      for (int64_t h0 = 0; h0 < L.cols; h0 += kChunk) {
        const int64_t n = std::min(kChunk, L.cols - h0);
        const void* w[kTileRows];
        for (int r = 0; r < rows; ++r) {
          const char* row = static_cast<const char*>(weight.data) +
                            (size_t(v0 + r) * size_t(weight.row_stride) + size_t(h0)) * elt;
          w[r] = row;
          if (widen_first) {
            widen(reinterpret_cast<const uint16_t*>(row), dtype, n, wide + r * kChunk);
            w[r] = wide + r * kChunk;
          }
        }
        accumulate(w, widen_first ? NT_F32 : dtype, rows, x + h0, L.padded_cols, L.rows, n, acc);
      }
      for (int64_t m = 0; m < L.rows; ++m)
        for (int r = 0; r < rows; ++r) {
          float score = lane_sum(acc + (r * L.rows + m) * 8);
          if (bias.data != nullptr) score += widen_element(bias.data, bias.dtype, v0 + r);
          push(part, m, v0 + r, score);
        }
    }
    done(part);
  });
}

}  // namespace

size_t dense_scores_bytes(const nt_tensor& hidden, const nt_tensor& weight) {
  return score_layout(hidden, weight).total;
}

void dense_scores(const nt_tensor& hidden, const nt_tensor& weight, const nt_tensor& bias,
                  float* scores, int64_t stride, char* piece) {
  score_pass(hidden, weight, bias, piece,
             [&](int, int64_t m, int64_t v, float score) { scores[m * stride + v] = score; },
             [](int) {});
}

size_t CpuBackend::lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a) {
  if (a.hidden.shape[0] == 0) return 0;
  return TopkHeadLayout(a.hidden.shape[0], a.k, score_layout(a.hidden, a.weight).total).total;
}

void CpuBackend::lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace,
                                    size_t workspace_bytes, void*) {
  const int64_t rows = a.hidden.shape[0];
  if (rows == 0) return;
  run_topk_head("lm_head_topk_dense", rows, a.k, score_layout(a.hidden, a.weight).total, workspace,
                workspace_bytes, a.values, a.indices, [&](char* piece, auto push, auto done) {
                  score_pass(a.hidden, a.weight, a.bias, piece, push, done);
                });
}

}  // namespace nt::cpu
