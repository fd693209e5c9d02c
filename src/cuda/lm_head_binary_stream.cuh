// The binary head's decode kernel (up to 8 token rows per n-tile, group size
// 128 or 256; the host takes it for passes of up to 8 rows, where it measured
// faster).
//
// The wide tensor-core kernel of lm_head_topk_binary.cu stages 512-column
// slices of 256 rows: 64 bytes of each 640-byte sign row per copy, a pattern
// that reads DRAM at ~2.1 TB/s where whole rows read at ~3.3 TB/s
// (bench/micro/dram_patterns.cu), and it re-stages the activations with every
// slice. Here a stage is a run of whole rows (32 rows: 20 KB of signs and
// 2.5 KB of scales at H = 5120), contiguous in memory, and the activations'
// MMA fragments are built once per CTA into shared memory while the first
// stages load. Sixteen warps split a tile as 2 m-tiles x 8 parts of the
// groups; their partial scores meet in shared memory in a fixed order
// (deterministic), and the CTA's exact top-k (cuda/topk_cta.cuh) takes them.
//
// Arithmetic per group is the wide kernel's: signs become u8 A fragments with
// one shift and one AND per register, D comes from int8 MMAs seeded at
// kMagicBits - 64 * sum(a), and one FADD + FFMA per accumulator adds
// scale * 64D to the partial score. (Passes of 1 or 2 rows take the bit-plane
// kernel of lm_head_binary_rows.cuh instead.)
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/lm_head_binary.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/lm_head_host.cuh"
#include "cuda/topk_cta.cuh"

namespace nt::cuda::lm_head {

constexpr int kStreamWarps = 16;
constexpr int kStreamThreads = kStreamWarps * 32;
constexpr int kStreamTileRows = 32;  // 2 m-tiles
constexpr int kStreamParts = kStreamWarps / 2;
constexpr int kStreamMaxStages = 6;
// cp.async pieces per thread per stage, at most (the host checks a call fits):
// sign rows up to H = 8192, scale rows up to 32 pieces.
constexpr int kStreamSignCopies = 4;
constexpr int kStreamScaleCopies = 2;
// The CTA's top-k buffers are cut back every this many tiles (its candidate
// capacity is sized for kMaxTileRows offers between cuts).
constexpr int kStreamTilesPerCut = 8;
static_assert(kStreamTilesPerCut * kStreamTileRows <= kMaxTileRows,
              "offers between cuts must fit the candidate capacity");

struct BinaryStreamParams : BinaryOperands {
  int rows_per_cta;
  int scale_copy;  // bytes per cp.async of a scale row: 16, 8 or 4, dividing the row
  int stages;
  BiasArgs bias;
  topk::CandidateArgs cand;
};

// Shared-memory layout: the fragments and seeds, then `stages` stages.
struct StreamLayout {
  int sign_stride;   // bytes per staged sign row (word stride = 4 mod 32: no bank conflicts)
  int scale_stride;  // bytes per staged scale row
  int stage_bytes;
  int frag_bytes;  // B fragments: [k-step][n-tile][lane] x 8 bytes
  int seed_bytes;  // accumulator seeds: [group][16 token rows] x 4 bytes
  int partial_bytes;
  int fixed_bytes;  // everything but the stages
};

__host__ __device__ inline StreamLayout stream_layout(int cols, int group, int n_tiles) {
  StreamLayout l;
  const int row_words = cols / 32;
  l.sign_stride = 4 * (row_words + ((36 - row_words % 32) % 32));
  const int groups = cols / group;
  // 16-byte units (cp.async destinations), an odd count: 8 rows hit 8 banks.
  int scale_units = (2 * groups + 15) / 16;
  if (scale_units % 2 == 0) ++scale_units;
  l.scale_stride = 16 * scale_units;
  l.stage_bytes = kStreamTileRows * (l.sign_stride + l.scale_stride);
  l.frag_bytes = (cols / 32) * n_tiles * 32 * 8;
  l.seed_bytes = groups * 16 * 4;
  // two buffers of [part][m-tile][n-tile][lane][4 floats]
  l.partial_bytes = 2 * kStreamParts * 2 * n_tiles * 32 * 16;
  l.fixed_bytes = l.frag_bytes + l.seed_bytes + l.partial_bytes;
  return l;
}

// One thread's share of a stage's copies, the same for every tile: piece j
// goes from byte src[j] of the tile's first row to byte dst[j] of the stage's
// sign (or scale) area; a piece whose dst lies past the tile's valid rows is
// skipped. Planned once, so a tile costs an add and a compare per piece.
struct CopyPlan {
  int32_t src[kStreamSignCopies + kStreamScaleCopies];
  int32_t dst[kStreamSignCopies + kStreamScaleCopies];
};

__device__ __forceinline__ CopyPlan plan_copies(const BinaryStreamParams& p, const StreamLayout& L) {
  CopyPlan c;
  const int pieces = p.cols / 128;  // 16-byte pieces of a sign row
#pragma unroll
  for (int j = 0; j < kStreamSignCopies; ++j) {
    const int i = int(threadIdx.x) + j * kStreamThreads;
    const int r = i / pieces, q = i - r * pieces;
    c.src[j] = int32_t(r * p.wq_stride * 4 + 16 * q);
    c.dst[j] = r * L.sign_stride + 16 * q;
  }
  const int gran = p.scale_copy;
  const int per_row = 2 * (p.cols / p.group) / gran;
#pragma unroll
  for (int j = 0; j < kStreamScaleCopies; ++j) {
    const int i = int(threadIdx.x) + j * kStreamThreads;
    const int r = i / per_row, q = i - r * per_row;
    c.src[kStreamSignCopies + j] = int32_t(r * p.wscale_stride * 2 + gran * q);
    c.dst[kStreamSignCopies + j] = r * L.scale_stride + gran * q;
  }
  return c;
}

// Copies `valid` rows of signs and scales, from the tile's first row at
// `signs` and `scales`, into a stage.
__device__ __forceinline__ void stream_stage(const BinaryStreamParams& p, const StreamLayout& L,
                                             const CopyPlan& c, unsigned char* stage,
                                             const unsigned char* signs, const unsigned char* scales,
                                             int valid) {
  unsigned char* scale_stage = stage + kStreamTileRows * L.sign_stride;
#pragma unroll
  for (int j = 0; j < kStreamSignCopies; ++j)
    if (c.dst[j] < valid * L.sign_stride) cp_async(stage + c.dst[j], signs + c.src[j], 16, 16);
#pragma unroll
  for (int j = kStreamSignCopies; j < kStreamSignCopies + kStreamScaleCopies; ++j)
    if (c.dst[j] < valid * L.scale_stride)
      cp_async(scale_stage + c.dst[j], scales + c.src[j], p.scale_copy, p.scale_copy);
}

// WPG: sign words per group (4 or 8: G = 128 or 256), a constant so that a
// group's k-steps unroll with fixed shared-memory offsets, the seed and zero
// starts of the two MMA chains are resolved at compile time, and the walk over
// groups advances three pointers (at M = 1 the expanded-sign kernel is
// issue-bound: 91 M warp instructions for 3.7 M MMAs, run 18).
template <int NT, int WPG>
__global__ void __launch_bounds__(kStreamThreads, 1) binary_stream_kernel(BinaryStreamParams p) {
  static_assert(WPG == 4 || WPG == 8, "group of 128 or 256 columns");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ topk::CtaShared<kStreamWarps> topk_shared;
  topk::CtaTopk<kStreamWarps> topk(topk_shared, p.cand, p.rows);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int mtile = warp & 1, part = warp >> 1;
  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kStreamTileRows - 1) / kStreamTileRows;
  const int groups = p.cols / p.group;
  constexpr int words_per_group = WPG;
  const StreamLayout L = stream_layout(p.cols, p.group, NT);
  uint2* frags = reinterpret_cast<uint2*>(smem);
  int32_t* seeds = reinterpret_cast<int32_t*>(smem + L.frag_bytes);
  float4* partials = reinterpret_cast<float4*>(smem + L.frag_bytes + L.seed_bytes);
  const int partial_buffer = kStreamParts * 2 * NT * 32;  // float4s per buffer
  unsigned char* stages = smem + L.fixed_bytes;
  const int S = p.stages;
  const CopyPlan copies = plan_copies(p, L);

  // Both sides of the pipeline walk pointers: no division and no 64-bit
  // multiply per tile (the copy issue took a fifth of the instructions at
  // M = 1 in run 21's profile).
  unsigned char* const stages_end = stages + S * L.stage_bytes;
  unsigned char* next_stage = stages;
  const unsigned char* next_signs =
      reinterpret_cast<const unsigned char*>(p.wq + int64_t(row_begin) * p.wq_stride);
  const unsigned char* next_scales =
      reinterpret_cast<const unsigned char*>(p.wscale + int64_t(row_begin) * p.wscale_stride);
  const int64_t sign_step = int64_t(kStreamTileRows) * p.wq_stride * 4;
  const int64_t scale_step = int64_t(kStreamTileRows) * p.wscale_stride * 2;
  int next_row = row_begin;
  auto issue = [&]() {
    if (next_row < row_end) {
      stream_stage(p, L, copies, next_stage, next_signs, next_scales,
                   min(kStreamTileRows, row_end - next_row));
      next_signs += sign_step;
      next_scales += scale_step;
      next_row += kStreamTileRows;
      next_stage += L.stage_bytes;
      if (next_stage == stages_end) next_stage = stages;
    }
    cp_async_commit();
  };
  for (int i = 0; i < S - 1; ++i) issue();

  // While the first stages load: the B fragments in the MMA's K order
  // (cuda/lm_head_binary.cuh), token rows past the pass as zeros, and the seeds
  // (each fragment word's bytes taken off its group's seed by an integer
  // atomic: exact in any order). The loads of a batch go out before any is
  // used: a dependent round trip per element cost ~10 us at W1 (run 21).
  for (int e = threadIdx.x; e < groups * 16; e += kStreamThreads) seeds[e] = kMagicBits;
  __syncthreads();
  const int elements = (p.cols / 32) * NT * 32 * 2;
  constexpr int kBatch = 4;
  for (int e0 = threadIdx.x; e0 < elements; e0 += kBatch * kStreamThreads) {
    int8_t bytes[kBatch][4];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * kStreamThreads;
      const int half = e & 1, ln = (e >> 1) & 31, rest = e >> 6;
      const int nt = rest % NT, ks = rest / NT;
      const int m = nt * 8 + (ln >> 2);
      const int gi = ks / words_per_group, j = ks - gi * words_per_group;
      const int8_t* a = p.act_q + int64_t(m) * p.act_stride + gi * p.group;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int pos = 32 * j + 8 * (ln & 3) + 4 * half + i;
        bytes[b][i] = e < elements && m < p.rows ? a[binary_permuted_column(words_per_group, pos)] : int8_t(0);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * kStreamThreads;
      if (e >= elements) break;
      const int half = e & 1, ln = (e >> 1) & 31, rest = e >> 6;
      const int nt = rest % NT, ks = rest / NT;
      const int m = nt * 8 + (ln >> 2);
      uint32_t packed = 0;
      int32_t sum = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        packed |= uint32_t(uint8_t(bytes[b][i])) << (8 * i);
        sum += bytes[b][i];
      }
      reinterpret_cast<uint32_t*>(frags)[2 * ((ks * NT + nt) * 32 + ln) + half] = packed;
      if (m < p.rows) atomicAdd(&seeds[(ks / words_per_group) * 16 + m], -64 * sum);
    }
  }

  // The scores of tile q meet in partial buffer q & 1 and are reduced and
  // offered during tile q + 1 by a few warps (one per 32 x 1 scores, up to 4;
  // the groups take turns), so a tile costs one CTA barrier; the top-k
  // buffers are cut every kStreamTilesPerCut tiles.
  const int reducers = p.rows >= 4 ? 4 : p.rows >= 2 ? 2 : 1;
  const int turns = kStreamWarps / reducers;  // reducer groups taking turns
  const int my_turn = warp / reducers, my_first = (warp % reducers) * 32 + lane;
  static_assert(kStreamTileRows == 32, "score e of a tile is row e % 32 of token row e / 32");
  auto reduce_and_offer = [&](int q, int first, int step) {
    const int tile_row0 = row_begin + q * kStreamTileRows;
    const float4* buf = partials + (q & 1) * partial_buffer;
    for (int e = first; e < kStreamTileRows * p.rows; e += step) {
      const int r = e & 31, m = e >> 5;
      const int row = tile_row0 + r;
      if (row >= row_end) continue;
      const int mt = r >> 4, rg = r & 7, hi = (r >> 3) & 1;
      const int nt = m >> 3, ln = rg * 4 + ((m & 7) >> 1), reg = 2 * hi + (m & 1);
      float sum = 0.0f;
      for (int pt = 0; pt < kStreamParts; ++pt) {
        const float* v = reinterpret_cast<const float*>(&buf[((pt * 2 + mt) * NT + nt) * 32 + ln]);
        sum += v[reg];
      }
      topk.offer(m, add_bias(p.act_scale[m] * 0.015625f * sum, p.bias, row), row);
    }
  };

  int turn = 0;  // the reducer group of tile q - 1
  const unsigned char* stage = stages;
  for (int q = 0; q < n_tiles; ++q) {
    cp_async_wait_pending(S - 2);
    __syncthreads();
    issue();
    if (q > 0) {
      if (my_turn == turn) reduce_and_offer(q - 1, my_first, reducers * 32);
      turn = turn + 1 == turns ? 0 : turn + 1;
    }
    if (q > 0 && q % kStreamTilesPerCut == 0) topk.end_tile(kStreamTilesPerCut * kStreamTileRows, false);

    const unsigned char* signs = stage + (mtile * 16 + g) * L.sign_stride;
    const unsigned char* scales = stage + kStreamTileRows * L.sign_stride + (mtile * 16 + g) * L.scale_stride;
    float4* partial_out = partials + (q & 1) * partial_buffer + (part * 2 + mtile) * NT * 32 + lane;

    float out[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) out[nt][i] = 0.0f;

    const unsigned char* sign_lo = signs + 4 * (part * WPG + t);
    const uint2* frag = frags + (part * WPG * NT) * 32 + lane;
    const int32_t* seed = seeds + part * 16 + 2 * t;
    for (int gi = part; gi < groups; gi += kStreamParts) {
      // Even and odd k-steps accumulate apart (two MMA chains of half the
      // latency); only the even chain carries the seed.
      int32_t acc[2][NT][4];
#pragma unroll
      for (int wb = 0; wb < WPG; wb += 4) {
        const uint32_t w_lo = *reinterpret_cast<const uint32_t*>(sign_lo + 4 * wb);
        const uint32_t w_hi = *reinterpret_cast<const uint32_t*>(sign_lo + 8 * L.sign_stride + 4 * wb);
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          const int shift = 7 - 2 * jj;
          const uint32_t a[4] = {(w_lo << shift) & 0x80808080u, (w_hi << shift) & 0x80808080u,
                                 (w_lo << (shift - 1)) & 0x80808080u,
                                 (w_hi << (shift - 1)) & 0x80808080u};
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint2 b = frag[((wb + jj) * NT + nt) * 32];
            int32_t(&chain)[4] = acc[jj & 1][nt];
            if (wb == 0 && jj == 0) {
              const int2 sd = *reinterpret_cast<const int2*>(seed + nt * 8);
              const int32_t c[4] = {sd.x, sd.y, sd.x, sd.y};
              mma_u8s8_16832(chain, a, b.x, b.y, c);
            } else if (wb == 0 && jj == 1) {
              const int32_t zero[4] = {0, 0, 0, 0};
              mma_u8s8_16832(chain, a, b.x, b.y, zero);
            } else {
              mma_u8s8_16832(chain, a, b.x, b.y, chain);
            }
          }
        }
      }
      sign_lo += 4 * kStreamParts * WPG;
      frag += kStreamParts * WPG * NT * 32;
      seed += kStreamParts * 16;
      const float s_lo = __half2float(*reinterpret_cast<const __half*>(scales + 2 * gi));
      const float s_hi = __half2float(*reinterpret_cast<const __half*>(scales + 8 * L.scale_stride + 2 * gi));
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          out[nt][i] = fmaf(i < 2 ? s_lo : s_hi,
                            __int_as_float(acc[0][nt][i] + acc[1][nt][i]) - kMagicValue, out[nt][i]);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      partial_out[nt * 32] = make_float4(out[nt][0], out[nt][1], out[nt][2], out[nt][3]);
    stage += L.stage_bytes;
    if (stage == stages_end) stage = stages;
  }
  __syncthreads();
  if (n_tiles > 0) reduce_and_offer(n_tiles - 1, threadIdx.x, kStreamThreads);
  topk.end_tile(kStreamTileRows, true);
  cp_async_wait<0>();
}

}  // namespace nt::cuda::lm_head
