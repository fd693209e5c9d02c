// Binary LM head with exact top-k:
//   score[m,v] = act_scale[m] * sum_g float(wscale[v,g]) * D[m,v,g] + bias[v],
// D the exact int32 dot of act_q[m] with the signs of group g of row v, fed
// straight into per-(part, row) selectors; the [M,V] logits are never stored.
//
// D comes from the set bits alone: D = 2 * sum_{bit set} a_j - sum_g(a), with
// the per-group activation sums computed once per call. Weight rows go in
// tiles of 4: their sign words are expanded to 0/1 bytes once and the tile
// meets every hidden row, so the packed weights are read from memory once per
// call and each activation load serves 4 weight rows.
//
// Arithmetic (identical on the AVX2 and portable paths): lane l = g mod 8
// accumulates fma(float(wscale[v,g]), float(D), lane) in increasing g; the 8
// lanes are summed by the fixed tree lane_sum(); then one fp32 multiply by
// act_scale[m] and one fp32 add of the bias. |D| <= 128 * 256, exact in fp32.
#include <algorithm>
#include <cstdint>

#include "core/half.h"
#include "core/portable.h"
#include "cpu/lm_head_scores.h"
#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/thread_pool.h"
#include "cpu/topk_select.h"

namespace nt::cpu {

#if defined(__x86_64__) || defined(_M_X64)
namespace binary_avx2 {  // lm_head_binary_avx2.cpp
void expand_signs(const uint32_t* words, int64_t n_words, uint8_t* mask);
void widen_scales(const uint16_t* src, int64_t n, float* dst);
void group_lanes(const uint8_t* mask, const float* scale, int tile_rows, const int8_t* act,
                 int64_t act_stride, const int32_t* group_sums, int64_t m_count, int64_t groups,
                 int group_size, float* lanes);
}  // namespace binary_avx2
#endif

namespace {

constexpr int kTileRows = 4;  // weight rows per tile: each activation load serves 4
constexpr int64_t kMinRowsPerPart = 256;

void widen_scales_portable(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t g = 0; g < n; ++g) dst[g] = nt_f16_to_f32(src[g]);
}

void expand_signs_portable(const uint32_t* words, int64_t n_words, uint8_t* mask) {
  for (int64_t w = 0; w < n_words; ++w)
    for (int j = 0; j < 32; ++j) mask[32 * w + j] = uint8_t((words[w] >> j) & 1u);
}

// For weight row t of the tile (masks [t][H], scales [t][round8(groups)],
// zero-padded) and hidden row m: lanes[t][m][l] = fma chain, over the groups
// g = l, l+8, ... (padded groups: scale 0, D 0), of scale[t][g] * float(D).
void group_lanes_portable(const uint8_t* mask, const float* scale, int tile_rows,
                          const int8_t* act, int64_t act_stride, const int32_t* group_sums,
                          int64_t m_count, int64_t groups, int group_size, float* lanes) {
  const int64_t padded = round8(groups), cols = groups * group_size;
  for (int t = 0; t < tile_rows; ++t)
    for (int64_t m = 0; m < m_count; ++m) {
      const uint8_t* mt = mask + t * cols;
      const int8_t* am = act + m * act_stride;
      float* p = lanes + (t * m_count + m) * 8;
      std::fill(p, p + 8, 0.0f);
      for (int64_t g = 0; g < padded; ++g) {
        int32_t dot = 0;
        if (g < groups) {
          int32_t plus = 0;
          for (int64_t j = g * group_size; j < (g + 1) * group_size; ++j)
            if (mt[j]) plus += am[j];
          dot = 2 * plus - group_sums[m * padded + g];
        }
        p[g % 8] = nt_fmaf(scale[t * padded + g], float(dot), p[g % 8]);
      }
    }
}

// The per-group activation sums, then per part a tile's sign bytes and
// widened scales and its [tile row][row][lane] sums.
struct ScoreLayout {
  int64_t parts, rows, cols, groups, padded_groups;
  size_t sums, scratch, scratch_per_part, total;  // offsets from the piece's start; total size
};

ScoreLayout score_layout(const nt_tensor& act_q, int32_t group_size) {
  ScoreLayout L;
  L.parts = num_threads();
  L.rows = act_q.shape[0];
  L.cols = act_q.shape[1];
  L.groups = L.cols / group_size;
  L.padded_groups = round8(L.groups);
  L.sums = 0;
  L.scratch = L.sums + align64(size_t(L.rows) * size_t(L.padded_groups) * sizeof(int32_t));
  L.scratch_per_part = align64(size_t(kTileRows) * size_t(L.cols)) +
                       align64(size_t(kTileRows) * size_t(L.padded_groups) * sizeof(float)) +
                       align64(size_t(kTileRows) * size_t(L.rows) * 8 * sizeof(float));
  L.total = L.scratch + size_t(L.parts) * L.scratch_per_part;
  return L;
}

// Every score of the head, in the arithmetic of the file comment: each part
// of the vocabulary (one per pool thread) calls push(part, m, v, score) for
// its rows v in increasing order, then done(part).
template <class Push, class Done>
void score_pass(const BinaryHead& a, char* piece, Push push, Done done) {
  const ScoreLayout L = score_layout(a.act_q, a.group_size);
  const int64_t vocab = a.wq.shape[0];
  const int64_t words = L.cols / 32;

  int32_t* sums = reinterpret_cast<int32_t*>(piece + L.sums);
  for (int64_t m = 0; m < L.rows; ++m) {
    const int8_t* am = static_cast<const int8_t*>(a.act_q.data) + m * a.act_q.row_stride;
    for (int64_t g = 0; g < L.padded_groups; ++g) {
      int32_t s = 0;
      if (g < L.groups)
        for (int64_t j = g * a.group_size; j < (g + 1) * a.group_size; ++j) s += am[j];
      sums[m * L.padded_groups + g] = s;
    }
  }

  auto expand = expand_signs_portable;
  auto widen_scales = widen_scales_portable;
  auto group_lanes = group_lanes_portable;
#if defined(__x86_64__) || defined(_M_X64)
  if (use_avx2()) {
    expand = binary_avx2::expand_signs;
    widen_scales = binary_avx2::widen_scales;
    group_lanes = binary_avx2::group_lanes;
  }
#endif

  const float* act_scale = static_cast<const float*>(a.act_scale.data);
  parallel_for(vocab, kMinRowsPerPart, [&](int64_t begin, int64_t end, int part) {
    char* scratch = piece + L.scratch + size_t(part) * L.scratch_per_part;
    uint8_t* mask = reinterpret_cast<uint8_t*>(scratch);
    float* scale = reinterpret_cast<float*>(scratch + align64(size_t(kTileRows) * size_t(L.cols)));
    float* lanes = reinterpret_cast<float*>(
        reinterpret_cast<char*>(scale) +
        align64(size_t(kTileRows) * size_t(L.padded_groups) * sizeof(float)));
    for (int t = 0; t < kTileRows; ++t)
      std::fill(scale + t * L.padded_groups + L.groups, scale + (t + 1) * L.padded_groups, 0.0f);
    for (int64_t v0 = begin; v0 < end; v0 += kTileRows) {
      const int rows = int(std::min<int64_t>(kTileRows, end - v0));
      for (int t = 0; t < rows; ++t) {
        const int64_t v = v0 + t;
        widen_scales(static_cast<const uint16_t*>(a.wscale.data) + v * a.wscale.row_stride,
                     L.groups, scale + t * L.padded_groups);
        expand(reinterpret_cast<const uint32_t*>(static_cast<const int32_t*>(a.wq.data) +
                                                 v * a.wq.row_stride),
               words, mask + t * L.cols);
      }
      group_lanes(mask, scale, rows, static_cast<const int8_t*>(a.act_q.data), a.act_q.row_stride,
                  sums, L.rows, L.groups, a.group_size, lanes);
      for (int64_t m = 0; m < L.rows; ++m)
        for (int t = 0; t < rows; ++t) {
          float score = act_scale[m] * lane_sum(lanes + (t * L.rows + m) * 8);
          if (a.bias.data != nullptr) score += widen_element(a.bias.data, a.bias.dtype, v0 + t);
          push(part, m, v0 + t, score);
        }
    }
    done(part);
  });
}

}  // namespace

size_t binary_scores_bytes(const BinaryHead& a) { return score_layout(a.act_q, a.group_size).total; }

void binary_scores(const BinaryHead& a, float* scores, int64_t stride, char* piece) {
  score_pass(a, piece,
             [&](int, int64_t m, int64_t v, float score) { scores[m * stride + v] = score; },
             [](int) {});
}

size_t CpuBackend::lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a) {
  if (a.act_q.shape[0] == 0) return 0;
  return TopkHeadLayout(a.act_q.shape[0], a.k, score_layout(a.act_q, a.group_size).total).total;
}

void CpuBackend::lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace,
                                     size_t workspace_bytes, void*) {
  const int64_t rows = a.act_q.shape[0];
  if (rows == 0) return;
  const BinaryHead head{a.act_q, a.act_scale, a.wq, a.wscale, a.bias, a.group_size};
  run_topk_head("lm_head_topk_binary", rows, a.k, score_layout(a.act_q, a.group_size).total,
                workspace, workspace_bytes, a.values, a.indices,
                [&](char* piece, auto push, auto done) { score_pass(head, piece, push, done); });
}

}  // namespace nt::cpu
