// Binary LM head with exact top-k on CUDA:
//   score[m,v] = act_scale[m] * sum_g float(wscale[v,g]) * D[m,v,g] + bias[v],
// D the exact int32 dot of act_q[m] with the signs of group g of row v, scored
// and selected in one pass over the packed weights (cuda/topk_cta.cuh and
// cuda/topk_merge.cuh for the top-k; the [M,V] scores stay in registers).
//
// Tensor-core path (sm_80+, 4-byte aligned sign and scale rows): a persistent
// grid, one CTA per SM, each CTA owning a contiguous vocabulary range walked in
// tiles of 256 rows (8 warps x 32 rows) against all token rows of the pass.
// Sign words, scales, activations and per-group accumulator seeds stream
// through a cp.async pipeline in stages of 512 columns. Signs become MMA A
// fragments with one multiply and one AND per register (cuda/lm_head_binary.cuh),
// so D comes from int8 MMAs (m16n8k32, u8 x s8 -> s32): the accumulators start
// at kMagicBits - 64 * sum_g(a) and end at kMagicBits + 64 * D, which reads as
// the float 12582912 + 64 * D; one FADD and one FFMA per group then add
// wscale * 64D to the fp32 score (the exact factor 1/64 joins act_scale). A prep kernel permutes the activations into
// the MMA's K order and computes the seeds, once per call.
//
// On sm_90 (an sm_90a build) calls of more than 8 rows with G = 128 or 256
// take binary_wgmma_kernel for their passes instead: the same stages and
// integers, but one warpgroup MMA per m64 block for all token rows of a pass.
//
// Elsewhere, passes of up to 8 rows with G = 128 or 256 take the decode kernel of
// cuda/lm_head_binary_stream.cuh instead (whole rows per stage, the same MMA
// arithmetic). Any other case runs a plain tile kernel (dp4a on 0/1 sign
// bytes) with the same top-k.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/check.h"
#include "cuda/lm_head_binary.cuh"
#include "cuda/lm_head_binary_rows.cuh"
#include "cuda/lm_head_binary_stream.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/lm_head_host.cuh"
#include "cuda/lm_head_ops.cuh"
#include "cuda/topk_cta.cuh"
#include "cuda/tensor_map.cuh"
#include "cuda/topk_merge.cuh"
#include "cuda/wgmma.cuh"

namespace nt::cuda {
namespace lm_head {
namespace {

constexpr const char* kOp = "lm_head_topk_binary";

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = kWarps * 32;
constexpr int kChunkCols = 512;                     // columns (bits) per stage
constexpr int kSignRowBytes = kChunkCols / 8 + 16;  // +16: conflict-free word loads
constexpr int kActRowBytes = kChunkCols + 32;       // +32: conflict-free B loads
constexpr int kMaxStages = 8;
static_assert(kTileRows <= kMaxTileRows, "candidate buffers are sized for kMaxTileRows");

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
  int32_t* seed;  // [groups][kPassRows]
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
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int g = col0 / p.group + warp; g < col_end / p.group; g += blockDim.x >> 5) {
    int32_t sum = 0;
    for (int j = lane; j < p.group; j += 32) sum += src[g * p.group + j];
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    if (lane == 0) p.seed[int64_t(g) * kPassRows + r] = kMagicBits - 64 * sum;
  }
}

// ---- tensor-core scoring kernel ------------------------------------------------

struct BinaryParams {
  const uint32_t* wq;
  int64_t wq_stride;  // words
  const uint16_t* wscale;
  int64_t wscale_stride;  // halves
  const int8_t* act_perm;
  int64_t padded_cols;
  const int32_t* seed;
  const float* act_scale;
  int cols, vocab, rows, group, rows_per_cta;
  int wq_copy;  // largest cp.async size the sign rows allow: 16, 8 or 4
  int stages;
  uint32_t sign_flip;  // 0xC0C0C0C0 (binary_wgmma_kernel)
  BiasArgs bias;
  topk::CandidateArgs cand;
};

struct StageLayout {
  int scale_row_bytes, sign_bytes, scale_bytes, act_bytes, seed_bytes, bytes;
};

__host__ __device__ inline StageLayout stage_layout(int group, int rows) {
  StageLayout s;
  s.scale_row_bytes = 2 * (kChunkCols / group) + 4;  // +4: conflict-free scale loads
  s.sign_bytes = kTileRows * kSignRowBytes;
  s.scale_bytes = (kTileRows * s.scale_row_bytes + 15) / 16 * 16;
  s.act_bytes = rows * kActRowBytes;
  s.seed_bytes = (kChunkCols / group) * kPassRows * 4;
  s.bytes = s.sign_bytes + s.scale_bytes + s.act_bytes + s.seed_bytes;
  return s;
}

// The sign words and scales of chunk `ch` of rows [row0, row0 + valid_rows)
// into a stage (both tensor-core kernels).
__device__ void stage_signs_and_scales(const BinaryParams& p, const StageLayout& L, unsigned char* stage,
                                       int row0, int valid_rows, int ch) {
  const int col0 = ch * kChunkCols;
  const int bits = min(kChunkCols, p.cols - col0);
  const int groups = bits / p.group;

  // sign words: bits / 8 bytes per row
  const int sign_bytes = bits / 8;
  int gran = p.wq_copy;
  while (sign_bytes % gran != 0) gran >>= 1;
  const int per_row = sign_bytes / gran;
  for (int i = threadIdx.x; i < valid_rows * per_row; i += blockDim.x) {
    const int r = i / per_row, c = i - r * per_row;
    const unsigned char* src = reinterpret_cast<const unsigned char*>(
                                   p.wq + int64_t(row0 + r) * p.wq_stride + col0 / 32) +
                               c * gran;
    cp_async(stage + r * kSignRowBytes + c * gran, src, gran, gran);
  }

  // scales: groups halves per row, in 4-byte copies (the last may be half full)
  unsigned char* scales = stage + L.sign_bytes;
  const int scale_words = (groups + 1) / 2;
  for (int i = threadIdx.x; i < valid_rows * scale_words; i += blockDim.x) {
    const int r = i / scale_words, c = i - r * scale_words;
    const uint16_t* src = p.wscale + int64_t(row0 + r) * p.wscale_stride +
                          ch * (kChunkCols / p.group) + 2 * c;
    cp_async(scales + r * L.scale_row_bytes + 4 * c, src, 4, 2 * c + 1 < groups ? 4 : 2);
  }
}

// Copies chunk `ch` of tile `tile` (rows [row0, row0 + valid_rows)) into a stage.
__device__ void stage_chunk(const BinaryParams& p, const StageLayout& L, unsigned char* stage,
                            int row0, int valid_rows, int ch) {
  stage_signs_and_scales(p, L, stage, row0, valid_rows, ch);
  const int col0 = ch * kChunkCols;
  const int bits = min(kChunkCols, p.cols - col0);
  const int groups = bits / p.group;

  // permuted activations: bits bytes per token row, 16-byte copies
  unsigned char* act = stage + L.sign_bytes + L.scale_bytes;
  const int act_per_row = bits / 16;
  for (int i = threadIdx.x; i < p.rows * act_per_row; i += kThreads) {
    const int r = i / act_per_row, c = i - r * act_per_row;
    cp_async(act + r * kActRowBytes + 16 * c, p.act_perm + int64_t(r) * p.padded_cols + col0 + 16 * c,
             16, 16);
  }

  // accumulator seeds of the chunk's groups, [group][kPassRows]
  unsigned char* seed = act + L.act_bytes;
  const int32_t* seed_src = p.seed + int64_t(ch) * (kChunkCols / p.group) * kPassRows;
  for (int i = threadIdx.x; i < groups * kPassRows / 4; i += kThreads)
    cp_async(seed + 16 * i, seed_src + 4 * i, 16, 16);
}

// Offers one m16 block of a tile's scores (times 64, in the MMA accumulator
// layout: vocabulary rows `row` (i < 2) and row + 8, token rows 8n + 2t +
// (i & 1)) to the CTA's top-k and clears it for the next tile.
template <int NT, class Topk>
__device__ __forceinline__ void offer_block(Topk& topk, float (&out)[NT][4], const BinaryParams& p, int row,
                                            int row_end, int t) {
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int tok = n * 8 + 2 * t + e;
      const float scale = tok < p.rows ? p.act_scale[tok] * 0.015625f : 0.0f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row + 8 * h;
        if (r < row_end && tok < p.rows) topk.offer(tok, add_bias(scale * out[n][2 * h + e], p.bias, r), r);
        out[n][2 * h + e] = 0.0f;
      }
    }
}

// One k-step: the A fragments of both m-tiles from their sign words and the
// classes c0, c0 + 1 (shift = 7 - c0), MMAs into acc, seeded on a group's
// first k-step.
template <int NT>
__device__ __forceinline__ void binary_kstep(int32_t (&acc)[2][NT][4], const uint32_t (&w_lo)[2],
                                             const uint32_t (&w_hi)[2], int shift,
                                             const unsigned char* act_k, const int (&b_offset)[NT],
                                             const int32_t* seeds, bool first, int t) {
  uint2 b[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) b[nt] = *reinterpret_cast<const uint2*>(act_k + b_offset[nt]);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const uint32_t a[4] = {(w_lo[mt] << shift) & 0x80808080u, (w_hi[mt] << shift) & 0x80808080u,
                           (w_lo[mt] << (shift - 1)) & 0x80808080u,
                           (w_hi[mt] << (shift - 1)) & 0x80808080u};
    if (first) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int2 s = *reinterpret_cast<const int2*>(seeds + nt * 8 + 2 * t);
        const int32_t c[4] = {s.x, s.y, s.x, s.y};
        mma_u8s8_16832(acc[mt][nt], a, b[nt].x, b[nt].y, c);
      }
    } else {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma_u8s8_16832(acc[mt][nt], a, b[nt].x, b[nt].y, acc[mt][nt]);
    }
  }
}

// kWide: G >= 128, where every lane's k-steps walk the same classes, so the
// shifts are immediates.
template <int NT, bool kWide>
__global__ void __launch_bounds__(kThreads, 1) binary_mma_kernel(BinaryParams p) {
  allow_dependent_launch();  // the merge may be placed now (cuda/launch.cuh)
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ topk::CtaShared<kWarps> topk_shared;
  topk::CtaTopk<kWarps> topk(topk_shared, p.cand, p.rows);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kTileRows - 1) / kTileRows;
  const int n_chunks = (p.cols + kChunkCols - 1) / kChunkCols;
  const int total_chunks = n_tiles * n_chunks;
  const StageLayout L = stage_layout(p.group, p.rows);
  const int words_per_group = p.group / 32;
  const int S = p.stages;

  int issued = 0;
  auto issue = [&]() {
    if (issued < total_chunks) {
      const int tile = issued / n_chunks, ch = issued - tile * n_chunks;
      const int row0 = row_begin + tile * kTileRows;
      stage_chunk(p, L, smem + (issued % S) * L.bytes, row0, min(kTileRows, row_end - row0), ch);
    }
    ++issued;
    cp_async_commit();
  };
  for (int i = 0; i < S - 1; ++i) issue();

  // Scores times 64 (the accumulators hold 64 * D); the 1/64 joins act_scale.
  float out[2][NT][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) out[mt][nt][i] = 0.0f;

  // Token row of the B fragments of n-tile nt (rows past the pass are clamped:
  // their columns are never offered).
  int b_offset[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) b_offset[nt] = min(nt * 8 + g, p.rows - 1) * kActRowBytes + 8 * t;

  for (int q = 0; q < total_chunks; ++q) {
    cp_async_wait_pending(S - 2);
    __syncthreads();
    issue();

    const int tile = q / n_chunks, ch = q - tile * n_chunks;
    const int tile_row0 = row_begin + tile * kTileRows;
    const bool warp_active = tile_row0 + warp * 32 < row_end;
    if (warp_active) {
      const unsigned char* stage = smem + (q % S) * L.bytes;
      const unsigned char* signs = stage + (warp * 32 + g) * kSignRowBytes;
      const unsigned char* scales = stage + L.sign_bytes + (warp * 32 + g) * L.scale_row_bytes;
      const unsigned char* act = stage + L.sign_bytes + L.scale_bytes;
      const int32_t* seeds = reinterpret_cast<const int32_t*>(act + L.act_bytes);
      const int groups = min(kChunkCols, p.cols - ch * kChunkCols) / p.group;

      for (int gi = 0; gi < groups; ++gi) {
        int32_t acc[2][NT][4];
        uint32_t w_lo[2], w_hi[2];
        const unsigned char* act_group = act + gi * p.group;
        const int32_t* group_seeds = seeds + gi * kPassRows;
        if (kWide) {
          // word t (+4) of the group, classes 2jj and 2jj + 1 at k-step jj
          for (int wb = 0; wb < words_per_group; wb += 4) {
            const int word = gi * words_per_group + wb + t;
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              w_lo[mt] = *reinterpret_cast<const uint32_t*>(signs + (mt * 16) * kSignRowBytes + 4 * word);
              w_hi[mt] = *reinterpret_cast<const uint32_t*>(signs + (mt * 16 + 8) * kSignRowBytes + 4 * word);
            }
#pragma unroll
            for (int jj = 0; jj < 4; ++jj)
              binary_kstep<NT>(acc, w_lo, w_hi, 7 - 2 * jj, act_group + 32 * (wb + jj), b_offset,
                               group_seeds, wb == 0 && jj == 0, t);
          }
        } else {
          const int word = gi * words_per_group + binary_word_of(words_per_group, 0, t);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            w_lo[mt] = *reinterpret_cast<const uint32_t*>(signs + (mt * 16) * kSignRowBytes + 4 * word);
            w_hi[mt] = *reinterpret_cast<const uint32_t*>(signs + (mt * 16 + 8) * kSignRowBytes + 4 * word);
          }
          for (int j = 0; j < words_per_group; ++j)
            binary_kstep<NT>(acc, w_lo, w_hi, 7 - binary_class_of(words_per_group, j, t),
                             act_group + 32 * j, b_offset, group_seeds, j == 0, t);
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const float s_lo =
              __half2float(*reinterpret_cast<const __half*>(scales + (mt * 16) * L.scale_row_bytes + 2 * gi));
          const float s_hi = __half2float(
              *reinterpret_cast<const __half*>(scales + (mt * 16 + 8) * L.scale_row_bytes + 2 * gi));
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i)
              out[mt][nt][i] = fmaf(i < 2 ? s_lo : s_hi, __int_as_float(acc[mt][nt][i]) - kMagicValue,
                                    out[mt][nt][i]);
        }
      }
    }

    if (ch == n_chunks - 1) {
      if (warp_active)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
          offer_block<NT>(topk, out[mt], p, tile_row0 + warp * 32 + mt * 16 + g, row_end, t);
      topk.end_tile(kTileRows, tile == n_tiles - 1);
    }
  }
  cp_async_wait<0>();
}

// ---- warpgroup-MMA scoring kernel (sm_90a) -----------------------------------
//
// binary_mma_kernel's tiles, chunks, stage slices and arithmetic, with one
// warpgroup MMA (m64 x 8NT x k32) where that kernel issues NT warp MMAs of
// 8 token rows each, so the MMA count no longer grows with the token rows.
// Four warpgroups (16 warps: the expansion and scaling are issue-bound, and
// 8 warps left the schedulers waiting on dependent latencies, run 38) each take
// one m64 block of a 256-row tile. A, the signs, comes from registers as bytes
// +-64: ((w << (7 - c)) & 0x80808080) ^ 0xC0C0C0C0 maps bit 1 to 0x40 and bit
// 0 to 0xC0, so the MMA (s8 x s8) yields 64 * D directly and every accumulator
// starts at kMagicBits: the same integers, hence the same fp32 scores, as
// binary_mma_kernel's seeded accumulators. B, the activations, sits in the
// MMA's K order (binary_k_order_column) in 128-byte swizzled boxes of 128
// columns x 8NT rows.

constexpr int kWgmmaWarps = 16;
constexpr int kWgmmaThreads = kWgmmaWarps * 32;

// Stage: stage_layout's sign and scale slices, then the chunk's activation
// boxes at a 1024-byte boundary (the swizzle's period).
struct KOrderStageLayout {
  int act_offset, box_bytes, bytes;
};

__host__ __device__ inline KOrderStageLayout k_order_stage_layout(int group, int nt) {
  const StageLayout s = stage_layout(group, 0);
  KOrderStageLayout k;
  k.act_offset = (s.sign_bytes + s.scale_bytes + 1023) / 1024 * 1024;
  k.box_bytes = nt * 8 * 128;
  k.bytes = k.act_offset + (kChunkCols / 128) * k.box_bytes;
  return k;
}

// Chunk `ch` of the tile's signs and scales, and of the pass's activations:
// 16-byte piece c of token row r goes to box c / 8, swizzled; rows past the
// pass up to the box's 8NT are zero-filled. A whole chunk of 16-byte sign
// pieces (every chunk but a ragged last one, at W1 all) has its shape in
// constants: run-time divisions in these loops were ~40% of the kernel's
// issue slots (run 38).
template <int NT, int kSteps>
__device__ void stage_chunk_k_order(const BinaryParams& p, const StageLayout& L, const KOrderStageLayout& K,
                                    unsigned char* stage, int row0, int valid_rows, int ch) {
  const int col0 = ch * kChunkCols;
  const int bits = min(kChunkCols, p.cols - col0);
  if (bits == kChunkCols && p.wq_copy == 16) {
    // Each thread's pieces sit at fixed places of every stage: constant trip
    // counts, a row check for a partial tile.
    constexpr int kSignPieces = kChunkCols / 128;                // 16-byte pieces a row
    constexpr int kScaleWords = kChunkCols / (32 * kSteps) / 2;  // 4-byte scale copies a row
    const unsigned char* wq = reinterpret_cast<const unsigned char*>(p.wq + int64_t(row0) * p.wq_stride + col0 / 32);
#pragma unroll
    for (int k = 0; k < kTileRows * kSignPieces / kWgmmaThreads; ++k) {
      const int i = threadIdx.x + k * kWgmmaThreads, r = i / kSignPieces, c = i % kSignPieces;
      if (r < valid_rows)
        cp_async(stage + r * kSignRowBytes + 16 * c, wq + int64_t(r) * p.wq_stride * 4 + 16 * c, 16, 16);
    }
    unsigned char* scales = stage + L.sign_bytes;
    const uint16_t* ws = p.wscale + int64_t(row0) * p.wscale_stride + ch * (kChunkCols / p.group);
#pragma unroll
    for (int k = 0; k < (kTileRows * kScaleWords + kWgmmaThreads - 1) / kWgmmaThreads; ++k) {
      const int i = threadIdx.x + k * kWgmmaThreads, r = i / kScaleWords, c = i % kScaleWords;
      if (r < valid_rows)
        cp_async(scales + r * L.scale_row_bytes + 4 * c, ws + int64_t(r) * p.wscale_stride + 2 * c, 4, 4);
    }
    unsigned char* act = stage + K.act_offset;
    const int8_t* src = p.act_perm + col0;
    constexpr int kActPieces = 8 * NT * (kChunkCols / 16);
#pragma unroll
    for (int k = 0; k < (kActPieces + kWgmmaThreads - 1) / kWgmmaThreads; ++k) {
      const int i = threadIdx.x + k * kWgmmaThreads, r = i / (kChunkCols / 16), c = i % (kChunkCols / 16);
      const bool real = r < p.rows;
      if (i < kActPieces)
        cp_async(act + (c >> 3) * K.box_bytes + swizzled(r, c & 7),
                 src + int64_t(real ? r : 0) * p.padded_cols + 16 * c, 16, real ? 16 : 0);
    }
    return;
  }
  stage_signs_and_scales(p, L, stage, row0, valid_rows, ch);
  const int pieces = bits / 16;
  unsigned char* act = stage + K.act_offset;
  const int8_t* src = p.act_perm + col0;
#pragma unroll 1
  for (int i = threadIdx.x; i < 8 * NT * pieces; i += kWgmmaThreads) {
    const int r = i / pieces, c = i - r * pieces;
    const bool real = r < p.rows;
    cp_async(act + (c >> 3) * K.box_bytes + swizzled(r, c & 7), src + int64_t(real ? r : 0) * p.padded_cols + 16 * c,
             16, real ? 16 : 0);
  }
}

// `flip` is 0xC0C0C0C0 read from the parameters (BinaryParams::sign_flip):
// with both masks immediates ptxas splits the AND and the XOR into two LOP3s
// (an instruction has one immediate), and folds any constant it can see.
__device__ __forceinline__ uint32_t signs_as_pm64(uint32_t w, int shift, uint32_t flip) {
  return ((w << shift) & 0x80808080u) ^ flip;
}

// kSteps = G / 32 k-steps per group (G = 128 or 256).
template <int NT, int kSteps>
__global__ void __launch_bounds__(kWgmmaThreads, 1) binary_wgmma_kernel(BinaryParams p) {
  allow_dependent_launch();  // the merge may be placed now (cuda/launch.cuh)
  extern __shared__ __align__(16) unsigned char wgmma_smem[];
  __shared__ topk::CtaShared<kWgmmaWarps> topk_shared;
  topk::CtaTopk<kWgmmaWarps> topk(topk_shared, p.cand, p.rows);
  // Swizzled boxes need 1024-byte aligned destinations (offsetting the shared
  // array itself keeps its accesses shared-memory loads).
  unsigned char* smem = wgmma_smem + ((1024u - (smem_addr(wgmma_smem) & 1023u)) & 1023u);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kTileRows - 1) / kTileRows;
  const int n_chunks = (p.cols + kChunkCols - 1) / kChunkCols;
  const int total_chunks = n_tiles * n_chunks;
  const StageLayout L = stage_layout(p.group, 0);
  const KOrderStageLayout K = k_order_stage_layout(p.group, NT);
  const int S = p.stages;

  // The next chunk to copy as (tile, chunk, stage slot), stepped without
  // divisions (they were a visible share of the issue slots, run 39).
  int issued = 0, issue_tile = 0, issue_ch = 0, issue_slot = 0;
  auto issue = [&]() {
    if (issued < total_chunks) {
      const int row0 = row_begin + issue_tile * kTileRows;
      stage_chunk_k_order<NT, kSteps>(p, L, K, smem + issue_slot * K.bytes, row0, min(kTileRows, row_end - row0),
                                      issue_ch);
      if (++issue_ch == n_chunks) {
        issue_ch = 0;
        ++issue_tile;
      }
      if (++issue_slot == S) issue_slot = 0;
    }
    ++issued;
    cp_async_commit();
  };
  for (int i = 0; i < S - 1; ++i) issue();

  // Scores times 64, out[n][i] in the accumulator layout: rows g (i < 2) and
  // g + 8 of the warp's 16, token rows 8n + 2t + (i & 1).
  float out[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) out[n][i] = 0.0f;
  // Tile row of this lane's fragment row g: warpgroup wg takes rows
  // [64wg, 64wg + 64), warp w of it rows 16w..16w+15.
  const int frag_row = 16 * warp + g;
  const unsigned char* sign_lo = smem + frag_row * kSignRowBytes + 4 * t;
  const int scale_lo = L.sign_bytes + frag_row * L.scale_row_bytes;
  const uint32_t flip = p.sign_flip;

  int tile = 0, ch = 0, slot = 0;
  for (int q = 0; q < total_chunks; ++q) {
    cp_async_wait_pending(S - 2);
    // The MMAs read B through the async proxy; cp.async wrote it through the
    // generic one.
    fence_proxy_async_shared();
    __syncthreads();
    issue();

    const int tile_row0 = row_begin + tile * kTileRows;
    // Every warpgroup scores every tile, rows past the CTA's range from stale
    // stage rows that are never offered: a branch around the MMAs, even a
    // warpgroup-uniform one, makes ptxas serialize them (C7520).
    const int stage_offset = slot * K.bytes;
    // The stage's first activation box as a descriptor; a k-step's is this
    // plus its byte offset / 16 (the start address field, bits 0-13, cannot
    // carry: shared memory ends below 2^18 bytes).
    const uint64_t act_desc = wgmma_desc_sw128(smem_addr(smem + stage_offset + K.act_offset));
    const int groups = min(kChunkCols, p.cols - ch * kChunkCols) / p.group;
    for (int gi = 0; gi < groups; ++gi) {
      int32_t acc[NT * 4];
      uint32_t a[kSteps][4];
#pragma unroll
      for (int i = 0; i < NT * 4; ++i) acc[i] = kMagicBits;
#pragma unroll
      for (int wb = 0; wb < kSteps / 4; ++wb) {
        // word t (+4) of the group, classes 2jj and 2jj + 1 at k-step 4wb + jj
        const unsigned char* w = sign_lo + stage_offset + 4 * (gi * kSteps + 4 * wb);
        const uint32_t w_lo = *reinterpret_cast<const uint32_t*>(w);
        const uint32_t w_hi = *reinterpret_cast<const uint32_t*>(w + 8 * kSignRowBytes);
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          uint32_t(&r)[4] = a[4 * wb + jj];
          r[0] = signs_as_pm64(w_lo, 7 - 2 * jj, flip);
          r[1] = signs_as_pm64(w_hi, 7 - 2 * jj, flip);
          r[2] = signs_as_pm64(w_lo, 6 - 2 * jj, flip);
          r[3] = signs_as_pm64(w_hi, 6 - 2 * jj, flip);
        }
      }
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < kSteps; ++j) {
        const int col = gi * 32 * kSteps + 32 * j;
        wgmma_s8_m64k32<8 * NT>(acc, a[j], act_desc + uint64_t(((col >> 7) * K.box_bytes + (col & 127)) >> 4));
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(acc);
      const unsigned char* sc = smem + stage_offset + scale_lo + 2 * gi;
      const float s_lo = __half2float(*reinterpret_cast<const __half*>(sc));
      const float s_hi = __half2float(*reinterpret_cast<const __half*>(sc + 8 * L.scale_row_bytes));
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          out[n][i] = fmaf(i < 2 ? s_lo : s_hi, __int_as_float(acc[4 * n + i]) - kMagicValue, out[n][i]);
    }

    if (ch == n_chunks - 1) {
      offer_block<NT>(topk, out, p, tile_row0 + frag_row, row_end, t);
      topk.end_tile(kTileRows, tile == n_tiles - 1);
    }
    if (++ch == n_chunks) {
      ch = 0;
      ++tile;
    }
    if (++slot == S) slot = 0;
  }
  cp_async_wait<0>();
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
  allow_dependent_launch();  // the merge may be placed now (cuda/launch.cuh)
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

// NEXTTOK_CUDA_LM_HEAD_PATH=generic|wide|expanded pins a kernel (lm_head_path_forced).
bool force_generic() { return lm_head_path_forced("generic"); }
bool force_wide() { return lm_head_path_forced("wide"); }
// The decode kernel with expanded signs instead of bit planes.
bool force_expanded() { return lm_head_path_forced("expanded"); }
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
  for (int warps : {kRowsWarps, 6, kRowsMinWarps})
    for (int stages = kRowsMaxStages; stages >= 2; --stages)
      if (rows_smem_bytes(L, warps, stages) <= budget) return {warps, stages};
  return {};
}

// The bit-plane kernel's per-warp candidate lists.
struct WarpListPlan {
  int rows_per_warp = 0, cap = 0;
  size_t offset = 0, end = 0;
};

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
    // min(the warp's rows, 1.5k + 32) whatever V is. Sized for the fewest
    // warps a launch takes, so it holds whichever copies fill the stages.
    const int tiles = (p.topk.rows_per_cta / kRowsTile + kRowsMinWarps - 1) / kRowsMinWarps;
    p.lists.rows_per_warp = tiles * kRowsTile;
    p.lists.cap = int(std::min<int64_t>(p.lists.rows_per_warp,
                                        int64_t(a.k) + kRowsTile + std::max(kRowsTile, a.k / 2)));
    p.lists.offset = align_up(p.act.end, 256);
    p.lists.end = p.lists.offset + size_t(p.topk.grid) * kRowsWarps * size_t(rows) * size_t(p.lists.cap) *
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

template <bool kWide>
void launch_mma_wide(const BinaryParams& p, int grid, int smem_limit, int device,
                     cudaStream_t stream) {
  if (p.rows <= 8) launch_mma<1, kWide>(p, grid, smem_limit, device, stream);
  else if (p.rows <= 16) launch_mma<2, kWide>(p, grid, smem_limit, device, stream);
  else if (p.rows <= 32) launch_mma<4, kWide>(p, grid, smem_limit, device, stream);
  else launch_mma<8, kWide>(p, grid, smem_limit, device, stream);
}

void launch_mma_rows(const BinaryParams& p, int grid, int smem_limit, int device,
                     cudaStream_t stream) {
  if (p.group >= 128) launch_mma_wide<true>(p, grid, smem_limit, device, stream);
  else launch_mma_wide<false>(p, grid, smem_limit, device, stream);
}

// Whether passes take the warpgroup-MMA kernel: its sm_90a code is in the
// build (NEXTTOK_CUDA_SM90A, CMakeLists.txt) and loaded on this device, and
// G = 128 or 256. NEXTTOK_CUDA_LM_HEAD_PATH=sync-mma keeps binary_mma_kernel
// for every pass instead, and =expanded the stream decode kernel, for timing
// and checking them in one process.
bool wgmma_usable(const nt_lm_head_binary_args& a, const DeviceLimits& dev, int device) {
#if defined(NEXTTOK_CUDA_SM90A)
  static std::atomic<int> known[64];
  return dev.cc_major == 9 && (a.group_size == 128 || a.group_size == 256) && !force_generic() &&
         !force_expanded() && !lm_head_path_forced("sync-mma") &&
         kernel_has_sm90_code(reinterpret_cast<const void*>(binary_wgmma_kernel<1, 4>), device, known);
#else
  (void)a, (void)dev, (void)device;
  return false;
#endif
}

// Dynamic shared memory of the warpgroup-MMA kernel for a pass of `rows`,
// including the 1024 bytes its stage alignment may skip.
int wgmma_n_tiles(int rows) { return rows <= 8 ? 1 : rows <= 16 ? 2 : rows <= 32 ? 4 : 8; }
int wgmma_stages(int group, int rows, int smem_budget) {
  return std::min(kMaxStages, (smem_budget - 1024) / k_order_stage_layout(group, wgmma_n_tiles(rows)).bytes);
}

template <int NT, int kSteps>
void launch_wgmma(const BinaryParams& p, int grid, int smem_limit, int device, cudaStream_t stream) {
  auto kernel = binary_wgmma_kernel<NT, kSteps>;
  allow_dynamic_smem(kernel, smem_limit, device, kOp);
  kernel<<<grid, kWgmmaThreads, p.stages * k_order_stage_layout(p.group, NT).bytes + 1024, stream>>>(p);
}

template <int kSteps>
void launch_wgmma_steps(const BinaryParams& p, int grid, int smem_limit, int device, cudaStream_t stream) {
  switch (wgmma_n_tiles(p.rows)) {
    case 1: launch_wgmma<1, kSteps>(p, grid, smem_limit, device, stream); break;
    case 2: launch_wgmma<2, kSteps>(p, grid, smem_limit, device, stream); break;
    case 4: launch_wgmma<4, kSteps>(p, grid, smem_limit, device, stream); break;
    default: launch_wgmma<8, kSteps>(p, grid, smem_limit, device, stream); break;
  }
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
// halves (one box).
// NEXTTOK_CUDA_LM_HEAD_PATH=pieces keeps the cp.async pieces (for timing both
// in one process).
bool rows_tensor_copies(const nt_lm_head_binary_args& a, const DeviceLimits& dev, int device) {
  static std::atomic<int> known[64];
  const int64_t groups = a.act_q.shape[1] / a.group_size;
  return dev.cc_major >= 9 && !lm_head_path_forced("pieces") && (2 * groups) % 16 == 0 && groups <= 256 &&
         row_alignment(a.wscale) % 16 == 0 &&
         kernel_has_sm90_code(reinterpret_cast<const void*>(binary_rows_kernel<4, 1>), device, known);
}

// The tensor maps of the bit-plane kernel's bulk copies; false when the
// driver refuses one. A single row gets its own length as stride (the driver
// wants one even where no second row exists).
bool rows_tensor_maps(const nt_lm_head_binary_args& a, BinaryRowsParams& p) {
  const int64_t vocab = a.wq.shape[0], cols = a.act_q.shape[1], groups = cols / a.group_size;
  const uint64_t sign_row = vocab > 1 ? uint64_t(a.wq.row_stride) * 4 : align_up(size_t(cols / 8), 16);
  const uint64_t scale_row = vocab > 1 ? uint64_t(a.wscale.row_stride) * 2 : align_up(size_t(2 * groups), 16);
  return encode_map_u16(&p.sign_map, a.wq.data, uint64_t(vocab), uint64_t(cols / 16), sign_row, kRowsTile,
                        64, CU_TENSOR_MAP_SWIZZLE_128B, true) &&
         encode_map_u16(&p.scale_map, a.wscale.data, uint64_t(vocab), uint64_t(groups), scale_row, kRowsTile,
                        uint32_t(groups), CU_TENSOR_MAP_SWIZZLE_NONE, false);
}

// The bit-plane kernel when its conditions hold (see lm_head_binary_rows.cuh);
// returns false to leave the call to the other kernels.
bool try_rows(const nt_lm_head_binary_args& a, const Plan& plan, const DeviceLimits& dev,
              const topk::CandidateArgs& cand, topk::Candidate* warp_cand, const BiasArgs& bias,
              int device, cudaStream_t stream) {
  const int64_t rows = a.act_q.shape[0];
  const int cols = static_cast<int>(a.act_q.shape[1]);
  const int scale_copy = scale_copy_bytes(a);
  if (force_generic() || force_wide() || force_expanded() || dev.cc_major < 8 ||
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
  if (force_generic() || force_wide() || lm_head_path_forced("sync-mma") || dev.cc_major < 8 ||
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
  DeviceGuard guard(a.wq.device_id, kOp);
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
  DeviceGuard guard(device, kOp);
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
  // The warpgroup-MMA kernel takes the passes of calls of more than 8 rows
  // (and, pinned to the pass kernels by NEXTTOK_CUDA_LM_HEAD_PATH=wide, of any
  // number). Calls of 3 to 8 rows stay on the stream decode kernel: at W1 M=4
  // 167.5 us against 207.8 (run 40).
  const int wgmma_budget = dev.max_smem_optin - int(sizeof(topk::CtaShared<kWgmmaWarps>)) - 1024;
  const bool wgmma = mma && wgmma_usable(a, dev, device) && wgmma_stages(a.group_size, kPassRows, wgmma_budget) >= 2;
  if (wgmma) pass_rows = kPassRows;
  const int merge_resident = topk::merge_resident_capacity(dev.max_smem_optin);
  const int merge_smem = topk::merge_smem_bytes(merge_resident);
  allow_dynamic_smem(topk::merge_topk_kernel<>, merge_smem, device, kOp);
  if (try_rows(a, plan, dev, cand, reinterpret_cast<topk::Candidate*>(ws + plan.lists.offset), bias,
               device, stream) ||
      ((!wgmma || rows_total <= kStreamRowsMeasuredFaster) && try_stream(a, plan, dev, cand, bias, device, stream))) {
    topk::launch_merge(cand, plan.topk.grid, static_cast<float*>(a.values.data),
                       a.values.row_stride, static_cast<int64_t*>(a.indices.data),
                       a.indices.row_stride, 0, static_cast<int>(rows_total), merge_resident,
                       merge_smem, dependent_launch_enabled(dev.cc_major), stream);
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
      prep.seed = reinterpret_cast<int32_t*>(ws + plan.act.seed_offset);
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
      if (!wgmma)
        launch_mma_rows(p, plan.topk.grid, smem_budget, device, stream);
      else if (p.group == 128)
        launch_wgmma_steps<4>(p, plan.topk.grid, wgmma_budget, device, stream);
      else
        launch_wgmma_steps<8>(p, plan.topk.grid, wgmma_budget, device, stream);
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
                       a.indices.row_stride, m0, rows, merge_resident, merge_smem,
                       dependent_launch_enabled(dev.cc_major), stream);
    check_launch(kOp);
  }
}

}  // namespace nt::cuda
