// The binary head's warp-MMA pass kernel binary_mma_kernel (sm_80+), and what
// it shares with lm_head_binary_wgmma.cuh's: the tile geometry, the
// parameters, the score expression and the offers.
//
// A persistent grid, one CTA per SM, each CTA owning a contiguous vocabulary
// range walked in tiles of 256 rows (8 warps x 32 rows) and chunks of 512
// columns; a stage holds a chunk's sign words and scales of the tile's rows,
// the pass's permuted activations (binary_permuted_column) and the groups'
// accumulator seeds, filled by cp.async S - 1 chunks ahead (S >= 2 stages).
// Per group and k-step, the signs become int8 A fragments with a shift and a
// mask per register (lm_head_binary.cuh), the int8 MMAs start from the seed
// kMagicBits - 64 * sum(a), so the accumulator's bits read as the exact float
// 12582912 + 64 D, and one FADD and one FFMA add wscale * 64 D to the fp32
// score (the exact 1/64 joins act_scale).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/async_copy.cuh"
#include "cuda/lm_head_binary.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/lm_head_host.cuh"
#include "cuda/topk_cta.cuh"

namespace nt::cuda::lm_head {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = kWarps * 32;
constexpr int kChunkCols = 512;                     // columns (bits) per stage
constexpr int kSignRowBytes = kChunkCols / 8 + 16;  // +16: conflict-free word loads
constexpr int kActRowBytes = kChunkCols + 32;       // +32: conflict-free B loads
constexpr int kMaxStages = 8;
static_assert(kTileRows <= kMaxTileRows, "candidate buffers are sized for kMaxTileRows");

// The pass kernels read the activations permuted (act_perm), not act_q.
struct BinaryParams : BinaryOperands {
  const int8_t* act_perm;
  int64_t padded_cols;
  const int32_t* seed;
  int rows_per_cta;
  int wq_copy;  // largest cp.async size the sign rows allow: 16, 8 or 4
  int stages;
  uint32_t sign_flip;  // 0xC0C0C0C0 (binary_wgmma_bulk_kernel's signs_as_pm64)
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
// into a stage.
inline __device__ void stage_signs_and_scales(const BinaryParams& p, const StageLayout& L,
                                              unsigned char* stage, int row0, int valid_rows, int ch) {
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

// Copies chunk `ch` of tile rows [row0, row0 + valid_rows) into a stage.
inline __device__ void stage_chunk(const BinaryParams& p, const StageLayout& L, unsigned char* stage,
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

// The score of token row `tok` and vocabulary row `row` from its integer dot
// times 64 (an exact float): the one expression both pass kernels use, so
// their scores agree bit for bit.
__device__ __forceinline__ float binary_score(const BinaryParams& p, int tok, float dot64, int row) {
  return add_bias(p.act_scale[tok] * 0.015625f * dot64, p.bias, row);
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
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row + 8 * h;
        if (r < row_end && tok < p.rows) topk.offer(tok, binary_score(p, tok, out[n][2 * h + e], r), r);
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
template <int NT, bool kWide, bool kScores>
__global__ void __launch_bounds__(kThreads, 1) binary_mma_kernel(BinaryParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ topk::CtaShared<kWarps> topk_shared;
  topk::SinkOf<kScores, kWarps> topk(topk_shared, p.cand, p.rows);

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

}  // namespace nt::cuda::lm_head
