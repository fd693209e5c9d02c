// Dense LM head with exact top-k on CUDA:
//   score[m,v] = sum_h hidden[m,h] * weight[v,h] (fp32 accumulation) + bias[v],
// scored and selected in one pass over the weights; the [M,V] scores live only
// in registers (see cuda/topk_cta.cuh and cuda/topk_merge.cuh for the top-k).
// Token rows go in passes of up to 64, each pass one scoring kernel and the
// merge; instantiated with kScores, the kernels store every score instead
// (lm_head_scores_dense). One kernel per regime (choose() below;
// docs/SEMANTICS.md, "Kernel choice").
//
// dense_mma_kernel: a persistent grid, one CTA per SM, each CTA owning a
// contiguous vocabulary range walked in tiles of 256 rows (8 warps x 32 rows)
// against all token rows of the pass. Weights go straight from memory to the
// MMA A-fragments with 16-byte loads, D blocks of 32 columns in flight per
// thread (no shared-memory round trip). A lane loading columns [8t, 8t+8) of a block
// uses them as two k16 steps; the hidden rows are staged in shared memory
// (cp.async, 3 stages of 256 columns) in the matching permuted order, so a
// lane's B fragment is one 8-byte load. Each block's two MMAs start from zero
// and are added to the fp32 scores with an IEEE add, which bounds the error of
// the tensor cores' truncating accumulation to a 32-column partial sum.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "cuda/lm_head_dense_staged.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/lm_head_host.cuh"
#include "cuda/lm_head_ops.cuh"
#include "cuda/tensor_map.cuh"
#include "cuda/topk_cta.cuh"
#include "cuda/topk_merge.cuh"

namespace nt::cuda {
namespace lm_head {
namespace {

constexpr const char* kOp = "lm_head_topk_dense";

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = kWarps * 32;
constexpr int kChunkCols = 256;                  // hidden columns per stage
constexpr int kBlocksPerChunk = kChunkCols / 32;
constexpr int kStages = 3;
constexpr int kTokenRowBytes = kChunkCols * 2 + 32;  // +32: conflict-free B loads
static_assert(kTileRows <= kMaxTileRows, "candidate buffers are sized for kMaxTileRows");

struct DenseParams : DenseOperands {
  int hidden_copy;  // bytes per cp.async of the hidden rows: 8 or 4
};

// Hidden columns [col0, col0 + 256) of every token row into one stage, in the
// order a lane reads its B fragments: piece (block b, step j, lane t) holds
// columns 32b + 8t + 4j .. +4 at byte 64b + 32j + 8t of the token's row.
__device__ __forceinline__ void stage_hidden(const uint16_t* hidden, int64_t hidden_stride,
                                             int rows, int cols, int copy_bytes,
                                             unsigned char* stage, int col0) {
  const int pieces = rows * (kChunkCols / 4);
  for (int i = threadIdx.x; i < pieces; i += kThreads) {
    const int r = i >> 6, piece = i & 63;
    const int b = piece >> 3, j = (piece >> 2) & 1, t = piece & 3;
    const int col = col0 + 32 * b + 8 * t + 4 * j;
    unsigned char* dst = stage + r * kTokenRowBytes + 64 * b + 32 * j + 8 * t;
    const uint16_t* src = hidden + int64_t(r) * hidden_stride + col;
    const bool valid = col < cols;  // H % 8 == 0: a piece is all in or all out
    if (copy_bytes == 8) {
      cp_async(dst, valid ? src : hidden, 8, valid ? 8 : 0);
    } else {
      cp_async(dst, valid ? src : hidden, 4, valid ? 4 : 0);
      cp_async(dst + 4, valid ? src + 2 : hidden, 4, valid ? 4 : 0);
    }
  }
}

template <bool kBf16, int NT, int D, bool kScores>
__global__ void __launch_bounds__(kThreads, 1) dense_mma_kernel(DenseParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ topk::CtaShared<kWarps> topk_shared;
  topk::SinkOf<kScores, kWarps> topk(topk_shared, p.cand, p.rows);
  constexpr int NG = NT < 4 ? NT : 4;  // n-tiles per partial-sum group
  static_assert(kBlocksPerChunk % D == 0, "a chunk must start at ring slot 0");

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kTileRows - 1) / kTileRows;
  const int n_blocks = (p.cols + 31) / 32;
  const int n_chunks = (p.cols + kChunkCols - 1) / kChunkCols;
  const int total_chunks = n_tiles * n_chunks;
  const int stage_bytes = p.rows * kTokenRowBytes;

  int chunk_issued = 0;
  auto issue_chunk = [&]() {
    if (chunk_issued < total_chunks) {
      const int ch = chunk_issued % n_chunks;
      stage_hidden(static_cast<const uint16_t*>(p.hidden), p.hidden_stride, p.rows, p.cols, p.hidden_copy,
                   smem + (chunk_issued % kStages) * stage_bytes, ch * kChunkCols);
    }
    ++chunk_issued;
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue_chunk();

  // Weight fragments: ring[slot][m-tile][row g / row g+8], 8 columns each.
  // Each tile takes steps_per_tile steps, a multiple of D (the steps past
  // n_blocks do nothing), so that a tile always starts at ring slot 0.
  const int steps_per_tile = (n_blocks + D - 1) / D * D;
  uint4 ring[D][2][2];
  int load_tile = 0, load_block = 0;
  auto load_step = [&](uint4 (&dst)[2][2]) {
    if (load_tile < n_tiles && load_block < n_blocks) {
      const int col = 32 * load_block + 8 * t;
      const int row0 = row_begin + load_tile * kTileRows + warp * 32 + g;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + mt * 16 + h * 8;
          dst[mt][h] = make_uint4(0u, 0u, 0u, 0u);
          if (row < row_end && col < p.cols)
            dst[mt][h] = ldg_stream(static_cast<const uint16_t*>(p.weight) + int64_t(row) * p.weight_stride + col);
        }
    }
    if (++load_block == steps_per_tile) {
      load_block = 0;
      ++load_tile;
    }
  };
#pragma unroll
  for (int d = 0; d < D; ++d) load_step(ring[d]);

  float out[2][NT][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) out[mt][nt][i] = 0.0f;

  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile_row0 = row_begin + tile * kTileRows;
    const bool warp_active = tile_row0 + warp * 32 < row_end;
    for (int b0 = 0; b0 < steps_per_tile; b0 += D) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        const int block = b0 + d;
        if (block < n_blocks) {
          if (d == 0 && block % kBlocksPerChunk == 0) {  // chunks start at slot 0
            cp_async_wait<kStages - 2>();
            __syncthreads();
            issue_chunk();
          }
          if (warp_active) {
            const int chunk_seq = tile * n_chunks + block / kBlocksPerChunk;
            const unsigned char* stage = smem + (chunk_seq % kStages) * stage_bytes +
                                         64 * (block % kBlocksPerChunk) + 8 * t;
#pragma unroll
            for (int ng = 0; ng < NT; ng += NG) {
              float part[2][NG][4];
#pragma unroll
              for (int j = 0; j < 2; ++j) {
                uint2 bf[NG];
#pragma unroll
                for (int n = 0; n < NG; ++n) {
                  const int tok = min((ng + n) * 8 + g, p.rows - 1);
                  bf[n] = *reinterpret_cast<const uint2*>(stage + tok * kTokenRowBytes + 32 * j);
                }
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                  const uint4& lo = ring[d][mt][0];
                  const uint4& hi = ring[d][mt][1];
                  const uint32_t a[4] = {j == 0 ? lo.x : lo.z, j == 0 ? hi.x : hi.z,
                                         j == 0 ? lo.y : lo.w, j == 0 ? hi.y : hi.w};
#pragma unroll
                  for (int n = 0; n < NG; ++n) {
                    if (j == 0) {
                      const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                      mma_16816<kBf16>(part[mt][n], a, bf[n].x, bf[n].y, zero);
                    } else {
                      mma_16816<kBf16>(part[mt][n], a, bf[n].x, bf[n].y, part[mt][n]);
                    }
                  }
                }
              }
#pragma unroll
              for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int n = 0; n < NG; ++n)
#pragma unroll
                  for (int i = 0; i < 4; ++i) out[mt][ng + n][i] += part[mt][n][i];
            }
          }
        }
        load_step(ring[d]);
      }
    }

    if (warp_active) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int row = tile_row0 + warp * 32 + mt * 16 + g + 8 * (i >> 1);
            const int m = nt * 8 + 2 * t + (i & 1);
            if (row < row_end && m < p.rows)
              topk.offer(m, add_bias(out[mt][nt][i], p.bias, row), row);
            out[mt][nt][i] = 0.0f;
          }
    }
    topk.end_tile(kTileRows, tile == n_tiles - 1);
  }
  cp_async_wait<0>();
}

// ---- generic kernel -----------------------------------------------------------

constexpr int kGenericK = 32;

// Each thread's 4 x 4 block of scores accumulated with fmaf in increasing h.
template <nt_dtype kType, bool kScores>
__global__ void __launch_bounds__(kGenericThreads) dense_generic_kernel(DenseOperands p) {
  __shared__ float w_tile[kGenericTileRows][kGenericK + 1];
  __shared__ float x_tile[topk::kMaxRows][kGenericK + 1];
  auto score = [&](int tile_row0, int row_end, int ty, int tx, float (&acc)[4][4]) {
    for (int k0 = 0; k0 < p.cols; k0 += kGenericK) {
      for (int e = threadIdx.x; e < kGenericTileRows * kGenericK; e += kGenericThreads) {
        const int r = e / kGenericK, c = e % kGenericK;
        const int row = tile_row0 + r, col = k0 + c;
        w_tile[r][c] = row < row_end && col < p.cols
                           ? widen(p.weight, kType, int64_t(row) * p.weight_stride + col)
                           : 0.0f;
        x_tile[r][c] = r < p.rows && col < p.cols
                           ? widen(p.hidden, kType, int64_t(r) * p.hidden_stride + col)
                           : 0.0f;
      }
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kGenericK; ++kk) {
        float w[4], x[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          w[i] = w_tile[ty * 4 + i][kk];
          x[i] = x_tile[tx * 4 + i][kk];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(w[i], x[j], acc[i][j]);
      }
      __syncthreads();
    }
  };
  generic_tiles<kScores>(p, score,
                         [&](float acc, int, int row) { return add_bias(acc, p.bias, row); });
}

// ---- host -------------------------------------------------------------------

enum class DenseKernel { kStaged, kMma, kGeneric };

// Token rows one dense_mma_kernel pass can stage in shared memory on this device.
int mma_pass_rows(const DeviceLimits& dev) {
  const int budget = dev.max_smem_optin - int(sizeof(topk::CtaShared<kWarps>)) - 1024;
  return std::min(kPassRows, budget / (kStages * kTokenRowBytes));
}

// Static shared memory of a staged kernel (top-k state and barriers).
constexpr int kStagedStaticSmem = int(sizeof(StagedTopkShared)) + 2 * kStagedMaxStages * 8;

// Dynamic shared memory of a staged kernel of `n_tiles` n-tiles: its stages
// and the 1024-byte alignment slack.
int staged_dynamic_bytes(int stages, int n_tiles) { return stages * staged_stage_bytes(n_tiles) + 1024; }

// Stages of a staged pass of `rows`: as many as fit beside the static shared
// memory and the rest of the dynamic.
int staged_stages(const DeviceLimits& dev, int rows) {
  const int tiles = pass_n_tiles(rows);
  const int fixed = kStagedStaticSmem + staged_dynamic_bytes(0, tiles);
  return std::min(kStagedMaxStages, (dev.max_smem_optin - fixed) / staged_stage_bytes(tiles));
}

DenseKernel choose(const nt_lm_head_dense_args& a, const DeviceLimits& dev) {
  const int64_t hidden_align = row_alignment(a.hidden);
  const bool mma = dev.cc_major >= 8 && a.weight.dtype != NT_F32 && a.weight.shape[1] % 8 == 0 &&
                   row_alignment(a.weight) >= 16 && hidden_align >= 4 && mma_pass_rows(dev) >= 8;
  if (!mma) return DenseKernel::kGeneric;
  // The staged kernel's code must be sm_90 code (older PTX has no bulk copies).
  const bool staged =
      dev.cc_major >= 9 && hidden_align >= 16 && staged_stages(dev, kPassRows) >= 2 &&
      kernel_has_sm90_code(reinterpret_cast<const void*>(dense_staged_kernel<true, 1, false>), a.weight.device_id) &&
      tensor_map_encoder() != nullptr;
  return staged ? DenseKernel::kStaged : DenseKernel::kMma;
}

struct Pass : DenseOperands {
  int grid;
  const char* op;  // the call's, for its errors
};

// A staged pass: its tensor maps and as many stages as fit.
template <bool kBf16, int NT, bool kScores>
void launch_staged(const nt_lm_head_dense_args& a, const Pass& pass, const DeviceLimits& dev, cudaStream_t stream) {
  StagedParams p{};
  const size_t row_bytes = size_t(pass.cols) * 2;
  const uint64_t w_row = map_row_bytes(pass.vocab, a.weight.row_stride, 2, row_bytes);
  const uint64_t h_row = map_row_bytes(pass.rows, a.hidden.row_stride, 2, row_bytes);
  encode_map_u16(pass.op, &p.weight_map, pass.weight, uint64_t(pass.vocab), uint64_t(pass.cols), w_row,
                 kStagedBoxRows, kStagedChunkCols, CU_TENSOR_MAP_SWIZZLE_128B, true);
  encode_map_u16(pass.op, &p.hidden_map, pass.hidden, uint64_t(pass.rows), uint64_t(pass.cols), h_row,
                 uint32_t(NT * 8), kStagedChunkCols, CU_TENSOR_MAP_SWIZZLE_128B, false);
  static_cast<DenseOperands&>(p) = pass;
  p.stages = staged_stages(dev, pass.rows);
  auto kernel = dense_staged_kernel<kBf16, NT, kScores>;
  allow_dynamic_smem(kernel, dev.max_smem_optin - kStagedStaticSmem, a.weight.device_id, pass.op);
  kernel<<<pass.grid, kStagedThreads, staged_dynamic_bytes(p.stages, NT), stream>>>(p);
}

// D, the weight fragments in flight per thread, falls as the n-tiles' scores
// take the registers.
template <bool kBf16, int NT, bool kScores>
void launch_mma(const nt_lm_head_dense_args& a, const Pass& pass, const DeviceLimits& dev, cudaStream_t stream) {
  constexpr int D = NT <= 2 ? 8 : NT == 4 ? 4 : 2;
  DenseParams p{};
  static_cast<DenseOperands&>(p) = pass;
  p.hidden_copy = row_alignment(a.hidden) >= 8 ? 8 : 4;
  auto kernel = dense_mma_kernel<kBf16, NT, D, kScores>;
  const int most = kStages * kPassRows * kTokenRowBytes;
  allow_dynamic_smem(kernel, std::min(most, dev.max_smem_optin - int(sizeof(topk::CtaShared<kWarps>))),
                     a.weight.device_id, pass.op);
  kernel<<<pass.grid, kThreads, kStages * p.rows * kTokenRowBytes, stream>>>(p);
}

// The pass's kernel, instantiated for its dtype and n-tiles, and for its
// output: the top-k candidates, or every score (kScores).
template <bool kScores>
void launch(DenseKernel kernel, const nt_lm_head_dense_args& a, const Pass& pass, const DeviceLimits& dev,
            cudaStream_t stream) {
  const bool bf16 = a.weight.dtype == NT_BF16;
  switch (kernel) {
    case DenseKernel::kStaged:
      return with_n_tiles(pass.rows, [&](auto nt) {
        if (bf16) launch_staged<true, decltype(nt)::value, kScores>(a, pass, dev, stream);
        else launch_staged<false, decltype(nt)::value, kScores>(a, pass, dev, stream);
      });
    case DenseKernel::kMma:
      return with_n_tiles(pass.rows, [&](auto nt) {
        if (bf16) launch_mma<true, decltype(nt)::value, kScores>(a, pass, dev, stream);
        else launch_mma<false, decltype(nt)::value, kScores>(a, pass, dev, stream);
      });
    case DenseKernel::kGeneric: {
      const auto kernel = a.weight.dtype == NT_F32    ? dense_generic_kernel<NT_F32, kScores>
                          : a.weight.dtype == NT_BF16 ? dense_generic_kernel<NT_BF16, kScores>
                                                      : dense_generic_kernel<NT_F16, kScores>;
      return kernel<<<pass.grid, kGenericThreads, 0, stream>>>(pass);
    }
  }
}

TopkPlan plan_for(const nt_lm_head_dense_args& a, const DeviceLimits& dev) {
  return make_topk_plan(a.weight.shape[0], a.hidden.shape[0], a.k, dev.sm_count);
}

// on_head_device with this head's rows, device and operands.
template <class Body>
auto on_device(const char* op, const nt_lm_head_dense_args& a, bool check, Body&& body) {
  return on_head_device(op, a.hidden.shape[0], a.weight.device_id, check,
                        {{"hidden", a.hidden}, {"weight", a.weight}, {"bias", a.bias}, {"values", a.values},
                         {"indices", a.indices}},
                        body);
}

// Rows [0, M) of `a` in passes of one scoring kernel each, the pass's output
// going to `out` (with kScores, its scores from the pass's first row on), and
// after(m0, rows) once each pass is launched; errors name `op`.
template <bool kScores, class After>
void score_passes(const char* op, const nt_lm_head_dense_args& a, const TopkPlan& plan,
                  const topk::CandidateArgs& out, const DeviceLimits& dev, cudaStream_t stream, After&& after) {
  const DenseKernel kernel = choose(a, dev);
  const int pass_rows = kernel == DenseKernel::kMma ? mma_pass_rows(dev) : kPassRows;
  const size_t elt = dtype_size(a.weight.dtype);
  for (int64_t m0 = 0; m0 < a.hidden.shape[0]; m0 += pass_rows) {
    Pass pass{};
    pass.rows = static_cast<int>(std::min<int64_t>(pass_rows, a.hidden.shape[0] - m0));
    pass.weight = a.weight.data;
    pass.weight_stride = a.weight.shape[0] > 1 ? a.weight.row_stride : 0;
    pass.hidden = static_cast<const char*>(a.hidden.data) + m0 * a.hidden.row_stride * elt;
    pass.hidden_stride = pass.rows > 1 ? a.hidden.row_stride : 0;
    pass.cols = static_cast<int>(a.weight.shape[1]);
    pass.vocab = static_cast<int>(a.weight.shape[0]);
    pass.rows_per_cta = plan.rows_per_cta;
    pass.grid = plan.grid;
    pass.op = op;
    pass.bias = BiasArgs{a.bias.data, a.bias.dtype};
    pass.cand = out;
    if (kScores) pass.cand.scores = out.scores + m0 * out.score_stride;
    launch<kScores>(kernel, a, pass, dev, stream);
    check_launch(op);
    after(m0, pass.rows);
  }
}

}  // namespace
}  // namespace lm_head

size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a) {
  using namespace lm_head;
  return on_device(kOp, a, false, [&](const DeviceLimits& dev) { return plan_for(a, dev).end + kWorkspaceSlack; });
}

void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
  using namespace lm_head;
  on_device(kOp, a, true, [&](const DeviceLimits& dev) {
    const TopkPlan plan = plan_for(a, dev);
    check_workspace(kOp, plan.end + kWorkspaceSlack, workspace, workspace_bytes);
    const topk::MergeCall topk(candidate_args(plan, aligned_workspace(workspace)), plan.grid, a.weight.device_id, dev,
                               kOp);
    score_passes<false>(kOp, a, plan, topk.cand, dev, stream,
                        [&](int64_t m0, int rows) { topk.merge(a.values, a.indices, m0, rows, stream); });
  });
}

void lm_head_scores_dense(const char* op, const nt_lm_head_dense_args& a, float* scores, int64_t stride,
                          cudaStream_t stream) {
  using namespace lm_head;
  on_device(op, a, true, [&](const DeviceLimits& dev) {
    topk::CandidateArgs out{};
    out.scores = scores;
    out.score_stride = stride;
    score_passes<true>(op, a, plan_for(a, dev), out, dev, stream, [](int64_t, int) {});
  });
}

}  // namespace nt::cuda
