// The binary head's kernel for passes of 1 or 2 token rows (decode): 1-bit
// MMAs on the bit planes of the activations, each warp owning whole
// vocabulary rows, so warps never wait for each other until the CTA's end.
//
// Arithmetic: the sign words are the A operand of an AND-popcount MMA
// (m16n8k128) as they lie in memory, and the 8 columns of B are the 8 two's
// complement bit planes of one token row's activations, so
// D[v][n] = popc(signs AND plane n) over a 128-column step. With c_n = 2^n
// (n < 7), c_7 = -128 and P_n = popc(plane n):
//   D = sum_j a_j s_j = sum_n c_n (2 D[v][n] - P_n),
// exact in int32. Lane t of a quad holds planes 2t and 2t + 1 and folds them
// with two IMADs onto a seed kMagicBits - c_2t P_2t - c_2t+1 P_2t+1 (each
// lane's share is itself a signed dot, so the shares stay small), reads the
// bits as a float (exact below 2^22), and one FFMA adds scale * share to the
// lane's score; the quad's shares meet once per tile. One MMA per group, token
// row and 16 vocabulary rows, with no expansion of the signs (the expanded-sign
// kernel of lm_head_binary_stream.cuh spends ~20 instructions per int8 MMA, of
// which 7 of 8 columns are padding at M = 1).
//
// Schedule: the CTA's vocabulary range goes in tiles of 16 rows, warp w of W
// taking tiles w, w + W, ... through its own cp.async stages (no CTA barrier
// per tile: with one, a quarter of the stall samples were that barrier, run
// 21), so the CTA still reads one contiguous stream. Each warp keeps its own exact top-k list per
// token row (offers above the warp's threshold, a warp-level radix cut when
// the list could overflow, cuda/topk_cta.cuh); at the end the CTA selects the
// k best of its warps' lists into its candidate slice for the merge
// (cuda/topk_merge.cuh), as every other scoring kernel does.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/lm_head_binary.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/topk_cta.cuh"
#include "cuda/topk_merge.cuh"

namespace nt::cuda::lm_head {

constexpr int kRowsWarps = 8;  // at most; the host picks 4 or 8
constexpr int kRowsMaxThreads = kRowsWarps * 32;
constexpr int kRowsTile = 16;  // vocabulary rows per warp tile: one MMA m-tile
constexpr int kRowsMaxStages = 4;
constexpr int kRowsMaxTokenRows = 2;

struct BinaryRowsParams : BinaryOperands {
  int rows_per_cta;  // a multiple of kRowsTile
  int scale_copy;    // bytes per cp.async of a scale row: 16, 8 or 4, dividing the row
  int stages;        // per warp
  BiasArgs bias;
  topk::CandidateArgs cand;    // the CTAs' lists, read by the merge
  topk::Candidate* warp_cand;  // [CTA][warp][token row][warp_cap]
  int warp_cap;
};

struct RowsLayout {
  int sign_stride;   // bytes per staged sign row (word stride = 4 mod 32: no bank conflicts)
  int scale_stride;  // bytes per staged scale row (an odd count of 16-byte units)
  int stage_bytes;
  int frag_bytes;  // B fragments: [k-step of 128][token row][lane] x 4 bytes
  int seed_bytes;  // [group][token row][lane of a quad] x 4 bytes
  int fixed_bytes;
};

__host__ __device__ inline RowsLayout rows_layout(int cols, int group, int token_rows) {
  RowsLayout l;
  const int row_words = cols / 32;
  l.sign_stride = 4 * (row_words + ((36 - row_words % 32) % 32));
  int scale_units = (2 * (cols / group) + 15) / 16;
  if (scale_units % 2 == 0) ++scale_units;
  l.scale_stride = 16 * scale_units;
  l.stage_bytes = kRowsTile * (l.sign_stride + l.scale_stride);
  l.frag_bytes = cols * token_rows;
  l.seed_bytes = (cols / group) * token_rows * 16;
  l.fixed_bytes = l.frag_bytes + l.seed_bytes;
  return l;
}

// Dynamic shared memory of a CTA of `warps` warps with `stages` stages each.
__host__ __device__ inline int rows_smem_bytes(const RowsLayout& l, int warps, int stages) {
  return l.fixed_bytes + warps * stages * l.stage_bytes;
}

struct RowsShared {
  uint32_t threshold[kRowsWarps][kRowsMaxTokenRows];
  int32_t count[kRowsWarps][kRowsMaxTokenRows];
  uint32_t hist[kRowsWarps][256];
  topk::MergeShared select;
  int32_t gathered;
};

// The bit-plane coefficient c_n of plane n (see the top of the file).
__device__ __forceinline__ int32_t plane_coefficient(int n) { return n < 7 ? 1 << n : -128; }

// WPG: sign words per group (4 or 8: G = 128 or 256); R: token rows (1 or 2).
template <int WPG, int R>
__global__ void __launch_bounds__(kRowsMaxThreads, 1) binary_rows_kernel(BinaryRowsParams p) {
  allow_dependent_launch();  // the merge may be placed now (cuda/launch.cuh)
  static_assert(WPG == 4 || WPG == 8, "group of 128 or 256 columns");
  static_assert(R >= 1 && R <= kRowsMaxTokenRows, "token rows");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ RowsShared s;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int warps = blockDim.x >> 5;
  // Warp w takes tiles w, w + warps, ... of the CTA's range: the CTA reads one
  // contiguous stream, and each warp's rows still come in increasing order.
  const int cta_begin = blockIdx.x * p.rows_per_cta;
  const int cta_end = min(p.vocab, cta_begin + p.rows_per_cta);
  const int cta_tiles = (cta_end - cta_begin + kRowsTile - 1) / kRowsTile;
  const int n_tiles = cta_tiles > warp ? (cta_tiles - warp + warps - 1) / warps : 0;
  const int row_begin = cta_begin + warp * kRowsTile;
  const int row_step = warps * kRowsTile;
  const int groups = p.cols / p.group;
  const RowsLayout L = rows_layout(p.cols, p.group, R);
  uint32_t* frags = reinterpret_cast<uint32_t*>(smem);
  int32_t* seeds = reinterpret_cast<int32_t*>(smem + L.frag_bytes);
  const int S = p.stages;
  unsigned char* const stages = smem + L.fixed_bytes + warp * S * L.stage_bytes;
  unsigned char* const stages_end = stages + S * L.stage_bytes;

  // The warp's copies of a tile: lane l takes row l % 16 and every second
  // 16-byte piece of it from piece l / 16 (sign rows), the same for the scale
  // rows in scale_copy pieces, so a tile costs no division.
  const int copy_row = lane & 15, copy_first = lane >> 4;
  const int sign_pieces = p.cols / 128;
  const int scale_pieces = 2 * groups / p.scale_copy;
  const int64_t sign_row_bytes = p.wq_stride * 4, scale_row_bytes = p.wscale_stride * 2;
  const unsigned char* next_signs =
      reinterpret_cast<const unsigned char*>(p.wq) + (row_begin + copy_row) * sign_row_bytes;
  const unsigned char* next_scales =
      reinterpret_cast<const unsigned char*>(p.wscale) + (row_begin + copy_row) * scale_row_bytes;
  unsigned char* next_stage = stages;
  int next_row = row_begin;
  const int last_row = row_begin + n_tiles * row_step;  // past the warp's last tile
  auto issue = [&]() {
    if (next_row < last_row) {
      if (next_row + copy_row < cta_end) {
        unsigned char* sign_dst = next_stage + copy_row * L.sign_stride;
        for (int q = copy_first; q < sign_pieces; q += 2)
          cp_async(sign_dst + 16 * q, next_signs + 16 * q, 16, 16);
        unsigned char* scale_dst = next_stage + kRowsTile * L.sign_stride + copy_row * L.scale_stride;
        for (int q = copy_first; q < scale_pieces; q += 2)
          cp_async(scale_dst + p.scale_copy * q, next_scales + p.scale_copy * q, p.scale_copy, p.scale_copy);
      }
      next_signs += row_step * sign_row_bytes;
      next_scales += row_step * scale_row_bytes;
      next_row += row_step;
      next_stage += L.stage_bytes;
      if (next_stage == stages_end) next_stage = stages;
    }
    cp_async_commit();
  };
  for (int i = 0; i < S - 1; ++i) issue();

  // While the first stages load: the B fragments (one warp per 32-column
  // chunk of a token row: 8 ballots give its bit planes; lane n stores plane n
  // and takes its share off its quad lane's seed with an integer atomic, exact
  // in any order), token rows past the pass as zeros.
  for (int e = threadIdx.x; e < groups * R * 4; e += blockDim.x) seeds[e] = kMagicBits;
  if (lane < R) {
    s.count[warp][lane] = 0;
    s.threshold[warp][lane] = 0u;  // below every key: the first scores all enter
  }
  __syncthreads();
  // The loads of a batch go out before any is used (a dependent round trip
  // per chunk is microseconds while the first stages stream in).
  const int chunks = p.cols / 32;
  constexpr int kBatch = 16;
  for (int e0 = warp; e0 < chunks * R; e0 += kBatch * warps) {
    int act[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * warps, m = e / chunks, c = e - m * chunks;
      act[b] = e < chunks * R && m < p.rows ? int(p.act_q[int64_t(m) * p.act_stride + 32 * c + lane]) : 0;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * warps, m = e / chunks, c = e - m * chunks;
      if (e >= chunks * R) break;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const uint32_t bits = __ballot_sync(0xffffffffu, (act[b] >> n) & 1);
        if (lane == n) {
          frags[((c >> 2) * R + m) * 32 + n * 4 + (c & 3)] = bits;
          atomicAdd(&seeds[((c / WPG) * R + m) * 4 + (n >> 1)], -plane_coefficient(n) * __popc(bits));
        }
      }
    }
  }
  __syncthreads();

  // Lane t's plane weights 2 c_2t and 2 c_2t+1.
  const int32_t w0 = 2 * plane_coefficient(2 * t), w1 = 2 * plane_coefficient(2 * t + 1);
  topk::Candidate* lists = p.warp_cand + (size_t(blockIdx.x) * kRowsWarps + warp) * R * p.warp_cap;
  const unsigned char* stage = stages;
  for (int q = 0; q < n_tiles; ++q) {
    cp_async_wait_pending(S - 2);
    __syncwarp();  // every lane's copies of tile q landed, and tile q - 1 is read
    issue();

    const uint32_t* word = reinterpret_cast<const uint32_t*>(stage + g * L.sign_stride) + t;
    const uint16_t* scale = reinterpret_cast<const uint16_t*>(stage + kRowsTile * L.sign_stride +
                                                              g * L.scale_stride);
    const int hi_words = 2 * L.sign_stride;       // 8 rows on, in words
    const int hi_halves = 4 * L.scale_stride;     // 8 rows on, in halves
    const uint32_t* frag = frags + lane;
    const int32_t* seed = seeds + t;
    float lo[R], hi[R];
#pragma unroll
    for (int m = 0; m < R; ++m) lo[m] = hi[m] = 0.0f;
#pragma unroll 4
    for (int gi = 0; gi < groups; ++gi) {
      int32_t d[R][4];
#pragma unroll
      for (int h = 0; h < WPG / 4; ++h) {
        const uint32_t a_lo = word[4 * h], a_hi = word[hi_words + 4 * h];
#pragma unroll
        for (int m = 0; m < R; ++m) {
          if (h == 0) {
            const int32_t zero[4] = {0, 0, 0, 0};
            mma_and_popc_168128(d[m], a_lo, a_hi, frag[(h * R + m) * 32], zero);
          } else {
            mma_and_popc_168128(d[m], a_lo, a_hi, frag[(h * R + m) * 32], d[m]);
          }
        }
      }
      const float s_lo = __half2float(__ushort_as_half(scale[gi]));
      const float s_hi = __half2float(__ushort_as_half(scale[hi_halves + gi]));
#pragma unroll
      for (int m = 0; m < R; ++m) {
        const int32_t sd = seed[4 * m];
        const int32_t x_lo = d[m][1] * w1 + (d[m][0] * w0 + sd);
        const int32_t x_hi = d[m][3] * w1 + (d[m][2] * w0 + sd);
        lo[m] = fmaf(s_lo, __int_as_float(x_lo) - kMagicValue, lo[m]);
        hi[m] = fmaf(s_hi, __int_as_float(x_hi) - kMagicValue, hi[m]);
      }
      word += WPG;
      frag += (WPG / 4) * R * 32;
      seed += R * 4;
    }

    // The quad's shares meet (a fixed order: deterministic); lane t = 0 of
    // quad g offers rows g and g + 8 of the tile.
    const int tile_row0 = row_begin + q * row_step;
#pragma unroll
    for (int m = 0; m < R; ++m) {
      lo[m] += __shfl_xor_sync(0xffffffffu, lo[m], 1);
      lo[m] += __shfl_xor_sync(0xffffffffu, lo[m], 2);
      hi[m] += __shfl_xor_sync(0xffffffffu, hi[m], 1);
      hi[m] += __shfl_xor_sync(0xffffffffu, hi[m], 2);
      if (t == 0 && m < p.rows) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = tile_row0 + g + 8 * half;
          if (row >= cta_end) continue;
          const float score = add_bias(p.act_scale[m] * (half ? hi[m] : lo[m]), p.bias, row);
          // Rows come in increasing order: an equal key loses to the kept one.
          if (nt_order_key(score) > s.threshold[warp][m]) {
            const int slot = atomicAdd(&s.count[warp][m], 1);
            lists[size_t(m) * p.warp_cap + slot] = topk::Candidate{score, row};
          }
        }
      }
    }
    __syncwarp();
    // A list that could not take the next tile is cut back to its k best.
    for (int m = 0; m < p.rows; ++m) {
      const int count = s.count[warp][m];
      if (count > p.warp_cap - kRowsTile && count > p.cand.k) {
        const uint32_t key = topk::warp_compact<16>(lists + size_t(m) * p.warp_cap, count, p.cand.k,
                                                    s.hist[warp]);
        if (lane == 0) {
          s.count[warp][m] = p.cand.k;
          s.threshold[warp][m] = key;
        }
        __syncwarp();
      }
    }
    stage += L.stage_bytes;
    if (stage == stages_end) stage = stages;
  }
  cp_async_wait<0>();

  // The CTA's k best per token row over its warps' lists, into its slice of
  // the candidates (any order), with the key the merge may use as a floor.
  __syncthreads();
  for (int m = 0; m < p.rows; ++m) {
    int total = 0;
    for (int w = 0; w < warps; ++w) total += s.count[w][m];
    const topk::Candidate* list = lists + size_t(m) * p.warp_cap;
    const int n = s.count[warp][m];
    auto for_each = [&](auto&& f) {
      for (int i0 = 0; i0 < n; i0 += 32) {
        const int i = i0 + lane;
        const topk::Candidate c = i < n ? list[i] : topk::Candidate{0.0f, 0};
        f(i < n ? topk::rank_of(c.value, c.index) : 0ull, c.value);
      }
    };
    const bool cut = total > p.cand.k;
    const uint64_t threshold = cut ? topk::block_rank_threshold(for_each, p.cand.k, s.select) : 0ull;
    if (threadIdx.x == 0) s.gathered = 0;
    __syncthreads();
    topk::Candidate* out = p.cand.cand + (size_t(blockIdx.x) * p.cand.mp_stride + m) * p.cand.cap;
    for_each([&](uint64_t rank, float value) {
      if (rank != 0 && rank >= threshold) out[atomicAdd(&s.gathered, 1)] = topk::Candidate{value, topk::index_of(rank)};
    });
    __syncthreads();
    if (threadIdx.x == 0) {
      p.cand.counts[size_t(blockIdx.x) * p.cand.mp_stride + m] = s.gathered;
      p.cand.counts[(size_t(gridDim.x) + blockIdx.x) * p.cand.mp_stride + m] =
          cut ? int32_t(uint32_t(threshold >> 32)) : 0;
    }
    __syncthreads();  // s.gathered and s.select serve the next token row
  }
}

}  // namespace nt::cuda::lm_head
