// Dense LM head on sm_90: the weights stream through shared memory by bulk
// tensor copies. A persistent grid, one CTA per SM, each CTA owning a
// contiguous vocabulary range walked in tiles of 256 rows x all H columns, 64
// columns (128 bytes of a row) per stage. Warp 8 only copies: per stage, one
// 32-row box of the weights per scoring warp (boxes past the CTA's range are
// skipped) and the pass's token rows' matching 64 columns, both 128-byte
// swizzled, weights L2 evict-first (weights_l2_policy). Stages are handed over
// by mbarriers: "full" when a stage's bytes have landed, "empty" when all 8
// scoring warps are done with it. The scoring warps multiply with fp32
// accumulators: on sm_90a as two warpgroups of wgmma (128 rows each),
// elsewhere with mma.sync (32 rows per warp). Each stage's 64 columns start
// from zero and are added to the scores with an IEEE add, bounding the tensor
// cores' truncating accumulation to 64-column partial sums. After a tile the
// scores go to the CTA's exact top-k (cuda/topk_cta.cuh), scoring warps 0-7
// meeting at a named barrier of their own.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/async_copy.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/lm_head_host.cuh"
#include "cuda/topk_cta.cuh"
#include "cuda/wgmma.cuh"

namespace nt::cuda::lm_head {

constexpr int kStagedWarps = 8;  // scoring warps
constexpr int kStagedThreads = (kStagedWarps + 1) * 32;  // the scoring warps and the copy warp
constexpr int kStagedBoxRows = 32;  // one scoring warp's weight rows
constexpr int kStagedTileRows = kStagedWarps * kStagedBoxRows;
constexpr int kStagedChunkCols = 64;  // one 128-byte swizzle line per row
constexpr int kStagedBoxBytes = kStagedBoxRows * 128;
constexpr int kStagedWeightBytes = kStagedWarps * kStagedBoxBytes;
constexpr int kStagedMaxStages = 8;
constexpr int kStagedTopkBarrier = 1;  // named barrier of the scoring warps
static_assert(kStagedTileRows <= kMaxTileRows, "candidate buffers are sized for kMaxTileRows");

// A pass of every dense kernel: the call's weights and the pass's token rows
// (strides in elements, 0 for a single row).
struct DenseOperands {
  const void* weight;
  int64_t weight_stride;
  const void* hidden;
  int64_t hidden_stride;
  int cols, vocab, rows;  // H, V, token rows of this pass
  int rows_per_cta;
  BiasArgs bias;
  topk::CandidateArgs cand;
};

struct StagedParams : DenseOperands {
  CUtensorMap weight_map;  // [V, H]: boxes of 32 rows x 64 columns
  CUtensorMap hidden_map;  // [rows, H] of this pass: boxes of 8 * NT rows x 64 columns
  int stages;
};

// Bytes of one stage's token rows (8 rows of 128 bytes per n-tile), and of
// the whole stage, for a pass of n_tiles n-tiles (host and device).
__host__ __device__ constexpr int staged_hidden_bytes(int n_tiles) { return n_tiles * 8 * 128; }
__host__ __device__ constexpr int staged_stage_bytes(int n_tiles) {
  return kStagedWeightBytes + staged_hidden_bytes(n_tiles);
}
using StagedTopkShared = topk::CtaShared<kStagedWarps>;

template <bool kBf16, int NT, bool kScores>
__global__ void __launch_bounds__(kStagedThreads, 1) dense_staged_kernel(const __grid_constant__ StagedParams p) {
  extern __shared__ unsigned char staged_smem[];
  __shared__ StagedTopkShared topk_shared;
  __shared__ uint64_t full[kStagedMaxStages], empty[kStagedMaxStages];
  constexpr int kStageBytes = staged_stage_bytes(NT);
  [[maybe_unused]] constexpr int NG = NT < 2 ? NT : 2;  // mma.sync: n-tiles per group
  unsigned char* stages = align_shared(staged_smem, 1024);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kStagedTileRows - 1) / kStagedTileRows;
  const int n_chunks = (p.cols + kStagedChunkCols - 1) / kStagedChunkCols;

  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kStagedWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  if (warp == kStagedWarps) {  // the copy warp: one lane issues every copy
    if (lane != 0) return;
    tma_prefetch_map(&p.weight_map);
    tma_prefetch_map(&p.hidden_map);
    const uint64_t policy = weights_l2_policy();
    int slot = 0;
    uint32_t phase = 0;
    for (int tile = 0; tile < n_tiles; ++tile) {
      const int row0 = row_begin + tile * kStagedTileRows;
      const int boxes = min(kStagedWarps, (row_end - row0 + kStagedBoxRows - 1) / kStagedBoxRows);
      const uint32_t bytes = uint32_t(boxes * kStagedBoxBytes + staged_hidden_bytes(NT));
      for (int ch = 0; ch < n_chunks; ++ch) {
        mbarrier_wait(&empty[slot], phase ^ 1u);
        unsigned char* stage = stages + slot * kStageBytes;
        mbarrier_arrive_expect_tx(&full[slot], bytes);
        for (int b = 0; b < boxes; ++b)
          tma_load_2d_weights(stage + b * kStagedBoxBytes, &p.weight_map, ch * kStagedChunkCols,
                              row0 + b * kStagedBoxRows, &full[slot], policy);
        tma_load_2d(stage + kStagedWeightBytes, &p.hidden_map, ch * kStagedChunkCols, 0,
                    &full[slot]);
        if (++slot == p.stages) {
          slot = 0;
          phase ^= 1u;
        }
      }
    }
    return;
  }
  topk::SinkOf<kScores, kStagedWarps, kStagedTopkBarrier> topk(topk_shared, p.cand, p.rows);
  const int g = lane >> 2, t = lane & 3;

  // Scores of this thread, out[m][n][i]: m16 block m of the warp's rows
  // (first row row_base(m)), n-tile n, the MMA accumulator layout (rows g and
  // g + 8, token columns 2t and 2t + 1).
  float out[2][NT][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) out[m][n][i] = 0.0f;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // Warpgroup wg (warps 4wg..4wg+3) takes tile rows [128wg, 128wg + 128) as
  // two m64 blocks; warp w of the group holds rows 16w..16w+15 of each.
  const int wg = warp >> 2;
  auto row_base = [&](int m) { return 128 * wg + 64 * m + 16 * (warp & 3); };
  float part[2][NT * 4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int i = 0; i < NT * 4; ++i) part[m][i] = 0.0f;
#else
  // Warp w takes tile rows [32w, 32w + 32) as two m16 blocks.
  auto row_base = [&](int m) { return 32 * warp + 16 * m; };
  // ldmatrix addresses of this lane for k16 step j (columns 16j..16j+15 of a
  // stage): A from weight lines m * 16 + lane % 16, pieces 2j + lane / 16;
  // B from token lines 16 * pair + lane % 8 + 8 * (lane / 16), pieces
  // 2j + (lane / 8) % 2 (x2, one n-tile of 8 lines: the upper 16 lanes repeat
  // the lower ones' addresses, which stay inside the box).
  auto a_offset = [&](int m, int j) { return swizzled(m * 16 + (lane & 15), 2 * j + (lane >> 4)); };
  auto b_offset = [&](int pair, int j) {
    const int line = NT == 1 ? (lane & 7) : 16 * pair + (lane & 7) + ((lane >> 4) << 3);
    return swizzled(line, 2 * j + ((lane >> 3) & 1));
  };
#endif

  // Each of this thread's scores with its token row and tile row, cleared
  // for the next tile. The last argument j numbers the thread's 2 NT token
  // rows (a constant once unrolled): token row token_of(j) = 8 n + 2 t +
  // (i & 1) for j = 2 n + (i & 1).
  auto token_of = [&](int j) { return (j >> 1) * 8 + 2 * t + (j & 1); };
  auto each_score = [&](auto&& f) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int j = 2 * n + (i & 1);
          f(token_of(j), row_base(m) + g + 8 * (i >> 1), out[m][n][i], j);
          out[m][n][i] = 0.0f;
        }
  };

  int slot = 0;
  uint32_t phase = 0;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile_row0 = row_begin + tile * kStagedTileRows;
    for (int ch = 0; ch < n_chunks; ++ch) {
      mbarrier_wait(&full[slot], phase);
      const uint32_t stage = smem_addr(stages + slot * kStageBytes);
      const uint32_t hbox = stage + uint32_t(kStagedWeightBytes);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      // The stage's 64 columns (4 k16 steps) per m64 block, from zero; the
      // boxes a partial tile did not load hold stale rows, never offered.
      wgmma_fence();
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const uint32_t abox = stage + uint32_t((4 * wg + 2 * m) * kStagedBoxBytes);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          wgmma_m64k16<8 * NT, kBf16>(part[m], wgmma_desc_sw128(abox + 32 * j),
                                      wgmma_desc_sw128(hbox + 32 * j), j);
      }
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        wgmma_fence_operands(part[m]);
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) out[m][n][i] += part[m][4 * n + i];
      }
#else
      if (tile_row0 + warp * kStagedBoxRows < row_end) {  // the warp's box was loaded
        const uint32_t wbox = stage + uint32_t(warp * kStagedBoxBytes);
        uint32_t a[2][4][4];
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int j = 0; j < 4; ++j) ldmatrix_x4(a[m][j], wbox + a_offset(m, j));
#pragma unroll
        for (int ng = 0; ng < NT; ng += NG) {
          uint32_t b[NG][4][2];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if constexpr (NG == 1) {
              ldmatrix_x2(b[0][j], hbox + b_offset(0, j));
            } else {
#pragma unroll
              for (int q = 0; q < NG / 2; ++q) {
                uint32_t r[4];
                ldmatrix_x4(r, hbox + b_offset(ng / 2 + q, j));
                b[2 * q][j][0] = r[0];
                b[2 * q][j][1] = r[1];
                b[2 * q + 1][j][0] = r[2];
                b[2 * q + 1][j][1] = r[3];
              }
            }
          }
#pragma unroll
          for (int m = 0; m < 2; ++m)
#pragma unroll
            for (int n = 0; n < NG; ++n) {
              const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
              float part[4];
              mma_16816<kBf16>(part, a[m][0], b[n][0][0], b[n][0][1], zero);
#pragma unroll
              for (int j = 1; j < 4; ++j) mma_16816<kBf16>(part, a[m][j], b[n][j][0], b[n][j][1], part);
#pragma unroll
              for (int i = 0; i < 4; ++i) out[m][ng + n][i] += part[i];
            }
        }
      }
#endif
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&empty[slot]);
      if (++slot == p.stages) {
        slot = 0;
        phase ^= 1u;
      }
    }

    // The thresholds of the thread's token rows into registers first: they
    // hold still until end_tile.
    uint32_t floor[2 * NT];
#pragma unroll
    for (int j = 0; j < 2 * NT; ++j) floor[j] = topk.threshold(token_of(j));
    each_score([&](int tok, int tile_row, float score, int j) {
      const int row = tile_row0 + tile_row;
      if (row < row_end && tok < p.rows) topk.offer_above(tok, floor[j], add_bias(score, p.bias, row), row);
    });
    topk.end_tile(kStagedTileRows, tile == n_tiles - 1);
  }
}

}  // namespace nt::cuda::lm_head
