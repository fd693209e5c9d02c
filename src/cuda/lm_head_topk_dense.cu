// Dense LM head with exact top-k on CUDA:
//   score[m,v] = sum_h hidden[m,h] * weight[v,h] (fp32 accumulation) + bias[v],
// scored and selected in one pass over the weights; the [M,V] scores live only
// in registers (see cuda/topk_cta.cuh and cuda/topk_merge.cuh for the top-k).
//
// sm_90 (bf16/f16, H % 8 == 0, 16-byte aligned rows of weights and hidden
// states): the weights stream through shared memory by bulk tensor copies
// (cuda/lm_head_dense_staged.cuh, wgmma in the sm_90a build), for every M of
// a pass. Measured on the H200 (bench/results/2026-12-01-h200-run32) at
// 3.9-4.3 TB/s for M <= 16, twice as fast as the direct kernels below.
//
// Before sm_90, or with rows the copy engine cannot take, the weights go
// straight to registers ("direct" kernels below).
// Direct tensor-core path (bf16/f16, H % 8 == 0, 16-byte weight rows): a persistent
// grid, one CTA per SM, each CTA owning a contiguous vocabulary range walked in
// tiles of 256 rows (8 warps x 32 rows) against all token rows of the pass.
// Weights go straight from memory to the MMA A-fragments with 16-byte loads,
// D blocks of 32 columns in flight per thread (no shared-memory round trip:
// shared-memory bandwidth, not DRAM, would bound M = 64 otherwise). A lane
// loading columns [8t, 8t+8) of a block uses them as two k16 steps; the
// hidden rows are staged in shared memory (cp.async, 3 stages of 256 columns)
// in the matching permuted order, so a lane's B fragment is one 8-byte load.
// Each block's two MMAs start from zero and are added to the fp32 scores with
// an IEEE add, which bounds the error of the tensor cores' truncating
// accumulation to a 32-column partial sum.
//
// Any other case (f32, odd H or alignment, pre-sm_80 devices) runs a plain
// fp32 FFMA tile kernel with the same top-k.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
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

struct DenseParams {
  const uint16_t* weight;
  int64_t weight_stride;  // elements
  const uint16_t* hidden;
  int64_t hidden_stride;
  int cols, vocab, rows;  // H, V, token rows of this pass
  int hidden_copy;        // bytes per cp.async of the hidden rows: 8 or 4
  int rows_per_cta;
  BiasArgs bias;
  topk::CandidateArgs cand;
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

template <bool kBf16, int NT, int D>
__global__ void __launch_bounds__(kThreads, 1) dense_mma_kernel(DenseParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ topk::CtaShared<kWarps> topk_shared;
  topk::CtaTopk<kWarps> topk(topk_shared, p.cand, p.rows);
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
      stage_hidden(p.hidden, p.hidden_stride, p.rows, p.cols, p.hidden_copy,
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
            dst[mt][h] = ldg_stream(p.weight + int64_t(row) * p.weight_stride + col);
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

// ---- few-token row-stream path -----------------------------------------------
//
// At M <= 4 the tensor-core kernel is latency bound: each warp instruction
// fetches 64 bytes of 8 different rows and one CTA of 8 warps holds the SM.
// Here each warp streams whole weight rows instead: one instruction reads 512
// contiguous bytes of a row, kStreamDepth of them stay in flight per lane
// (16 warps x 32 lanes x 12 x 16 B = 96 KB per SM, above the ~32-64 KB that
// Little's law asks at 4 TB/s), and a row's score per token is an fp32 FMA
// chain per lane plus a warp butterfly sum. The token rows sit in shared
// memory widened to f32, so a 16-byte weight piece costs 8 widenings plus
// 2 shared loads and 8 FMAs per token.

constexpr int kStreamWarps = 16;
constexpr int kStreamThreads = kStreamWarps * 32;
constexpr int kStreamDepth = 12;                              // 16-byte loads in flight per lane
constexpr int kStreamRowsPerWarp = kTileRows / kStreamWarps;  // tiles stay kTileRows rows
constexpr int kStreamMaxTokens = 4;

struct RowStreamParams {
  const uint16_t* weight;
  int64_t weight_stride;  // elements
  const uint16_t* hidden;
  int64_t hidden_stride;  // elements
  int cols, vocab, rows_per_cta;
  BiasArgs bias;
  topk::CandidateArgs cand;
};

template <bool kBf16>
__device__ __forceinline__ float widen_half(uint16_t h) {
  return kBf16 ? __uint_as_float(uint32_t(h) << 16) : __half2float(__ushort_as_half(h));
}

// The 8 weights of one 16-byte piece, in column order.
template <bool kBf16>
__device__ __forceinline__ void widen_piece(const uint4& w, float (&out)[8]) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = widen_half<kBf16>(uint16_t(wv[i] & 0xFFFFu));
    out[2 * i + 1] = widen_half<kBf16>(uint16_t(wv[i] >> 16));
  }
}

template <bool kBf16, int NR>
__global__ void __launch_bounds__(kStreamThreads, 1) dense_row_stream_kernel(RowStreamParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ topk::CtaShared<kStreamWarps> topk_shared;
  topk::CtaTopk<kStreamWarps> topk(topk_shared, p.cand, NR);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_vec = p.cols / 8;  // 16-byte pieces per row (H % 8 == 0)
  float* hidden = reinterpret_cast<float*>(smem);  // [NR][cols]
#pragma unroll
  for (int r = 0; r < NR; ++r)
    for (int c = threadIdx.x; c < p.cols; c += kStreamThreads)
      hidden[r * p.cols + c] = widen_half<kBf16>(p.hidden[int64_t(r) * p.hidden_stride + c]);
  __syncthreads();

  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kTileRows - 1) / kTileRows;
  const int per_row = (n_vec + 31) / 32;  // steps per row: piece lane + 32 * step

  for (int tile = 0; tile < n_tiles; ++tile) {
    const int row0 = row_begin + tile * kTileRows + warp * kStreamRowsPerWarp;
    const int my_rows = max(0, min(kStreamRowsPerWarp, row_end - row0));
    const int steps = my_rows * per_row;
    const uint16_t* wrow = p.weight + int64_t(row0) * p.weight_stride;

    int load_step = 0, load_row = 0, load_u = 0;
    uint4 ring[kStreamDepth];
    auto load = [&](uint4& dst) {
      const int j = lane + 32 * load_u;
      dst = make_uint4(0u, 0u, 0u, 0u);
      if (load_step < steps && j < n_vec) dst = ldg_stream(wrow + int64_t(load_row) * p.weight_stride + 8 * j);
      ++load_step;
      if (++load_u == per_row) {
        load_u = 0;
        ++load_row;
      }
    };
#pragma unroll
    for (int d = 0; d < kStreamDepth; ++d) load(ring[d]);

    float acc[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r) acc[r] = 0.0f;
    int use_row = 0, use_u = 0;
    for (int s0 = 0; s0 < steps; s0 += kStreamDepth) {
#pragma unroll
      for (int d = 0; d < kStreamDepth; ++d) {
        if (s0 + d < steps) {  // warp-uniform
          const int j = lane + 32 * use_u;
          if (j < n_vec) {
            float w[8];
            widen_piece<kBf16>(ring[d], w);
#pragma unroll
            for (int r = 0; r < NR; ++r) {
              const float4* h = reinterpret_cast<const float4*>(hidden + r * p.cols + 8 * j);
              const float4 h0 = h[0], h1 = h[1];
              const float hv[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
              for (int e = 0; e < 8; ++e) acc[r] = fmaf(hv[e], w[e], acc[r]);
            }
          }
          load(ring[d]);
          if (++use_u == per_row) {
            const int row = row0 + use_row;
#pragma unroll
            for (int r = 0; r < NR; ++r) {
#pragma unroll
              for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
              if (lane == r) topk.offer(r, add_bias(acc[r], p.bias, row), row);
              acc[r] = 0.0f;
            }
            use_u = 0;
            ++use_row;
          }
        }
      }
    }
    topk.end_tile(kTileRows, tile == n_tiles - 1);
  }
}

// ---- generic path -----------------------------------------------------------

constexpr int kGenericTileRows = 64;
constexpr int kGenericK = 32;

struct GenericParams {
  const void* weight;
  int64_t weight_stride;
  const void* hidden;
  int64_t hidden_stride;
  int cols, vocab, rows, rows_per_cta;
  BiasArgs bias;
  topk::CandidateArgs cand;
};

template <nt_dtype kType>
__device__ __forceinline__ float load_widened(const void* base, int64_t i) {
  if (kType == NT_F32) return static_cast<const float*>(base)[i];
  if (kType == NT_BF16) return nt_bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
  return nt_f16_to_f32(static_cast<const uint16_t*>(base)[i]);
}

// 64 vocabulary rows x up to 64 token rows per tile, each thread a 4 x 4
// block of scores accumulated with fmaf in increasing h.
template <nt_dtype kType>
__global__ void __launch_bounds__(kThreads) dense_generic_kernel(GenericParams p) {
  __shared__ float w_tile[kGenericTileRows][kGenericK + 1];
  __shared__ float x_tile[topk::kMaxRows][kGenericK + 1];
  __shared__ topk::CtaShared<kWarps> topk_shared;
  topk::CtaTopk<kWarps> topk(topk_shared, p.cand, p.rows);

  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kGenericTileRows - 1) / kGenericTileRows;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile_row0 = row_begin + tile * kGenericTileRows;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < p.cols; k0 += kGenericK) {
      for (int e = threadIdx.x; e < kGenericTileRows * kGenericK; e += kThreads) {
        const int r = e / kGenericK, c = e % kGenericK;
        const int row = tile_row0 + r, col = k0 + c;
        w_tile[r][c] = row < row_end && col < p.cols
                           ? load_widened<kType>(p.weight, int64_t(row) * p.weight_stride + col)
                           : 0.0f;
        x_tile[r][c] = r < p.rows && col < p.cols
                           ? load_widened<kType>(p.hidden, int64_t(r) * p.hidden_stride + col)
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
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = tile_row0 + ty * 4 + i, m = tx * 4 + j;
        if (row < row_end && m < p.rows) topk.offer(m, add_bias(acc[i][j], p.bias, row), row);
      }
    topk.end_tile(kGenericTileRows, tile == n_tiles - 1);
  }
}

// ---- host -------------------------------------------------------------------

// n-tiles of 8 token rows a staged pass of `rows` rows computes.
int staged_tiles(int rows) { return rows <= 8 ? 1 : rows <= 16 ? 2 : rows <= 32 ? 4 : 8; }

// Static shared memory of a staged kernel (top-k state and barriers).
constexpr int kStagedStaticSmem = int(sizeof(StagedTopkShared)) + 2 * kStagedMaxStages * 8;

// Dynamic shared memory of a staged kernel of `n_tiles` n-tiles: its stages
// and the 1024-byte alignment slack.
int staged_dynamic_bytes(int stages, int n_tiles) { return stages * staged_stage_bytes(n_tiles) + 1024; }

// Stages that fit beside the static shared memory and the rest of the
// dynamic. NEXTTOK_CUDA_LM_HEAD_STAGES=n takes fewer (a measurement switch:
// how many the ring needs).
int staged_stages(const DeviceLimits& dev, int rows) {
  const int tiles = staged_tiles(rows);
  const int fixed = kStagedStaticSmem + staged_dynamic_bytes(0, tiles);
  int n = std::min(kStagedMaxStages, (dev.max_smem_optin - fixed) / staged_stage_bytes(tiles));
  if (const char* v = std::getenv("NEXTTOK_CUDA_LM_HEAD_STAGES"); v != nullptr && std::atoi(v) >= 2)
    n = std::min(n, std::atoi(v));
  return n;
}

bool staged_kernel_built(int device) {
  return kernel_has_sm90_code(reinterpret_cast<const void*>(dense_staged_kernel<true, 1>), device);
}

template <bool kBf16, int NT>
void launch_staged(const StagedParams& p, int grid, int device, cudaStream_t stream) {
  auto kernel = dense_staged_kernel<kBf16, NT>;
  const int smem = staged_dynamic_bytes(p.stages, NT);
  allow_dynamic_smem(kernel, device_limits(device, kOp).max_smem_optin - kStagedStaticSmem, device, kOp);
  kernel<<<grid, kStagedThreads, smem, stream>>>(p);
}

template <bool kBf16>
void launch_staged_rows(const StagedParams& p, int grid, int device, cudaStream_t stream) {
  switch (staged_tiles(p.rows)) {
    case 1: launch_staged<kBf16, 1>(p, grid, device, stream); break;
    case 2: launch_staged<kBf16, 2>(p, grid, device, stream); break;
    case 4: launch_staged<kBf16, 4>(p, grid, device, stream); break;
    default: launch_staged<kBf16, 8>(p, grid, device, stream); break;
  }
}

// The tensor maps of one staged pass; a single-row matrix gets its own row
// length as stride (the driver wants one even where no second row exists).
StagedParams staged_params(const nt_lm_head_dense_args& a, const void* hidden, int rows) {
  StagedParams p{};
  const int64_t vocab = a.weight.shape[0], cols = a.weight.shape[1];
  const uint64_t dense_row = align_up(size_t(cols) * 2, 16);
  const uint64_t w_row = vocab > 1 ? uint64_t(a.weight.row_stride) * 2 : dense_row;
  const uint64_t h_row = rows > 1 ? uint64_t(a.hidden.row_stride) * 2 : dense_row;
  const int tiles = staged_tiles(rows);
  if (!encode_map_u16(&p.weight_map, a.weight.data, uint64_t(vocab), uint64_t(cols), w_row, kStagedBoxRows,
                      kStagedChunkCols, CU_TENSOR_MAP_SWIZZLE_128B, true) ||
      !encode_map_u16(&p.hidden_map, hidden, uint64_t(rows), uint64_t(cols), h_row, uint32_t(tiles * 8),
                      kStagedChunkCols, CU_TENSOR_MAP_SWIZZLE_128B, false))
    fail(NT_ERROR_BACKEND, std::string(kOp) + ": the CUDA driver refused a tensor map");
  p.cols = int(cols);
  p.vocab = int(vocab);
  p.rows = rows;
  return p;
}

struct Dispatch {
  bool staged;  // dense_staged_kernel (sm_90)
  bool mma;     // the direct tensor-core kernels
  int hidden_copy;
};

int mma_pass_rows(const DeviceLimits& dev);

// NEXTTOK_CUDA_LM_HEAD_PATH=generic|direct pins the FFMA kernel or the direct
// (register-fed) kernels (lm_head_path_forced).

Dispatch choose(const nt_lm_head_dense_args& a, const DeviceLimits& dev) {
  Dispatch d{false, false, 0};
  const int64_t cols = a.weight.shape[1];
  const int64_t hidden_align = row_alignment(a.hidden);
  d.mma = !lm_head_path_forced("generic") && dev.cc_major >= 8 && a.weight.dtype != NT_F32 &&
          cols % 8 == 0 && row_alignment(a.weight) >= 16 && hidden_align >= 4 &&
          mma_pass_rows(dev) >= 8;
  d.staged = d.mma && !lm_head_path_forced("direct") && dev.cc_major >= 9 && hidden_align >= 16 &&
             staged_stages(dev, kPassRows) >= 2 && staged_kernel_built(a.weight.device_id) &&
             tensor_map_encoder() != nullptr;
  d.hidden_copy = hidden_align >= 8 ? 8 : 4;
  return d;
}

// Token rows one tensor-core pass can stage in shared memory on this device.
int mma_pass_rows(const DeviceLimits& dev) {
  const int budget = dev.max_smem_optin - int(sizeof(topk::CtaShared<kWarps>)) - 1024;
  return std::min(kPassRows, budget / (kStages * kTokenRowBytes));
}

template <bool kBf16, int NT, int D>
void launch_mma(const DenseParams& p, int grid, int device, cudaStream_t stream) {
  auto kernel = dense_mma_kernel<kBf16, NT, D>;
  const int smem = kStages * kPassRows * kTokenRowBytes;
  allow_dynamic_smem(kernel, std::min(smem, device_limits(device, kOp).max_smem_optin -
                                                int(sizeof(topk::CtaShared<kWarps>))),
                     device, kOp);
  kernel<<<grid, kThreads, kStages * p.rows * kTokenRowBytes, stream>>>(p);
}

// Passes of at most kStreamMaxTokens rows stream weight rows (see
// dense_row_stream_kernel) when their f32 hidden rows fit shared memory
// beside the top-k state.
// Measured on the H200 (bench/results/2026-12-01-h200-run2): the row stream
// beats the tensor-core kernel at M=1 (1213 vs 1358 us at V=248,320, H=5,120)
// but loses at M=4 (1724 vs 1368 us), so only single-row passes take it until
// M=2 and M=3 are measured.
constexpr int64_t kStreamRowsMeasuredFaster = 1;
bool row_stream_fits(int64_t rows, int64_t cols, const DeviceLimits& dev) {
  return rows <= kStreamRowsMeasuredFaster && rows <= kStreamMaxTokens &&
         rows * cols * 4 <= dev.max_smem_optin - int64_t(sizeof(topk::CtaShared<kStreamWarps>)) - 1024;
}

template <bool kBf16, int NR>
void launch_row_stream(const RowStreamParams& p, int grid, int device, cudaStream_t stream) {
  auto kernel = dense_row_stream_kernel<kBf16, NR>;
  allow_dynamic_smem(kernel, device_limits(device, kOp).max_smem_optin -
                                 int(sizeof(topk::CtaShared<kStreamWarps>)),
                     device, kOp);
  kernel<<<grid, kStreamThreads, NR * p.cols * 4, stream>>>(p);
}

template <bool kBf16>
void launch_row_stream_rows(const RowStreamParams& p, int rows, int grid, int device,
                            cudaStream_t stream) {
  switch (rows) {
    case 1: launch_row_stream<kBf16, 1>(p, grid, device, stream); break;
    case 2: launch_row_stream<kBf16, 2>(p, grid, device, stream); break;
    case 3: launch_row_stream<kBf16, 3>(p, grid, device, stream); break;
    default: launch_row_stream<kBf16, 4>(p, grid, device, stream); break;
  }
}

template <bool kBf16>
void launch_mma_rows(const DenseParams& p, int grid, int device, cudaStream_t stream) {
  if (p.rows <= 8) launch_mma<kBf16, 1, 8>(p, grid, device, stream);
  else if (p.rows <= 16) launch_mma<kBf16, 2, 8>(p, grid, device, stream);
  else if (p.rows <= 32) launch_mma<kBf16, 4, 4>(p, grid, device, stream);
  else launch_mma<kBf16, 8, 2>(p, grid, device, stream);
}

void launch_generic(nt_dtype dtype, const GenericParams& p, int grid, cudaStream_t stream) {
  switch (dtype) {
    case NT_F32: dense_generic_kernel<NT_F32><<<grid, kThreads, 0, stream>>>(p); break;
    case NT_BF16: dense_generic_kernel<NT_BF16><<<grid, kThreads, 0, stream>>>(p); break;
    default: dense_generic_kernel<NT_F16><<<grid, kThreads, 0, stream>>>(p); break;
  }
}

TopkPlan plan_for(const nt_lm_head_dense_args& a, const DeviceLimits& dev) {
  return make_topk_plan(a.weight.shape[0], a.hidden.shape[0], a.k, dev.sm_count, 0);
}

}  // namespace
}  // namespace lm_head

size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a) {
  using namespace lm_head;
  if (a.hidden.shape[0] == 0) return 0;
  DeviceScope scope(a.weight.device_id, kOp);
  return plan_for(a, device_limits(a.weight.device_id, kOp)).end + kWorkspaceSlack;
}

void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
  using namespace lm_head;
  (void)workspace_bytes;  // checked against the size query by the dispatcher
  const int64_t rows_total = a.hidden.shape[0];
  if (rows_total == 0) return;
  for (const auto& [name, t] : {std::pair<const char*, const nt_tensor&>{"hidden", a.hidden},
                                {"weight", a.weight},
                                {"bias", a.bias},
                                {"values", a.values},
                                {"indices", a.indices}})
    require_natural_alignment(kOp, name, t);

  DeviceScope scope(a.weight.device_id, kOp);
  const DeviceLimits dev = device_limits(a.weight.device_id, kOp);
  const TopkPlan plan = plan_for(a, dev);
  char* ws = aligned_workspace(workspace);
  const Dispatch path = choose(a, dev);
  const size_t elt = dtype_size(a.weight.dtype);
  const BiasArgs bias{a.bias.data, a.bias.dtype};
  const topk::CandidateArgs cand{reinterpret_cast<topk::Candidate*>(ws + plan.cand_offset),
                                 reinterpret_cast<int32_t*>(ws + plan.counts_offset),
                                 plan.mp_stride, plan.cap, a.k};
  const topk::MergeBudget merges = topk::merge_budget(
      dev.max_smem_optin, [&](auto kernel, int bytes) { allow_dynamic_smem(kernel, bytes, a.weight.device_id, kOp); });

  const int pass_rows = path.mma && !path.staged ? mma_pass_rows(dev) : kPassRows;
  for (int64_t m0 = 0; m0 < rows_total; m0 += pass_rows) {
    const int rows = static_cast<int>(std::min<int64_t>(pass_rows, rows_total - m0));
    const char* hidden = static_cast<const char*>(a.hidden.data) + m0 * a.hidden.row_stride * elt;
    if (path.staged) {
      StagedParams p = staged_params(a, hidden, rows);
      p.rows_per_cta = plan.rows_per_cta;
      p.stages = staged_stages(dev, rows);
      p.bias = bias;
      p.cand = cand;
      const int device = a.weight.device_id;
      if (a.weight.dtype == NT_BF16) launch_staged_rows<true>(p, plan.grid, device, stream);
      else launch_staged_rows<false>(p, plan.grid, device, stream);
    } else if (path.mma && row_stream_fits(rows, a.weight.shape[1], dev)) {
      RowStreamParams p{};
      p.weight = static_cast<const uint16_t*>(a.weight.data);
      p.weight_stride = a.weight.shape[0] > 1 ? a.weight.row_stride : 0;
      p.hidden = reinterpret_cast<const uint16_t*>(hidden);
      p.hidden_stride = rows > 1 ? a.hidden.row_stride : 0;
      p.cols = static_cast<int>(a.weight.shape[1]);
      p.vocab = static_cast<int>(a.weight.shape[0]);
      p.rows_per_cta = plan.rows_per_cta;
      p.bias = bias;
      p.cand = cand;
      if (a.weight.dtype == NT_BF16) launch_row_stream_rows<true>(p, rows, plan.grid, a.weight.device_id, stream);
      else launch_row_stream_rows<false>(p, rows, plan.grid, a.weight.device_id, stream);
    } else if (path.mma) {
      DenseParams p{};
      p.weight = static_cast<const uint16_t*>(a.weight.data);
      p.weight_stride = a.weight.shape[0] > 1 ? a.weight.row_stride : 0;
      p.hidden = reinterpret_cast<const uint16_t*>(hidden);
      p.hidden_stride = rows > 1 ? a.hidden.row_stride : 0;
      p.cols = static_cast<int>(a.weight.shape[1]);
      p.vocab = static_cast<int>(a.weight.shape[0]);
      p.rows = rows;
      p.hidden_copy = path.hidden_copy;
      p.rows_per_cta = plan.rows_per_cta;
      p.bias = bias;
      p.cand = cand;
      if (a.weight.dtype == NT_BF16) launch_mma_rows<true>(p, plan.grid, a.weight.device_id, stream);
      else launch_mma_rows<false>(p, plan.grid, a.weight.device_id, stream);
    } else {
      GenericParams p{};
      p.weight = a.weight.data;
      p.weight_stride = a.weight.shape[0] > 1 ? a.weight.row_stride : 0;
      p.hidden = hidden;
      p.hidden_stride = rows > 1 ? a.hidden.row_stride : 0;
      p.cols = static_cast<int>(a.weight.shape[1]);
      p.vocab = static_cast<int>(a.weight.shape[0]);
      p.rows = rows;
      p.rows_per_cta = plan.rows_per_cta;
      p.bias = bias;
      p.cand = cand;
      launch_generic(a.weight.dtype, p, plan.grid, stream);
    }
    check_launch(kOp);

    topk::launch_merge(cand, plan.grid, static_cast<float*>(a.values.data),
                       a.values.row_stride, static_cast<int64_t*>(a.indices.data),
                       a.indices.row_stride, m0, rows, merges, stream);
    check_launch(kOp);
  }
}

}  // namespace nt::cuda
