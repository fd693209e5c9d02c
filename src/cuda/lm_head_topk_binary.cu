// Binary LM head with exact top-k on CUDA:
//   score[m,v] = act_scale[m] * sum_g float(wscale[v,g]) * D[m,v,g] + bias[v],
// D the exact int32 dot of act_q[m] with the signs of group g of row v, scored
// and selected in one pass over the packed weights (cuda/topk_cta.cuh and
// cuda/topk_merge.cuh for the top-k; the [M,V] scores stay in registers).
//
// Which kernel scores a call (cuda/lm_head_binary*.cuh), G = 128 or 256 and
// 16-byte aligned sign rows unless said otherwise:
// - 1 or 2 rows: binary_rows_kernel (bit planes on 1-bit MMAs, _rows.cuh);
// - 3 or more rows, in passes of up to 64, on sm_90 (an sm_90a build):
//   binary_wgmma_bulk_kernel (one int8 warpgroup MMA per m64 block for all
//   token rows of the pass, stages filled by bulk tensor copies from a copy
//   warp) where H % 512 == 0, scale rows are 16-byte multiples of at most
//   256 halves and two stages fit; otherwise
//   calls of 3 to 8 rows take binary_stream_kernel (whole rows per stage,
//   _stream.cuh) and passes of more binary_wgmma_kernel (the same MMAs on
//   cp.async stages, _wgmma.cuh);
// - 3 or more rows elsewhere and for other G: binary_stream_kernel up to 8
//   rows, binary_mma_kernel (warp MMAs, 4-byte aligned rows, _pass.cuh) for
//   passes of more. The pass kernels stream 512-column chunks of a 256-row
//   tile and compute the same integers: signs become int8 A fragments with a
//   shift and a mask per register, 64 * D is made the exact float
//   12582912 + 64 * D through kMagicBits (an integer add or a seed), and one
//   FADD and one FFMA per group add wscale * 64D to the fp32 score (the exact
//   1/64 joins act_scale). A prep kernel permutes the activations into the
//   MMAs' K order once per pass;
// - anything else: binary_generic_kernel (dp4a on 0/1 sign bytes), with the
//   same top-k.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "cuda/lm_head_binary.cuh"
#include "cuda/lm_head_binary_pass.cuh"
#include "cuda/lm_head_binary_rows.cuh"
#include "cuda/lm_head_binary_stream.cuh"
#include "cuda/lm_head_binary_wgmma.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/lm_head_host.cuh"
#include "cuda/lm_head_ops.cuh"
#include "cuda/topk_cta.cuh"
#include "cuda/tensor_map.cuh"
#include "cuda/topk_merge.cuh"

namespace nt::cuda {
namespace lm_head {
namespace {

constexpr const char* kOp = "lm_head_topk_binary";


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

// ---- prep: permuted activations and accumulator seeds ---------------------------

struct PrepParams {
  const int8_t* act_q;
  int64_t act_stride;
  int cols, group, rows;
  int8_t* act_perm;  // [rows][padded_cols]
  int64_t padded_cols;
  int32_t* seed;  // [groups][kPassRows]; null: no seeds (the warpgroup kernels)
  int k_order;    // the warpgroup-MMA kernel's K order (binary_k_order_column)
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
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    if (lane == 0) p.seed[int64_t(g) * kPassRows + r] = kMagicBits - 64 * sum;
  }
}

// ---- generic path -----------------------------------------------------------

constexpr int kGenericTileRows = 64;
constexpr int kGenericWords = 4;  // 128 columns per step

struct GenericParams {
  const uint32_t* wq;
  int64_t wq_stride;
  const uint16_t* wscale;
  int64_t wscale_stride;
  const int8_t* act_q;
  int64_t act_stride;
  const float* act_scale;
  int cols, vocab, rows, group, rows_per_cta;
  BiasArgs bias;
  topk::CandidateArgs cand;
};

// 64 vocabulary rows x up to 64 token rows per tile, each thread a 4 x 4
// block: D from dp4a of 0/1 sign bytes (D = 2 * D_plus - sum(a)), then one
// fmaf per group, in increasing g.
__global__ void __launch_bounds__(kThreads) binary_generic_kernel(GenericParams p) {
  __shared__ uint32_t w_tile[kGenericTileRows][kGenericWords + 1];
  __shared__ uint32_t x_tile[topk::kMaxRows][kGenericWords * 8 + 1];
  __shared__ topk::CtaShared<kWarps> topk_shared;
  topk::CtaTopk<kWarps> topk(topk_shared, p.cand, p.rows);

  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kGenericTileRows - 1) / kGenericTileRows;
  const int n_words = p.cols / 32, words_per_group = p.group / 32;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile_row0 = row_begin + tile * kGenericTileRows;
    float out[4][4] = {};
    int32_t dot[4][4] = {};
    for (int w0 = 0; w0 < n_words; w0 += kGenericWords) {
      for (int e = threadIdx.x; e < kGenericTileRows * kGenericWords; e += kThreads) {
        const int r = e / kGenericWords, c = e % kGenericWords;
        const int row = tile_row0 + r;
        w_tile[r][c] = row < row_end && w0 + c < n_words ? p.wq[int64_t(row) * p.wq_stride + w0 + c] : 0u;
      }
      for (int e = threadIdx.x; e < topk::kMaxRows * kGenericWords * 8; e += kThreads) {
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
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = tile_row0 + ty * 4 + i, m = tx * 4 + j;
        if (row < row_end && m < p.rows)
          topk.offer(m, add_bias(p.act_scale[m] * out[i][j], p.bias, row), row);
      }
    topk.end_tile(kGenericTileRows, tile == n_tiles - 1);
  }
}

// ---- host -------------------------------------------------------------------

// NEXTTOK_CUDA_LM_HEAD_PATH pins a kernel (lm_head_path_forced), for timing and
// checking the kernels on one input in one process:
bool force_generic() { return lm_head_path_forced("generic"); }
// the pass kernels for every call;
bool force_wide() { return lm_head_path_forced("wide"); }
// the stream decode kernel (expanded signs instead of bit planes) for calls of
// up to 8 rows, binary_mma_kernel for larger ones;
bool force_expanded() { return lm_head_path_forced("expanded"); }
// the bit-plane kernel's stages by cp.async pieces instead of bulk copies;
bool force_pieces() { return lm_head_path_forced("pieces"); }
// binary_mma_kernel where sm_90 takes the warpgroup-MMA kernel;
bool force_sync_mma() { return lm_head_path_forced("sync-mma"); }
// the warpgroup-MMA kernel fed by bulk tensor copies for every pass of any
// call (it is the default for calls of more than 2 rows where it fits);
bool force_pass_bulk_copies() { return lm_head_path_forced("pass-bulk-copies"); }
// the default before the bulk-fed kernel: calls of 3 to 8 rows on the stream
// decode kernel, the passes of larger ones on the cp.async-fed warpgroup kernel.
bool force_pass_async_copies() { return lm_head_path_forced("pass-async-copies"); }
// NEXTTOK_CUDA_LM_HEAD_GROUPS=one: the bulk-fed kernel's passes of 64 rows
// at G = 128 take one group at a time instead of its MMAs in two halves
// (binary_wgmma_bulk_kernel's kHalves; read on every call).
bool lm_head_one_group() {
  const char* v = std::getenv("NEXTTOK_CUDA_LM_HEAD_GROUPS");
  return v != nullptr && std::strcmp(v, "one") == 0;
}
// Passes of up to this many token rows take the bit-plane kernel: at W1 (run
// 20, bit planes inside the tile-barrier kernel) 141 / 159 us at M = 1 / 2
// against 174 / 180 for expanded signs, but 205 / 310 against 190 / 211 at
// M = 4 / 8 (one MMA per token row and group against one per 8 rows).
constexpr int64_t kPlaneRowsMeasuredFaster = kRowsMaxTokenRows;

// Warps and stages per warp of the bit-plane kernel (warps 0: it does not
// fit). Warps before stages: at W1 M = 1 (run 26) 8 warps x 2 stages took
// 100.9 us, 6 x 3 108.0 us, 4 x 4 127.0 us (the warps' own latency, not the
// bytes in flight, bounds it).
struct RowsConfig {
  int warps = 0, stages = 0;
};
constexpr int kRowsMinWarps = 4;
RowsConfig rows_config(int64_t cols, int group, int64_t rows, const DeviceLimits& dev, bool tensor_copies) {
  const RowsLayout L = rows_layout(int(cols), group, int(rows), tensor_copies);
  const int budget = dev.max_smem_optin - int(sizeof(RowsShared)) - 1024;
  // NEXTTOK_CUDA_LM_HEAD_ROWS=<warps>x<stages> (a measuring switch, read on
  // every call): that configuration where it fits, so a benchmark times the
  // trade of warps against bytes in flight in one process.
  if (const char* v = std::getenv("NEXTTOK_CUDA_LM_HEAD_ROWS"); v != nullptr) {
    int warps = 0, stages = 0;
    if (std::sscanf(v, "%dx%d", &warps, &stages) == 2 && warps >= kRowsMinWarps && warps <= kRowsWarps &&
        stages >= 2 && stages <= kRowsMaxStages && rows_smem_bytes(L, warps, stages) <= budget)
      return {warps, stages};
  }
  for (int warps : {kRowsWarps, 6, kRowsMinWarps})
    for (int stages = kRowsMaxStages; stages >= 2; --stages)
      if (rows_smem_bytes(L, warps, stages) <= budget) return {warps, stages};
  return {};
}

// The bit-plane kernel's per-warp candidate lists: `stride` entries each in
// the workspace, cut back to k when they could not take the next tile at
// `cap` entries.
struct WarpListPlan {
  int stride = 0, cap = 0;
  size_t offset = 0, end = 0;
};

// A warp list's length: every row the warp scores where that is at most
// max(4k + 32, 512) entries, so a list is cut only when a warp's rows exceed
// both (the W1 shapes' never do: at k = 50 a warp scores ~240 of V = 248,320).
// Run 69 (W1, k = 50): lists of 1.5k + 32 (about three cuts a warp) 78.0 us
// at M = 1 and 109.3 at M = 2; 4k + 32 (about one) 73.7 and 95.0; these
// whole lists (none) 72.3 and 95.9 in run 70. A cut is a warp's radix select
// chained after its tile (~3 us each, run 66). The
// measuring switch NEXTTOK_CUDA_LM_HEAD_ROWS_CAP=<a> (1 to 4, read on every
// call) caps the lists at a k + 32 inside that length.
constexpr int64_t kRowsListMin = 512;

int64_t rows_list_cap(int64_t k, int64_t length) {
  if (const char* v = std::getenv("NEXTTOK_CUDA_LM_HEAD_ROWS_CAP"); v != nullptr) {
    const int a = std::atoi(v);
    if (a >= 1 && a <= 4) return std::min<int64_t>(length, a * k + 2 * kRowsTile);
  }
  return length;
}

struct Plan {
  TopkPlan topk;
  ActLayout act;
  WarpListPlan lists;
};

Plan plan_for(const nt_lm_head_binary_args& a, const DeviceLimits& dev) {
  Plan p;
  const int64_t rows = a.act_q.shape[0];
  p.topk = make_topk_plan(a.wq.shape[0], rows, a.k, dev.sm_count, 0);
  p.act = act_layout(a.act_q.shape[1], a.group_size, p.topk.end);
  p.lists.offset = p.lists.end = p.act.end;
  if (rows <= kPlaneRowsMeasuredFaster) {
    // A warp takes every W-th 16-row tile of its CTA's range; its list is cut
    // when it could not take the next tile, so the cap bounds it by
    // min(the warp's rows, a multiple of k or 512) whatever V is. Sized for the
    // fewest warps a launch takes, so it holds whichever copies fill the stages.
    const int tiles = (p.topk.rows_per_cta / kRowsTile + kRowsMinWarps - 1) / kRowsMinWarps;
    const int64_t rows_per_warp = int64_t(tiles) * kRowsTile;
    p.lists.stride = int(std::min<int64_t>(rows_per_warp,
                                           std::max<int64_t>(4 * int64_t(a.k) + 2 * kRowsTile, kRowsListMin)));
    p.lists.cap = int(rows_list_cap(a.k, p.lists.stride));
    p.lists.offset = align_up(p.act.end, 256);
    p.lists.end = p.lists.offset + size_t(p.topk.grid) * kRowsWarps * size_t(rows) * size_t(p.lists.stride) *
                                       sizeof(topk::Candidate);
  }
  return p;
}

template <int NT, bool kWide>
void launch_mma(const BinaryParams& p, int grid, int smem_limit, int device, cudaStream_t stream) {
  auto kernel = binary_mma_kernel<NT, kWide>;
  allow_dynamic_smem(kernel, smem_limit, device, kOp);
  kernel<<<grid, kThreads, p.stages * stage_layout(p.group, p.rows).bytes, stream>>>(p);
}

// n-tiles of 8 token rows a pass kernel is instantiated for: 1, 2, 4 or 8.
int pass_n_tiles(int rows) { return rows <= 8 ? 1 : rows <= 16 ? 2 : rows <= 32 ? 4 : 8; }

// f(std::integral_constant<int, NT>) for the pass's NT.
template <class F>
decltype(auto) with_n_tiles(int rows, F&& f) {
  switch (pass_n_tiles(rows)) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

void launch_mma_rows(const BinaryParams& p, int grid, int smem_limit, int device,
                     cudaStream_t stream) {
  with_n_tiles(p.rows, [&](auto nt) {
    constexpr int NT = decltype(nt)::value;
    if (p.group >= 128)
      launch_mma<NT, true>(p, grid, smem_limit, device, stream);
    else
      launch_mma<NT, false>(p, grid, smem_limit, device, stream);
  });
}

// Whether passes take the warpgroup-MMA kernel: its sm_90a code is in the
// build (NEXTTOK_CUDA_SM90A, CMakeLists.txt) and loaded on this device, and
// G = 128 or 256, and no pin says otherwise.
bool wgmma_usable(const nt_lm_head_binary_args& a, const DeviceLimits& dev, int device) {
#if defined(NEXTTOK_CUDA_SM90A)
  return dev.cc_major == 9 && (a.group_size == 128 || a.group_size == 256) && !force_generic() &&
         !force_expanded() && !force_sync_mma() &&
         kernel_has_sm90_code(reinterpret_cast<const void*>(binary_wgmma_kernel<1, 4>), device);
#else
  (void)a, (void)dev, (void)device;
  return false;
#endif
}

// Stages of the warpgroup-MMA kernel for a pass of `rows`, 1024 bytes of the
// budget kept for its stage alignment.
int wgmma_stages(int group, int rows, int smem_budget) {
  return std::min(kMaxStages, (smem_budget - 1024) / k_order_stage_layout(group, pass_n_tiles(rows)).bytes);
}

template <int NT, int kSteps>
void launch_wgmma(const BinaryParams& p, int grid, int smem_limit, int device, cudaStream_t stream) {
  auto kernel = binary_wgmma_kernel<NT, kSteps>;
  allow_dynamic_smem(kernel, smem_limit, device, kOp);
  kernel<<<grid, kWgmmaThreads, p.stages * k_order_stage_layout(p.group, NT).bytes + 1024, stream>>>(p);
}

// Row strides, in bytes, of the sign and scale matrices for tensor maps: a
// single row gets its own length (the driver wants a stride even where no
// second row exists).
uint64_t sign_map_stride(const nt_lm_head_binary_args& a) {
  return a.wq.shape[0] > 1 ? uint64_t(a.wq.row_stride) * 4 : align_up(size_t(a.act_q.shape[1] / 8), 16);
}
uint64_t scale_map_stride(const nt_lm_head_binary_args& a) {
  return a.wscale.shape[0] > 1 ? uint64_t(a.wscale.row_stride) * 2
                               : align_up(size_t(2 * (a.act_q.shape[1] / a.group_size)), 16);
}

// Whether a call's shape suits the bulk-copy warpgroup kernel: whole 512-column
// chunks, sign and scale rows at 16-byte aligned strides, scale rows a multiple
// of 16 bytes and at most 256 halves (one box).
bool bulk_pass_shape(const nt_lm_head_binary_args& a) {
  const int64_t cols = a.act_q.shape[1], groups = cols / a.group_size;
  return cols % kChunkCols == 0 && (2 * groups) % 16 == 0 && groups <= 256 && row_alignment(a.wq) % 16 == 0 &&
         row_alignment(a.wscale) % 16 == 0;
}

// Stages of the bulk-copy warpgroup kernel at NT n-tiles (its static shared
// memory: the top-k state and the mbarriers; 1024 bytes of the budget for
// the stage alignment); below 2 it cannot run.
int bulk_smem_budget(const DeviceLimits& dev) {
  return dev.max_smem_optin - int(sizeof(BulkTopkShared)) - (2 * kMaxStages + 4) * 8;
}
int bulk_dynamic_bytes(const BulkLayout& B, int stages) { return stages * B.stage_bytes + 2 * B.scale_bytes + 1024; }
int bulk_stages(int cols, int group, int nt, const DeviceLimits& dev) {
  const BulkLayout B = bulk_layout(cols, group, nt);
  return std::min(kMaxStages, (bulk_smem_budget(dev) - bulk_dynamic_bytes(B, 0)) / B.stage_bytes);
}

// The warpgroup-MMA kernel fed by bulk tensor copies, for shapes it takes
// (whole chunks, 16-byte aligned sign and scale rows, scale rows a multiple
// of 16 bytes and at most 256 halves) in the shared memory it has, with tensor
// maps the driver accepts; false otherwise, and the cp.async kernel runs.
// Pinned (force_pass_bulk_copies) it fails instead where a shape it takes
// still cannot run, so a test of the pin tests this kernel.
// H200, W1 (run 41, before two groups in flight): M=16 188.4 us against 237.7
// for the cp.async kernel, M=64 370.6 against 448.9.
template <int NT, int kSteps>
bool launch_wgmma_bulk(const nt_lm_head_binary_args& a, const BinaryParams& p, int grid, const DeviceLimits& dev,
                       int device, cudaStream_t stream) {
  const int64_t vocab = a.wq.shape[0], groups = p.cols / p.group;
  if (!bulk_pass_shape(a)) return false;
  const BulkLayout B = bulk_layout(p.cols, p.group, NT);
  const int stages = bulk_stages(p.cols, p.group, NT, dev);
  const bool pinned = force_pass_bulk_copies();
  if (stages < 2) {
    if (!pinned) return false;
    fail(NT_ERROR_UNSUPPORTED, std::string(kOp) + ": NEXTTOK_CUDA_LM_HEAD_PATH=pass-bulk-copies: " +
                                   std::to_string(bulk_dynamic_bytes(B, 2)) +
                                   " bytes of shared memory needed for this call");
  }
  BinaryBulkParams bp{};
  bp.b = p;
  bp.b.stages = stages;
  if (!encode_map_u16(&bp.sign_map, a.wq.data, uint64_t(vocab), uint64_t(p.cols / 16), sign_map_stride(a),
                      kBulkBoxRows, kChunkCols / 16, CU_TENSOR_MAP_SWIZZLE_64B, true) ||
      !encode_map_u16(&bp.scale_map, a.wscale.data, uint64_t(vocab), uint64_t(groups), scale_map_stride(a),
                      kBulkBoxRows, uint32_t(groups), CU_TENSOR_MAP_SWIZZLE_NONE, false) ||
      !encode_map_u16(&bp.act_map, p.act_perm, uint64_t(p.rows), uint64_t(p.padded_cols / 2), uint64_t(p.padded_cols),
                      uint32_t(8 * NT), 64, CU_TENSOR_MAP_SWIZZLE_128B, false)) {
    if (!pinned) return false;
    fail(NT_ERROR_BACKEND, std::string(kOp) + ": the CUDA driver refused a tensor map");
  }
  auto launch = [&](auto kernel) {
    allow_dynamic_smem(kernel, bulk_smem_budget(dev), device, kOp);
    kernel<<<grid, kBulkThreads, bulk_dynamic_bytes(B, stages), stream>>>(bp);
  };
  if constexpr (NT == 8 && kSteps == 4) {
    if (!lm_head_one_group()) {
      launch(binary_wgmma_bulk_kernel<NT, kSteps, true>);
      return true;
    }
  }
  launch(binary_wgmma_bulk_kernel<NT, kSteps>);
  return true;
}

bool launch_wgmma_bulk_pass(const nt_lm_head_binary_args& a, const BinaryParams& p, int grid,
                            const DeviceLimits& dev, int device, cudaStream_t stream) {
  return with_n_tiles(p.rows, [&](auto nt) {
    constexpr int NT = decltype(nt)::value;
    return p.group == 128 ? launch_wgmma_bulk<NT, 4>(a, p, grid, dev, device, stream)
                          : launch_wgmma_bulk<NT, 8>(a, p, grid, dev, device, stream);
  });
}

void launch_wgmma_pass(const BinaryParams& p, int grid, int smem_limit, int device, cudaStream_t stream) {
  with_n_tiles(p.rows, [&](auto nt) {
    constexpr int NT = decltype(nt)::value;
    if (p.group == 128)
      launch_wgmma<NT, 4>(p, grid, smem_limit, device, stream);
    else
      launch_wgmma<NT, 8>(p, grid, smem_limit, device, stream);
  });
}

BinaryOperands binary_operands(const nt_lm_head_binary_args& a) {
  BinaryOperands o{};
  o.wq = static_cast<const uint32_t*>(a.wq.data);
  o.wq_stride = a.wq.shape[0] > 1 ? a.wq.row_stride : 0;
  o.wscale = static_cast<const uint16_t*>(a.wscale.data);
  o.wscale_stride = a.wscale.shape[0] > 1 ? a.wscale.row_stride : 0;
  o.act_q = static_cast<const int8_t*>(a.act_q.data);
  o.act_stride = a.act_q.shape[0] > 1 ? a.act_q.row_stride : 0;
  o.act_scale = static_cast<const float*>(a.act_scale.data);
  o.cols = static_cast<int>(a.act_q.shape[1]);
  o.vocab = static_cast<int>(a.wq.shape[0]);
  o.rows = static_cast<int>(a.act_q.shape[0]);
  o.group = a.group_size;
  return o;
}

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

// Whether the bit-plane kernel may fill its stages by bulk tensor copies:
// sm_90 code for the kernel, scale rows at 16-byte aligned strides (sign rows
// are, for any call try_rows takes), a multiple of 16 bytes and at most 256
// halves (one box), and no pieces pin.
bool rows_tensor_copies(const nt_lm_head_binary_args& a, const DeviceLimits& dev, int device) {
  const int64_t groups = a.act_q.shape[1] / a.group_size;
  return dev.cc_major >= 9 && !force_pieces() && (2 * groups) % 16 == 0 && groups <= 256 &&
         row_alignment(a.wscale) % 16 == 0 &&
         kernel_has_sm90_code(reinterpret_cast<const void*>(binary_rows_kernel<4, 1>), device);
}

// The tensor maps of the bit-plane kernel's bulk copies; false when the
// driver refuses one (the kernel then takes cp.async pieces). The shapes that
// take bulk copies have whole 1,024-column boxes (rows_tensor_copies: 16-byte
// scale rows), so a tile's signs come in one copy of the 3-D map.
bool rows_tensor_maps(const nt_lm_head_binary_args& a, BinaryRowsParams& p) {
  const int64_t vocab = a.wq.shape[0], cols = a.act_q.shape[1], groups = cols / a.group_size;
  return cols % 1024 == 0 &&
         encode_map_u16_lines(&p.sign_map, a.wq.data, uint64_t(vocab), uint64_t(cols / 16), sign_map_stride(a),
                              kRowsTile, uint32_t(cols / 1024)) &&
         encode_map_u16(&p.scale_map, a.wscale.data, uint64_t(vocab), uint64_t(groups), scale_map_stride(a),
                        kRowsTile, uint32_t(groups), CU_TENSOR_MAP_SWIZZLE_NONE, false);
}

// The bit-plane kernel when its conditions hold (see lm_head_binary_rows.cuh);
// returns false to leave the call to the other kernels.
bool try_rows(const nt_lm_head_binary_args& a, const Plan& plan, const DeviceLimits& dev,
              const topk::CandidateArgs& cand, topk::Candidate* warp_cand, const BiasArgs& bias,
              int device, cudaStream_t stream) {
  const int64_t rows = a.act_q.shape[0];
  const int cols = static_cast<int>(a.act_q.shape[1]);
  const int scale_copy = scale_copy_bytes(a);
  if (force_generic() || force_wide() || force_expanded() || force_pass_bulk_copies() || dev.cc_major < 8 ||
      rows > kPlaneRowsMeasuredFaster || (a.group_size != 128 && a.group_size != 256) ||
      row_alignment(a.wq) < 16 || scale_copy == 0)
    return false;
  BinaryRowsParams p{};
  static_cast<BinaryOperands&>(p) = binary_operands(a);
  const bool tensor_copies = rows_tensor_copies(a, dev, device) && rows_tensor_maps(a, p);
  const RowsLayout L = rows_layout(cols, a.group_size, int(rows), tensor_copies);
  const RowsConfig rc = rows_config(cols, a.group_size, rows, dev, tensor_copies);
  if (rc.warps == 0) return false;
  const int budget = dev.max_smem_optin - int(sizeof(RowsShared)) - 1024;

  p.rows_per_cta = plan.topk.rows_per_cta;
  p.scale_copy = scale_copy;
  p.stages = rc.stages;
  p.tensor_copies = tensor_copies ? 1 : 0;
  p.bias = bias;
  p.cand = cand;
  p.warp_cand = warp_cand;
  p.warp_stride = plan.lists.stride;
  p.warp_cap = plan.lists.cap;
  const bool wide_groups = a.group_size == 256;
  auto kernel = rows == 1 ? (wide_groups ? binary_rows_kernel<8, 1> : binary_rows_kernel<4, 1>)
                          : (wide_groups ? binary_rows_kernel<8, 2> : binary_rows_kernel<4, 2>);
  // Raised once per device to the whole budget (a call's size depends on H).
  allow_dynamic_smem(kernel, budget, device, kOp);
  kernel<<<plan.topk.grid, 32 * rc.warps, rows_smem_bytes(L, rc.warps, rc.stages), stream>>>(p);
  check_launch(kOp);
  return true;
}

// The decode kernel when its conditions hold (see lm_head_binary_stream.cuh);
// returns false to leave the call to the other kernels.
// Measured on the H200 at W1 (V=248,320, H=5,120; bench/results/2026-12-01-h200-run4
// and run6): M=1 191-200 us (174 since run 19) vs 332 us for the wide kernel, M=4 215 vs 349, but
// M=16 (two n-tiles) 533 vs 384, so only passes of up to 8 rows take it (and
// since run 24 only those of 3 to 8 rows, as try_rows takes 1 and 2).
constexpr int64_t kStreamRowsMeasuredFaster = 8;
bool try_stream(const nt_lm_head_binary_args& a, const Plan& plan, const DeviceLimits& dev,
                const topk::CandidateArgs& cand, const BiasArgs& bias, int device,
                cudaStream_t stream) {
  const int64_t rows = a.act_q.shape[0];
  const int cols = static_cast<int>(a.act_q.shape[1]);
  const int64_t scale_row_bytes = 2 * (cols / a.group_size);
  const int scale_copy = scale_copy_bytes(a);
  if (force_generic() || force_wide() || force_sync_mma() || force_pass_bulk_copies() || dev.cc_major < 8 ||
      rows > kStreamRowsMeasuredFaster ||
      (a.group_size != 128 && a.group_size != 256) || row_alignment(a.wq) < 16 || scale_copy == 0)
    return false;
  // Each thread's share of a stage fits its fixed copy plan, whose offsets
  // within a tile are 32-bit.
  const int64_t wq_stride_bytes = a.wq.shape[0] > 1 ? 4 * a.wq.row_stride : 0;
  const int64_t scale_stride_bytes = a.wscale.shape[0] > 1 ? 2 * a.wscale.row_stride : 0;
  if (kStreamTileRows * (cols / 128) > kStreamSignCopies * kStreamThreads ||
      kStreamTileRows * (scale_row_bytes / scale_copy) > kStreamScaleCopies * kStreamThreads ||
      std::max(wq_stride_bytes, scale_stride_bytes) * kStreamTileRows >= (int64_t(1) << 31))
    return false;
  const StreamLayout L = stream_layout(cols, a.group_size, 1);
  const int budget = dev.max_smem_optin - int(sizeof(topk::CtaShared<kStreamWarps>)) - 1024;
  const int stages = std::min(kStreamMaxStages, (budget - L.fixed_bytes) / L.stage_bytes);
  if (stages < 3) return false;

  BinaryStreamParams p{};
  static_cast<BinaryOperands&>(p) = binary_operands(a);
  p.rows_per_cta = plan.topk.rows_per_cta;
  p.scale_copy = scale_copy;
  p.stages = stages;
  p.bias = bias;
  p.cand = cand;
  const int smem = L.fixed_bytes + stages * L.stage_bytes;
  auto kernel = a.group_size == 128 ? binary_stream_kernel<1, 4> : binary_stream_kernel<1, 8>;
  // Raised once per device to the whole budget (a call's size depends on H).
  allow_dynamic_smem(kernel, budget, device, kOp);
  kernel<<<plan.topk.grid, kStreamThreads, smem, stream>>>(p);
  check_launch(kOp);
  return true;
}

}  // namespace
}  // namespace lm_head

size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a) {
  using namespace lm_head;
  if (a.act_q.shape[0] == 0) return 0;
  DeviceScope scope(a.wq.device_id, kOp);
  return plan_for(a, device_limits(a.wq.device_id, kOp)).lists.end + kWorkspaceSlack;
}

void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace,
                         size_t workspace_bytes, cudaStream_t stream) {
  using namespace lm_head;
  (void)workspace_bytes;  // checked against the size query by the dispatcher
  const int64_t rows_total = a.act_q.shape[0];
  if (rows_total == 0) return;
  for (const auto& [name, t] : {std::pair<const char*, const nt_tensor&>{"act_scale", a.act_scale},
                                {"wq", a.wq},
                                {"wscale", a.wscale},
                                {"bias", a.bias},
                                {"values", a.values},
                                {"indices", a.indices}})
    require_natural_alignment(kOp, name, t);

  const int device = a.wq.device_id;
  DeviceScope scope(device, kOp);
  const DeviceLimits dev = device_limits(device, kOp);
  const Plan plan = plan_for(a, dev);
  char* ws = aligned_workspace(workspace);
  const BiasArgs bias{a.bias.data, a.bias.dtype};
  const topk::CandidateArgs cand{reinterpret_cast<topk::Candidate*>(ws + plan.topk.cand_offset),
                                 reinterpret_cast<int32_t*>(ws + plan.topk.counts_offset),
                                 plan.topk.mp_stride, plan.topk.cap, a.k};
  const int cols = static_cast<int>(a.act_q.shape[1]);
  const int vocab = static_cast<int>(a.wq.shape[0]);
  const int64_t wq_stride = vocab > 1 ? a.wq.row_stride : 0;
  const int64_t wscale_stride = vocab > 1 ? a.wscale.row_stride : 0;
  const int64_t wq_align = row_alignment(a.wq);
  // Each stage needs its sign, scale, activation and seed slices; leave room
  // for the static shared memory of the top-k.
  const int smem_budget = dev.max_smem_optin - int(sizeof(topk::CtaShared<kWarps>)) - 1024;
  // Token rows per tensor-core pass: as many as leave room for 3 stages.
  int pass_rows = kPassRows;
  while (pass_rows > 8 && smem_budget < 3 * stage_layout(a.group_size, pass_rows).bytes)
    pass_rows -= 8;
  const bool mma = !force_generic() && dev.cc_major >= 8 && wq_align >= 4 &&
                   row_alignment(a.wscale) >= 4 &&
                   smem_budget >= 2 * stage_layout(a.group_size, pass_rows).bytes;
  if (!mma) pass_rows = kPassRows;
  // The warpgroup-MMA kernels take the passes of calls of more than 2 rows
  // (and, pinned by NEXTTOK_CUDA_LM_HEAD_PATH=wide or pass-bulk-copies, of
  // any number), fed by bulk copies where launch_wgmma_bulk takes the shape.
  const int wgmma_budget = dev.max_smem_optin - int(sizeof(topk::CtaShared<kWgmmaWarps>)) - 1024;
  const bool wgmma = mma && wgmma_usable(a, dev, device) && wgmma_stages(a.group_size, kPassRows, wgmma_budget) >= 2;
  if (wgmma) pass_rows = kPassRows;
  const topk::MergeBudget merges = topk::merge_budget(
      dev.max_smem_optin, [&](auto kernel, int bytes) { allow_dynamic_smem(kernel, bytes, device, kOp); });
  // Calls of 3 to 8 rows take the bulk-fed warpgroup kernel where it takes
  // the shape (W1 M=4 131.3 us against 169.0 for the stream decode kernel,
  // run 42), else the stream decode kernel (167.5 us against 207.8 for the
  // cp.async-fed warpgroup kernel, run 40); calls of 1 or 2 the bit planes.
  // (A tensor map the driver refuses would still send such a call to the
  // cp.async-fed kernel: correct, slower.)
  const bool few_rows_on_passes = wgmma && !force_pass_async_copies() && bulk_pass_shape(a) &&
                                  bulk_stages(cols, a.group_size, 1, dev) >= 2;
  if (try_rows(a, plan, dev, cand, reinterpret_cast<topk::Candidate*>(ws + plan.lists.offset), bias,
               device, stream) ||
      (!few_rows_on_passes && try_stream(a, plan, dev, cand, bias, device, stream))) {
    topk::launch_merge(cand, plan.topk.grid, static_cast<float*>(a.values.data),
                       a.values.row_stride, static_cast<int64_t*>(a.indices.data),
                       a.indices.row_stride, 0, static_cast<int>(rows_total), merges, stream);
    check_launch(kOp);
    return;
  }

  for (int64_t m0 = 0; m0 < rows_total; m0 += pass_rows) {
    const int rows = static_cast<int>(std::min<int64_t>(pass_rows, rows_total - m0));
    const int8_t* act_q = static_cast<const int8_t*>(a.act_q.data) + m0 * a.act_q.row_stride;
    const int64_t act_stride = rows > 1 ? a.act_q.row_stride : 0;
    const float* act_scale = static_cast<const float*>(a.act_scale.data) + m0;
    if (mma) {
      PrepParams prep{};
      prep.act_q = act_q;
      prep.act_stride = act_stride;
      prep.cols = cols;
      prep.group = a.group_size;
      prep.rows = rows;
      prep.act_perm = reinterpret_cast<int8_t*>(ws + plan.act.act_offset);
      prep.padded_cols = plan.act.padded_cols;
      // The warpgroup kernels add kMagicBits when they scale: no seeds.
      prep.seed = wgmma ? nullptr : reinterpret_cast<int32_t*>(ws + plan.act.seed_offset);
      prep.k_order = wgmma ? 1 : 0;
      binary_prep_kernel<<<dim3(unsigned((cols + kPrepCols - 1) / kPrepCols), unsigned(rows)), 256, 0, stream>>>(prep);
      check_launch(kOp);

      BinaryParams p{};
      p.wq = static_cast<const uint32_t*>(a.wq.data);
      p.wq_stride = wq_stride;
      p.wscale = static_cast<const uint16_t*>(a.wscale.data);
      p.wscale_stride = wscale_stride;
      p.act_perm = prep.act_perm;
      p.padded_cols = plan.act.padded_cols;
      p.seed = prep.seed;
      p.act_scale = act_scale;
      p.cols = cols;
      p.vocab = vocab;
      p.rows = rows;
      p.group = a.group_size;
      p.rows_per_cta = plan.topk.rows_per_cta;
      p.wq_copy = static_cast<int>(std::min<int64_t>(16, wq_align));
      p.sign_flip = 0xC0C0C0C0u;
      p.stages = wgmma ? wgmma_stages(p.group, rows, wgmma_budget)
                       : std::min(kMaxStages, smem_budget / stage_layout(p.group, rows).bytes);
      p.bias = bias;
      p.cand = cand;
      if (!wgmma) {
        launch_mma_rows(p, plan.topk.grid, smem_budget, device, stream);
      } else if (force_pass_async_copies() || !launch_wgmma_bulk_pass(a, p, plan.topk.grid, dev, device, stream)) {
        launch_wgmma_pass(p, plan.topk.grid, wgmma_budget, device, stream);
      }
    } else {
      GenericParams p{};
      p.wq = static_cast<const uint32_t*>(a.wq.data);
      p.wq_stride = wq_stride;
      p.wscale = static_cast<const uint16_t*>(a.wscale.data);
      p.wscale_stride = wscale_stride;
      p.act_q = act_q;
      p.act_stride = act_stride;
      p.act_scale = act_scale;
      p.cols = cols;
      p.vocab = vocab;
      p.rows = rows;
      p.group = a.group_size;
      p.rows_per_cta = plan.topk.rows_per_cta;
      p.bias = bias;
      p.cand = cand;
      binary_generic_kernel<<<plan.topk.grid, kThreads, 0, stream>>>(p);
    }
    check_launch(kOp);

    topk::launch_merge(cand, plan.topk.grid, static_cast<float*>(a.values.data),
                       a.values.row_stride, static_cast<int64_t*>(a.indices.data),
                       a.indices.row_stride, m0, rows, merges, stream);
    check_launch(kOp);
  }
}

}  // namespace nt::cuda
