// Binary LM head with exact top-k on CUDA:
//   score[m,v] = act_scale[m] * sum_g float(wscale[v,g]) * D[m,v,g] + bias[v],
// D the exact int32 dot of act_q[m] with the signs of group g of row v, scored
// and selected in one pass over the packed weights (cuda/topk_cta.cuh and
// cuda/topk_merge.cuh for the top-k; the [M,V] scores stay in registers).
//
// One kernel per regime (choose() below; docs/SEMANTICS.md, "Kernel
// choice"), all computing the same integers D and the same fp32 scores.
// Before each pass of the two pass kernels, binary_prep_kernel permutes the
// activations into the K order their MMAs read (lm_head_binary.cuh);
// binary_mma_kernel's also get accumulator seeds. Instantiated with kScores,
// the kernels store every score instead (lm_head_scores_binary).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "cuda/lm_head_binary.cuh"
#include "cuda/lm_head_binary_pass.cuh"
#include "cuda/lm_head_binary_rows.cuh"
#include "cuda/lm_head_binary_wgmma.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/lm_head_host.cuh"
#include "cuda/lm_head_ops.cuh"
#include "cuda/tensor_map.cuh"
#include "cuda/topk_cta.cuh"
#include "cuda/topk_merge.cuh"

namespace nt::cuda {
namespace lm_head {
namespace {

constexpr const char* kOp = "lm_head_topk_binary";

// ---- prep: permuted activations and accumulator seeds ---------------------------

struct PrepParams : BinaryOperands {  // the pass's activations
  int8_t* act_perm;  // [rows][padded_cols]
  int64_t padded_cols;
  int32_t* seed;  // [groups][kPassRows]; null: no seeds (binary_wgmma_bulk_kernel)
  int k_order;    // 1: the warpgroup MMA's K order (binary_k_order_column)
};

// CTA (x, y): columns [1024x, 1024x + 1024) of token row y (whole groups).
constexpr int kPrepCols = 1024;
__global__ void __launch_bounds__(256) binary_prep_kernel(PrepParams p) {
  const int r = blockIdx.y;
  const int col0 = blockIdx.x * kPrepCols, col_end = min(p.cols, col0 + kPrepCols);
  const int8_t* src = p.act_q + int64_t(r) * p.act_stride;
  int8_t* dst = p.act_perm + int64_t(r) * p.padded_cols;
  const int words = p.group / 32;
  for (int i = col0 + threadIdx.x; i < col_end; i += blockDim.x) {
    const int q = i & (p.group - 1);  // G is a power of two
    dst[i] = src[i - q + (p.k_order ? binary_k_order_column(words, q) : binary_permuted_column(words, q))];
  }
  if (p.seed == nullptr) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int g = col0 / p.group + warp; g < col_end / p.group; g += blockDim.x >> 5) {
    int32_t sum = 0;
    for (int j = lane; j < p.group; j += 32) sum += src[g * p.group + j];
    sum = warp_sum(sum);
    if (lane == 0) p.seed[int64_t(g) * kPassRows + r] = kMagicBits - 64 * sum;
  }
}

// ---- generic kernel -----------------------------------------------------------

constexpr int kGenericWords = 4;  // 128 columns per step

// Each thread's 4 x 4 block: D from dp4a of 0/1 sign bytes
// (D = 2 * D_plus - sum(a)), then one fmaf per group, in increasing g.
template <bool kScores>
__global__ void __launch_bounds__(kGenericThreads) binary_generic_kernel(BinaryParams p) {
  __shared__ uint32_t w_tile[kGenericTileRows][kGenericWords + 1];
  __shared__ uint32_t x_tile[topk::kMaxRows][kGenericWords * 8 + 1];
  const int n_words = p.cols / 32, words_per_group = p.group / 32;
  auto score = [&](int tile_row0, int row_end, int ty, int tx, float (&out)[4][4]) {
    int32_t dot[4][4] = {};
    for (int w0 = 0; w0 < n_words; w0 += kGenericWords) {
      for (int e = threadIdx.x; e < kGenericTileRows * kGenericWords; e += kGenericThreads) {
        const int r = e / kGenericWords, c = e % kGenericWords;
        const int row = tile_row0 + r;
        w_tile[r][c] = row < row_end && w0 + c < n_words ? p.wq[int64_t(row) * p.wq_stride + w0 + c] : 0u;
      }
      for (int e = threadIdx.x; e < topk::kMaxRows * kGenericWords * 8; e += kGenericThreads) {
        const int r = e / (kGenericWords * 8), c = e % (kGenericWords * 8);
        const int col = (w0 * 32) + 4 * c;
        uint32_t packed = 0;
        if (r < p.rows && col < p.cols) {
          const int8_t* a = p.act_q + int64_t(r) * p.act_stride + col;
          packed = uint32_t(uint8_t(a[0])) | uint32_t(uint8_t(a[1])) << 8 |
                   uint32_t(uint8_t(a[2])) << 16 | uint32_t(uint8_t(a[3])) << 24;
        }
        x_tile[r][c] = packed;
      }
      __syncthreads();
      for (int ww = 0; ww < kGenericWords && w0 + ww < n_words; ++ww) {
        int32_t bits[4][8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint32_t w = w_tile[ty * 4 + i][ww];
#pragma unroll
          for (int r = 0; r < 8; ++r)
            bits[i][r] = int32_t((((w >> (4 * r)) & 0xFu) * 0x00204081u) & 0x01010101u);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          int32_t x[8], sum = 0;
#pragma unroll
          for (int r = 0; r < 8; ++r) {
            x[r] = int32_t(x_tile[tx * 4 + j][ww * 8 + r]);
            sum = __dp4a(x[r], 0x01010101, sum);
          }
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            int32_t plus = 0;
#pragma unroll
            for (int r = 0; r < 8; ++r) plus = __dp4a(bits[i][r], x[r], plus);
            dot[i][j] += 2 * plus - sum;
          }
        }
        const int word = w0 + ww;
        if ((word + 1) % words_per_group == 0) {
          const int grp = word / words_per_group;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int row = tile_row0 + ty * 4 + i;
            const float s = row < row_end
                                ? nt_f16_to_f32(p.wscale[int64_t(row) * p.wscale_stride + grp])
                                : 0.0f;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              out[i][j] = fmaf(s, float(dot[i][j]), out[i][j]);
              dot[i][j] = 0;
            }
          }
        }
      }
      __syncthreads();
    }
  };
  generic_tiles<kScores>(p, score, [&](float out, int m, int row) {
    return add_bias(p.act_scale[m] * out, p.bias, row);
  });
}

// ---- host -------------------------------------------------------------------

enum class BinaryKernel { kRows, kWgmmaBulk, kMma, kGeneric };

// Row strides, in bytes, of the sign and scale matrices for tensor maps.
uint64_t sign_map_stride(const nt_lm_head_binary_args& a) {
  return map_row_bytes(a.wq.shape[0], a.wq.row_stride, 4, size_t(a.act_q.shape[1] / 8));
}
uint64_t scale_map_stride(const nt_lm_head_binary_args& a) {
  return map_row_bytes(a.wscale.shape[0], a.wscale.row_stride, 2, size_t(2 * (a.act_q.shape[1] / a.group_size)));
}

// Whether a block of scale rows lands in one bulk copy (both bulk-copy
// kernels): rows a multiple of 16 bytes and at most 256 halves (one box), at
// 16-byte aligned strides.
bool scale_rows_one_box(const nt_lm_head_binary_args& a) {
  const int64_t groups = a.act_q.shape[1] / a.group_size;
  return (2 * groups) % 16 == 0 && groups <= 256 && row_alignment(a.wscale) % 16 == 0;
}

// ---- binary_rows_kernel

// Scale rows go in whole cp.async pieces (no partial piece may read past the
// tensor): the largest of 16, 8, 4 bytes that divides the rows' alignment and
// their length; 0 when none does.
int scale_copy_bytes(const nt_lm_head_binary_args& a) {
  const int64_t scale_row_bytes = 2 * (a.act_q.shape[1] / a.group_size);
  int scale_copy = 16;
  while (scale_copy >= 4 && (row_alignment(a.wscale) % scale_copy != 0 || scale_row_bytes % scale_copy != 0))
    scale_copy /= 2;
  return scale_copy >= 4 ? scale_copy : 0;
}

// Whether the bit-plane kernel fills its stages by bulk tensor copies: sm_90
// code and a tensor-map encoder, whole 1,024-column boxes (sign rows are
// 16-byte aligned for any call the kernel takes) and scale rows in one box.
bool rows_tensor_copies(const nt_lm_head_binary_args& a, const DeviceLimits& dev, int device) {
  return dev.cc_major >= 9 && a.act_q.shape[1] % 1024 == 0 && scale_rows_one_box(a) &&
         tensor_map_encoder() != nullptr &&
         kernel_has_sm90_code(reinterpret_cast<const void*>(binary_rows_kernel<4, 1, false>), device);
}

// Warps and stages per warp of the bit-plane kernel (warps 0: it does not
// fit), the most warps first.
struct RowsConfig {
  int warps = 0, stages = 0;
};
constexpr int kRowsMinWarps = 4;
int rows_smem_budget(const DeviceLimits& dev) { return dev.max_smem_optin - int(sizeof(RowsShared)) - 1024; }
RowsConfig rows_config(const nt_lm_head_binary_args& a, const DeviceLimits& dev, bool tensor_copies) {
  const RowsLayout L = rows_layout(int(a.act_q.shape[1]), a.group_size, int(a.act_q.shape[0]), tensor_copies);
  for (int warps : {kRowsWarps, 6, kRowsMinWarps})
    for (int stages = kRowsMaxStages; stages >= 2; --stages)
      if (rows_smem_bytes(L, warps, stages) <= rows_smem_budget(dev)) return {warps, stages};
  return {};
}

// The bit-plane kernel's per-warp candidate lists, `stride` entries each in
// the workspace (every row its warp scores, at most max(4k + 32, 512)), cut
// back to k when they could not take the next tile. Sized for the fewest
// warps a launch takes, so it holds whichever configuration fits.
struct WarpListPlan {
  int stride = 0;
  size_t offset = 0, end = 0;
};
constexpr int64_t kRowsListMin = 512;

// ---- the pass kernels

// Per-call activation layout in the workspace, after the top-k buffers.
struct ActLayout {
  int64_t padded_cols;  // H rounded up to kChunkCols: bytes per permuted row
  int64_t groups;       // padded_cols / G
  size_t act_offset, seed_offset, end;
};

ActLayout act_layout(int64_t cols, int group, size_t offset) {
  ActLayout l;
  l.padded_cols = (cols + kChunkCols - 1) / kChunkCols * kChunkCols;
  l.groups = l.padded_cols / group;
  l.act_offset = align_up(offset, 256);
  l.seed_offset = align_up(l.act_offset + size_t(kPassRows) * size_t(l.padded_cols), 256);
  l.end = l.seed_offset + size_t(l.groups) * kPassRows * 4;
  return l;
}

// binary_wgmma_bulk_kernel's shared memory: static, the top-k state and the
// mbarriers; dynamic, `stages` stages (at least 2), the two tile buffers of
// scales and 1024 bytes for the stage alignment.
int bulk_smem_budget(const DeviceLimits& dev) {
  return dev.max_smem_optin - int(sizeof(BulkTopkShared)) - (2 * kMaxStages + 4) * 8;
}
int bulk_dynamic_bytes(const BulkLayout& B, int stages) { return stages * B.stage_bytes + 2 * B.scale_bytes + 1024; }
int bulk_stages(int cols, int group, int nt, const DeviceLimits& dev) {
  const BulkLayout B = bulk_layout(cols, group, nt);
  return std::min(kMaxStages, (bulk_smem_budget(dev) - bulk_dynamic_bytes(B, 0)) / B.stage_bytes);
}

// Whether binary_wgmma_bulk_kernel takes a call: its sm_90a code in the
// build (NEXTTOK_CUDA_SM90A: compute_90 PTX lacks the warpgroup MMAs) on an
// sm_90 device, a tensor-map encoder, G = 128 or 256, whole 512-column
// chunks, 16-byte aligned sign rows, scale rows in one box, and two stages at
// the call's widest pass.
bool wgmma_bulk_takes(const nt_lm_head_binary_args& a, const DeviceLimits& dev, int device) {
#if defined(NEXTTOK_CUDA_SM90A)
  const int64_t cols = a.act_q.shape[1];
  const int widest = pass_n_tiles(int(std::min<int64_t>(a.act_q.shape[0], kPassRows)));
  return dev.cc_major == 9 && (a.group_size == 128 || a.group_size == 256) && cols % kChunkCols == 0 &&
         row_alignment(a.wq) % 16 == 0 && scale_rows_one_box(a) &&
         bulk_stages(int(cols), a.group_size, widest, dev) >= 2 && tensor_map_encoder() != nullptr &&
         kernel_has_sm90_code(reinterpret_cast<const void*>(binary_wgmma_bulk_kernel<1, 4, false>), device);
#else
  (void)a, (void)dev, (void)device;
  return false;
#endif
}

// binary_mma_kernel's shared memory: its stages beside the top-k state; its
// passes take as many rows (a multiple of 8) as leave room for 3 stages.
int mma_smem_budget(const DeviceLimits& dev) {
  return dev.max_smem_optin - int(sizeof(topk::CtaShared<kWarps>)) - 1024;
}
int mma_pass_rows(int group, const DeviceLimits& dev) {
  int pass_rows = kPassRows;
  while (pass_rows > 8 && mma_smem_budget(dev) < 3 * stage_layout(group, pass_rows).bytes) pass_rows -= 8;
  return pass_rows;
}

// ---- the choice

struct Choice {
  BinaryKernel kernel = BinaryKernel::kGeneric;
  bool tensor_copies = false;  // kRows: stages filled by bulk tensor copies
  RowsConfig rows;             // kRows: warps and stages per warp
};

Choice choose(const nt_lm_head_binary_args& a, const DeviceLimits& dev, int device) {
  Choice c;
  const bool wide_groups = a.group_size == 128 || a.group_size == 256;
  if (a.act_q.shape[0] <= kRowsMaxTokenRows && dev.cc_major >= 8 && wide_groups && row_alignment(a.wq) >= 16 &&
      scale_copy_bytes(a) != 0) {
    c.tensor_copies = rows_tensor_copies(a, dev, device);
    c.rows = rows_config(a, dev, c.tensor_copies);
    if (c.rows.warps != 0) {
      c.kernel = BinaryKernel::kRows;
      return c;
    }
  }
  if (wgmma_bulk_takes(a, dev, device)) {
    c.kernel = BinaryKernel::kWgmmaBulk;
  } else if (dev.cc_major >= 8 && row_alignment(a.wq) >= 4 && row_alignment(a.wscale) >= 4 &&
             mma_smem_budget(dev) >= 2 * stage_layout(a.group_size, mma_pass_rows(a.group_size, dev)).bytes) {
    c.kernel = BinaryKernel::kMma;
  }
  return c;
}

// ---- the workspace

struct Plan {
  TopkPlan topk;
  ActLayout act;
  WarpListPlan lists;
};

// With `scores` (every score written out) there are no candidates: the
// workspace holds the activations only.
Plan plan_for(const nt_lm_head_binary_args& a, const DeviceLimits& dev, bool scores = false) {
  Plan p;
  const int64_t rows = a.act_q.shape[0];
  p.topk = make_topk_plan(a.wq.shape[0], rows, a.k, dev.sm_count);
  if (scores) p.topk.counts_offset = p.topk.end = 0;
  p.act = act_layout(a.act_q.shape[1], a.group_size, p.topk.end);
  p.lists.offset = p.lists.end = p.act.end;
  if (rows <= kRowsMaxTokenRows && !scores) {
    // A warp takes every W-th 16-row tile of its CTA's range.
    const int tiles = (p.topk.rows_per_cta / kRowsTile + kRowsMinWarps - 1) / kRowsMinWarps;
    const int64_t rows_per_warp = int64_t(tiles) * kRowsTile;
    p.lists.stride = int(std::min<int64_t>(rows_per_warp,
                                           std::max<int64_t>(4 * int64_t(a.k) + 2 * kRowsTile, kRowsListMin)));
    p.lists.offset = align_up(p.act.end, 256);
    p.lists.end = p.lists.offset + size_t(p.topk.grid) * kRowsWarps * size_t(rows) * size_t(p.lists.stride) *
                                       sizeof(topk::Candidate);
  }
  return p;
}

// ---- the launches

// What every launch of a call needs.
struct Call {
  const nt_lm_head_binary_args& a;
  const Plan& plan;
  char* ws;  // aligned
  topk::CandidateArgs cand;  // with scores: the call's first row
  DeviceLimits dev;
  int device;
  cudaStream_t stream;
  const char* op;  // the call's, for its errors
};

// The activations of a pass, rows m0 onward of the call (strides 0 for a
// single row), and where its output goes.
struct Pass {
  int rows;
  const int8_t* act_q;
  int64_t act_stride;
  const float* act_scale;
  topk::CandidateArgs cand;
};

BinaryOperands operands(const nt_lm_head_binary_args& a, const Pass& pass) {
  BinaryOperands o{};
  o.wq = static_cast<const uint32_t*>(a.wq.data);
  o.wq_stride = a.wq.shape[0] > 1 ? a.wq.row_stride : 0;
  o.wscale = static_cast<const uint16_t*>(a.wscale.data);
  o.wscale_stride = a.wscale.shape[0] > 1 ? a.wscale.row_stride : 0;
  o.act_q = pass.act_q;
  o.act_stride = pass.act_stride;
  o.act_scale = pass.act_scale;
  o.cols = static_cast<int>(a.act_q.shape[1]);
  o.vocab = static_cast<int>(a.wq.shape[0]);
  o.rows = pass.rows;
  o.group = a.group_size;
  return o;
}

// A scoring kernel's parameters with the fields every such struct has
// filled: the pass's operands, the CTAs' vocabulary ranges, bias and output.
template <class Params>
Params scoring_params(const Call& c, const Pass& pass) {
  Params p{};
  static_cast<BinaryOperands&>(p) = operands(c.a, pass);
  p.rows_per_cta = c.plan.topk.rows_per_cta;
  p.bias = BiasArgs{c.a.bias.data, c.a.bias.dtype};
  p.cand = pass.cand;
  return p;
}

template <bool kScores>
void launch_rows(const Call& c, const Pass& pass, const Choice& choice) {
  const nt_lm_head_binary_args& a = c.a;
  BinaryRowsParams p = scoring_params<BinaryRowsParams>(c, pass);
  p.scale_copy = scale_copy_bytes(a);
  p.stages = choice.rows.stages;
  p.tensor_copies = choice.tensor_copies ? 1 : 0;
  // A tile's signs in one copy of the 3-D map, its scales in one of the 2-D map.
  if (choice.tensor_copies) {
    encode_map_u16_lines(c.op, &p.sign_map, a.wq.data, uint64_t(p.vocab), uint64_t(p.cols / 16), sign_map_stride(a),
                         kRowsTile, uint32_t(p.cols / 1024));
    encode_map_u16(c.op, &p.scale_map, a.wscale.data, uint64_t(p.vocab), uint64_t(p.cols / p.group),
                   scale_map_stride(a), kRowsTile, uint32_t(p.cols / p.group), CU_TENSOR_MAP_SWIZZLE_NONE, false);
  }
  p.warp_cand = kScores ? nullptr : reinterpret_cast<topk::Candidate*>(c.ws + c.plan.lists.offset);
  p.warp_stride = c.plan.lists.stride;
  const bool wide_groups = a.group_size == 256;
  auto kernel = p.rows == 1
                    ? (wide_groups ? binary_rows_kernel<8, 1, kScores> : binary_rows_kernel<4, 1, kScores>)
                    : (wide_groups ? binary_rows_kernel<8, 2, kScores> : binary_rows_kernel<4, 2, kScores>);
  // Raised once per device to the whole budget (a call's size depends on H).
  allow_dynamic_smem(kernel, rows_smem_budget(c.dev), c.device, c.op);
  const RowsLayout L = rows_layout(p.cols, p.group, p.rows, choice.tensor_copies);
  kernel<<<c.plan.topk.grid, 32 * choice.rows.warps, rows_smem_bytes(L, choice.rows.warps, choice.rows.stages),
           c.stream>>>(p);
}

template <bool kScores>
void launch_mma(const Call& c, BinaryParams p) {
  p.stages = std::min(kMaxStages, mma_smem_budget(c.dev) / stage_layout(p.group, p.rows).bytes);
  with_n_tiles(p.rows, [&](auto nt) {
    constexpr int NT = decltype(nt)::value;
    // G >= 128: every lane's k-steps walk the same classes (kWide).
    auto kernel = p.group >= 128 ? binary_mma_kernel<NT, true, kScores> : binary_mma_kernel<NT, false, kScores>;
    allow_dynamic_smem(kernel, mma_smem_budget(c.dev), c.device, c.op);
    kernel<<<c.plan.topk.grid, kThreads, p.stages * stage_layout(p.group, p.rows).bytes, c.stream>>>(p);
  });
}

template <bool kScores>
void launch_wgmma_bulk(const Call& c, const BinaryParams& p) {
  with_n_tiles(p.rows, [&](auto nt) {
    constexpr int NT = decltype(nt)::value;
    const int64_t vocab = p.vocab, groups = p.cols / p.group;
    const BulkLayout B = bulk_layout(p.cols, p.group, NT);
    BinaryBulkParams bp{};
    bp.b = p;
    bp.b.stages = bulk_stages(p.cols, p.group, NT, c.dev);
    encode_map_u16(c.op, &bp.sign_map, c.a.wq.data, uint64_t(vocab), uint64_t(p.cols / 16), sign_map_stride(c.a),
                   kBulkBoxRows, kChunkCols / 16, CU_TENSOR_MAP_SWIZZLE_64B, true);
    encode_map_u16(c.op, &bp.scale_map, c.a.wscale.data, uint64_t(vocab), uint64_t(groups), scale_map_stride(c.a),
                   kBulkBoxRows, uint32_t(groups), CU_TENSOR_MAP_SWIZZLE_NONE, false);
    encode_map_u16(c.op, &bp.act_map, p.act_perm, uint64_t(p.rows), uint64_t(p.padded_cols / 2),
                   uint64_t(p.padded_cols), uint32_t(8 * NT), 64, CU_TENSOR_MAP_SWIZZLE_128B, false);
    auto kernel = p.group == 128 ? binary_wgmma_bulk_kernel<NT, 4, kScores> : binary_wgmma_bulk_kernel<NT, 8, kScores>;
    allow_dynamic_smem(kernel, bulk_smem_budget(c.dev), c.device, c.op);
    kernel<<<c.plan.topk.grid, kBulkThreads, bulk_dynamic_bytes(B, bp.b.stages), c.stream>>>(bp);
  });
}

// A pass of a pass kernel: first the activations in the K order of its MMAs
// (binary_mma_kernel's permuted layout with accumulator seeds, or the
// warpgroup MMA's own order: it adds kMagicBits when it scales, no seeds).
template <bool kScores>
void launch_pass(const Call& c, const Pass& pass, bool bulk) {
  const nt_lm_head_binary_args& a = c.a;
  PrepParams prep{};
  static_cast<BinaryOperands&>(prep) = operands(a, pass);
  prep.act_perm = reinterpret_cast<int8_t*>(c.ws + c.plan.act.act_offset);
  prep.padded_cols = c.plan.act.padded_cols;
  prep.seed = bulk ? nullptr : reinterpret_cast<int32_t*>(c.ws + c.plan.act.seed_offset);
  prep.k_order = bulk ? 1 : 0;
  const dim3 prep_grid(unsigned((prep.cols + kPrepCols - 1) / kPrepCols), unsigned(pass.rows));
  binary_prep_kernel<<<prep_grid, 256, 0, c.stream>>>(prep);
  check_launch(c.op);

  BinaryParams p = scoring_params<BinaryParams>(c, pass);
  p.act_perm = prep.act_perm;
  p.padded_cols = prep.padded_cols;
  p.seed = prep.seed;
  p.wq_copy = static_cast<int>(std::min<int64_t>(16, row_alignment(a.wq)));
  p.sign_flip = 0xC0C0C0C0u;
  if (bulk) launch_wgmma_bulk<kScores>(c, p);
  else launch_mma<kScores>(c, p);
}

// on_head_device with this head's rows, device and operands.
template <class Body>
auto on_device(const char* op, const nt_lm_head_binary_args& a, bool check, Body&& body) {
  return on_head_device(op, a.act_q.shape[0], a.wq.device_id, check,
                        {{"act_scale", a.act_scale}, {"wq", a.wq}, {"wscale", a.wscale}, {"bias", a.bias},
                         {"values", a.values}, {"indices", a.indices}},
                        body);
}

// Rows [0, M) of the call in passes of its kernel (the decode kernel: one),
// each pass's output going to c.cand (with kScores, its scores from the
// pass's first row on), and after(m0, rows) once each pass is launched.
template <bool kScores, class After>
void score_passes(const Call& c, After&& after) {
  const nt_lm_head_binary_args& a = c.a;
  const Choice choice = choose(a, c.dev, c.device);
  const int pass_rows = choice.kernel == BinaryKernel::kMma ? mma_pass_rows(a.group_size, c.dev) : kPassRows;
  for (int64_t m0 = 0; m0 < a.act_q.shape[0]; m0 += pass_rows) {
    Pass pass{};
    pass.rows = static_cast<int>(std::min<int64_t>(pass_rows, a.act_q.shape[0] - m0));
    pass.act_q = static_cast<const int8_t*>(a.act_q.data) + m0 * a.act_q.row_stride;
    pass.act_stride = pass.rows > 1 ? a.act_q.row_stride : 0;
    pass.act_scale = static_cast<const float*>(a.act_scale.data) + m0;
    pass.cand = c.cand;
    if (kScores) pass.cand.scores = c.cand.scores + m0 * c.cand.score_stride;
    switch (choice.kernel) {
      case BinaryKernel::kRows: launch_rows<kScores>(c, pass, choice); break;
      case BinaryKernel::kWgmmaBulk: launch_pass<kScores>(c, pass, true); break;
      case BinaryKernel::kMma: launch_pass<kScores>(c, pass, false); break;
      case BinaryKernel::kGeneric:
        binary_generic_kernel<kScores><<<c.plan.topk.grid, kGenericThreads, 0, c.stream>>>(
            scoring_params<BinaryParams>(c, pass));
        break;
    }
    check_launch(c.op);
    after(m0, pass.rows);
  }
}

}  // namespace
}  // namespace lm_head

size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a) {
  using namespace lm_head;
  return on_device(kOp, a, false, [&](const DeviceLimits& dev) { return plan_for(a, dev).lists.end + kWorkspaceSlack; });
}

void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace, size_t workspace_bytes,
                         cudaStream_t stream) {
  using namespace lm_head;
  on_device(kOp, a, true, [&](const DeviceLimits& dev) {
    const Plan plan = plan_for(a, dev);
    check_workspace(kOp, plan.lists.end + kWorkspaceSlack, workspace, workspace_bytes);
    char* ws = aligned_workspace(workspace);
    const topk::MergeCall topk(candidate_args(plan.topk, ws), plan.topk.grid, a.wq.device_id, dev, kOp);
    const Call call{a, plan, ws, topk.cand, dev, a.wq.device_id, stream, kOp};
    score_passes<false>(call, [&](int64_t m0, int rows) { topk.merge(a.values, a.indices, m0, rows, stream); });
  });
}

size_t lm_head_scores_binary_workspace_size(const char* op, const nt_lm_head_binary_args& a) {
  using namespace lm_head;
  return on_device(op, a, false,
                   [&](const DeviceLimits& dev) { return plan_for(a, dev, true).lists.end + kWorkspaceSlack; });
}

void lm_head_scores_binary(const char* op, const nt_lm_head_binary_args& a, float* scores, int64_t stride,
                           void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  using namespace lm_head;
  on_device(op, a, true, [&](const DeviceLimits& dev) {
    const Plan plan = plan_for(a, dev, true);
    check_workspace(op, plan.lists.end + kWorkspaceSlack, workspace, workspace_bytes);
    topk::CandidateArgs out{};
    out.scores = scores;
    out.score_stride = stride;
    const Call call{a, plan, aligned_workspace(workspace), out, dev, a.wq.device_id, stream, op};
    score_passes<true>(call, [](int64_t, int) {});
  });
}

}  // namespace nt::cuda
