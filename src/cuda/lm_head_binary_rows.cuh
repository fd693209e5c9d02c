// The binary head's kernel for calls of 1 or 2 token rows (decode), G = 128
// or 256: 1-bit MMAs on the bit planes of the activations, each warp owning
// whole vocabulary rows, so warps never wait for each other until the CTA's
// end.
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
// row and 16 vocabulary rows, with no expansion of the signs.
//
// Schedule: the CTA's vocabulary range goes in tiles of 16 rows, warp w of W
// taking tiles w, w + W, ... through its own stages (no CTA barrier per
// tile). On sm_90 a stage is filled by bulk tensor copies that one lane
// issues (signs in one, scales in another, L2 evict-first), elsewhere by
// cp.async pieces from every lane. Each warp keeps its own exact top-k list
// per token row (cuda/topk_cta.cuh); at the end the CTA selects the k best of
// its warps' lists into its candidate slice for the merge (cuda/topk_merge.cuh).
#pragma once

#include <cuda.h>  // CUtensorMap (types only)
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/lm_head_binary.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/topk_cta.cuh"
#include "cuda/topk_merge.cuh"

namespace nt::cuda::lm_head {

constexpr int kRowsWarps = 8;  // at most; the host picks 8, 6 or 4 (rows_config)
constexpr int kRowsMaxThreads = kRowsWarps * 32;
constexpr int kRowsTile = 16;  // vocabulary rows per warp tile: one MMA m-tile
constexpr int kRowsMaxStages = 4;
constexpr int kRowsMaxTokenRows = 2;

struct BinaryRowsParams : BinaryOperands {
  int rows_per_cta;  // a multiple of kRowsTile
  int scale_copy;    // bytes per cp.async of a scale row: 16, 8 or 4, dividing the row
  int stages;        // per warp
  // 1: stages filled by bulk tensor copies on the stage's mbarrier (sm_90
  // code; sign and scale rows at 16-byte aligned strides, scale rows a
  // multiple of 16 bytes); 0: by cp.async pieces.
  int tensor_copies;
  // encode_map_u16_lines' 3-D map of [V, H / 16] 16-bit units: one copy
  // brings a tile's signs as boxes of 16 rows x 128 bytes, swizzled.
  CUtensorMap sign_map;
  CUtensorMap scale_map;  // [V, H / G] halves: boxes of 16 whole rows
  BiasArgs bias;
  topk::CandidateArgs cand;    // the CTAs' lists, read by the merge
  topk::Candidate* warp_cand;  // [CTA][warp][token row][warp_stride]
  int warp_stride;             // a list is cut when it could not take the next tile
};

constexpr int kRowsBoxBytes = kRowsTile * 128;  // 16 rows x 1,024 columns of signs

// A stage holds a tile's signs as boxes of 16 rows x 128 bytes with the
// 128-byte swizzle (piece j of row r at j ^ (r % 8): the 8 rows a lane
// quad-column reads fall in 8 different bank groups), then its 16 scale rows.
// The bulk copies write that layout themselves and need 1,024-byte aligned
// stages; the cp.async pieces write it by the same formula.
struct RowsLayout {
  int boxes;         // sign boxes per stage (a partial last one when H % 1024 != 0)
  int sign_bytes;    // boxes * kRowsBoxBytes
  int scale_stride;  // bytes per staged scale row
  int stage_bytes;
  // Both padded to whole boxes, so a box's share is read by 16-byte loads:
  int frag_bytes;  // B fragments: [box][token row][half][lane][4 pieces] x 4 bytes
  int seed_bytes;  // [box][token row][lane of a quad][8 groups] x 4 bytes
  int fixed_bytes;
  int align;  // of the dynamic shared memory's first stage and fixed area
};

__host__ __device__ inline RowsLayout rows_layout(int cols, int group, int token_rows, bool tensor_copies) {
  RowsLayout l;
  l.boxes = (cols + 1023) / 1024;
  l.sign_bytes = l.boxes * kRowsBoxBytes;
  const int scale_row = 2 * (cols / group);
  l.frag_bytes = l.boxes * token_rows * 1024;
  l.seed_bytes = l.boxes * token_rows * 128;
  if (tensor_copies) {
    // Boxes of whole rows land unpadded.
    l.align = 1024;
    l.scale_stride = scale_row;
  } else {
    l.align = 16;
    int scale_units = (scale_row + 15) / 16;  // an odd count: 8 rows hit 8 banks
    if (scale_units % 2 == 0) ++scale_units;
    l.scale_stride = 16 * scale_units;
  }
  const int mask = l.align - 1;
  l.stage_bytes = (l.sign_bytes + kRowsTile * l.scale_stride + mask) & ~mask;
  l.fixed_bytes = (l.frag_bytes + l.seed_bytes + mask) & ~mask;
  return l;
}

// Dynamic shared memory of a CTA of `warps` warps with `stages` stages each
// (and the slack to align it).
__host__ __device__ inline int rows_smem_bytes(const RowsLayout& l, int warps, int stages) {
  return l.fixed_bytes + warps * stages * l.stage_bytes + (l.align > 16 ? l.align : 0);
}

struct RowsShared {
  uint64_t full[kRowsWarps][kRowsMaxStages];  // bulk tensor copies: a warp's stages
  uint32_t threshold[kRowsWarps][kRowsMaxTokenRows];
  int32_t count[kRowsWarps][kRowsMaxTokenRows];
  uint32_t hist[kRowsWarps][256];
  RadixScratch select;
  int32_t gathered;
};

// The bit-plane coefficient c_n of plane n (see the top of the file).
__device__ __forceinline__ int32_t plane_coefficient(int n) { return n < 7 ? 1 << n : -128; }

// The word of the B fragments that holds bit plane `plane` of 32-column
// chunk c of token row m: the lane that feeds it to the MMAs (column plane,
// k-chunk c % 4) reads its share of a box's 8 pieces as two 16-byte loads.
template <int R>
__device__ __forceinline__ int frag_word(int c, int m, int plane) {
  const int piece = c >> 2, box = piece >> 3, j = piece & 7;
  return ((box * R + m) * 2 + (j >> 2)) * 128 + (plane * 4 + (c & 3)) * 4 + (j & 3);
}

// WPG: sign words per group (4 or 8: G = 128 or 256); R: token rows (1 or 2);
// kScores: every score written to p.cand.scores instead of the top-k lists.
template <int WPG, int R, bool kScores>
__global__ void __launch_bounds__(kRowsMaxThreads, 1)
    binary_rows_kernel(const __grid_constant__ BinaryRowsParams p) {
  static_assert(WPG == 4 || WPG == 8, "group of 128 or 256 columns");
  static_assert(R >= 1 && R <= kRowsMaxTokenRows, "token rows");
  extern __shared__ __align__(16) unsigned char rows_smem[];
  __shared__ RowsShared s;
  const RowsLayout L = rows_layout(p.cols, p.group, R, p.tensor_copies != 0);
  unsigned char* const smem = align_shared(rows_smem, uint32_t(L.align));

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
  uint32_t* frags = reinterpret_cast<uint32_t*>(smem);
  int32_t* seeds = reinterpret_cast<int32_t*>(smem + L.frag_bytes);
  const int S = p.stages;
  unsigned char* const stages = smem + L.fixed_bytes + warp * S * L.stage_bytes;
  unsigned char* const stages_end = stages + S * L.stage_bytes;

  // The warp's copies of a tile. Bulk tensor copies: lane 0 issues one for
  // the tile's signs and one for its scales. Pieces: lane l takes row l % 16
  // and every second 16-byte piece of it from piece l / 16 (sign rows), the
  // same for the scale rows in scale_copy pieces.
  const int copy_row = lane & 15, copy_first = lane >> 4;
  const int sign_pieces = p.cols / 128;
  const int scale_pieces = 2 * groups / p.scale_copy;
  const int64_t sign_row_bytes = p.wq_stride * 4, scale_row_bytes = p.wscale_stride * 2;
  uint32_t piece_dst[4];  // of the lane's pieces copy_first + 2u in a box
#pragma unroll
  for (int u = 0; u < 4; ++u) piece_dst[u] = swizzled(copy_row, copy_first + 2 * u);
  const unsigned char* next_signs =
      reinterpret_cast<const unsigned char*>(p.wq) + (row_begin + copy_row) * sign_row_bytes;
  const unsigned char* next_scales =
      reinterpret_cast<const unsigned char*>(p.wscale) + (row_begin + copy_row) * scale_row_bytes;
  unsigned char* next_stage = stages;
  int next_slot = 0;
  int next_row = row_begin;
  const int last_row = row_begin + n_tiles * row_step;  // past the warp's last tile
  if (p.tensor_copies) {
    if (lane < S) mbarrier_init(&s.full[warp][lane], 1);
    if (lane == 0) {
      tma_prefetch_map(&p.sign_map);
      tma_prefetch_map(&p.scale_map);
    }
    mbarrier_init_fence();
    __syncwarp();
  }
  const uint64_t policy = weights_l2_policy();
  auto issue = [&]() {
    if (next_row < last_row) {
      if (p.tensor_copies) {
        if (lane == 0) {
          uint64_t* full = &s.full[warp][next_slot];
          // Boxes count whole, rows past V included (they land as zeros).
          mbarrier_arrive_expect_tx(full, uint32_t(L.sign_bytes + kRowsTile * L.scale_stride));
          fence_proxy_async_shared();  // the stage's last reads (before __syncwarp) come first
          tma_load_3d_weights(next_stage, &p.sign_map, 0, next_row, 0, full, policy);
          tma_load_2d_weights(next_stage + L.sign_bytes, &p.scale_map, 0, next_row, full, policy);
        }
        next_slot = next_slot + 1 == S ? 0 : next_slot + 1;
      } else if (next_row + copy_row < cta_end) {
        unsigned char* box = next_stage;
        for (int q0 = 0; q0 < sign_pieces; q0 += 8, box += kRowsBoxBytes) {
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            const int q = q0 + copy_first + 2 * u;
            if (q < sign_pieces) cp_async(box + piece_dst[u], next_signs + 16 * q, 16, 16);
          }
        }
        unsigned char* scale_dst = next_stage + L.sign_bytes + copy_row * L.scale_stride;
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

  // While the first stages load: the B fragments, one warp per 32-column
  // chunk of a token row (8 ballots give its bit planes, lane n < 8 stores
  // plane n), token rows past the pass as zeros; then the seeds from the
  // stored planes, one thread per (group, token row, quad lane).
  if (lane < R) {
    s.count[warp][lane] = 0;
    s.threshold[warp][lane] = 0u;  // below every key: the first scores all enter
  }
  // The loads of a batch go out before any is used.
  const int chunks = p.cols / 32;
  constexpr int kBatch = 24;
#pragma unroll
  for (int m = 0; m < R; ++m) {
    const int8_t* act_row = p.act_q + int64_t(m) * p.act_stride + lane;
    for (int c0 = warp; c0 < chunks; c0 += kBatch * warps) {
      int act[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int c = c0 + b * warps;
        act[b] = c < chunks && m < p.rows ? int(act_row[32 * c]) : 0;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int c = c0 + b * warps;
        if (c >= chunks) break;
        uint32_t plane = 0;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          const uint32_t bits = __ballot_sync(0xffffffffu, (act[b] & (1 << n)) != 0);
          plane = lane == n ? bits : plane;
        }
        if (lane < 8) frags[frag_word<R>(c, m, lane)] = plane;
      }
    }
  }
  __syncthreads();
  constexpr int kGroupsPerBox = 32 / WPG;
  for (int e = threadIdx.x; e < groups * R * 4; e += blockDim.x) {
    const int tq = e & 3, m = (e >> 2) % R, gi = (e >> 2) / R;
    int32_t seed = kMagicBits;
#pragma unroll
    for (int w = 0; w < WPG; ++w) {
      const int c = gi * WPG + w;
      seed -= plane_coefficient(2 * tq) * __popc(frags[frag_word<R>(c, m, 2 * tq)]) +
              plane_coefficient(2 * tq + 1) * __popc(frags[frag_word<R>(c, m, 2 * tq + 1)]);
    }
    const int box = gi / kGroupsPerBox;
    seeds[((box * R + m) * 4 + tq) * 8 + gi % kGroupsPerBox] = seed;
  }
  __syncthreads();

  // Lane t's plane weights 2 c_2t and 2 c_2t+1.
  const int32_t w0 = 2 * plane_coefficient(2 * t), w1 = 2 * plane_coefficient(2 * t + 1);
  float act_scale[R];
#pragma unroll
  for (int m = 0; m < R; ++m) act_scale[m] = m < p.rows ? p.act_scale[m] : 0.0f;
  topk::Candidate* lists =
      kScores ? nullptr : p.warp_cand + (size_t(blockIdx.x) * kRowsWarps + warp) * R * p.warp_stride;
  // ldmatrix addresses: lane l gives row (l % 8) + 8 ((l / 8) % 2) of piece
  // 2u + l / 16 of a box, so one x4 load hands lane (g, t) word t of rows g
  // and g + 8 of pieces 2u and 2u + 1 (the MMA's A registers for both).
  uint32_t a_offset[4];
  {
    const int line = (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int u = 0; u < 4; ++u) a_offset[u] = swizzled(line, 2 * u + (lane >> 4));
  }
  constexpr int kPiecesPerGroup = WPG / 4;
  const unsigned char* stage = stages;
  int wait_slot = 0;
  uint32_t wait_phase = 0;
  for (int q = 0; q < n_tiles; ++q) {
    if (p.tensor_copies) {
      mbarrier_wait(&s.full[warp][wait_slot], wait_phase);
      if (++wait_slot == S) {
        wait_slot = 0;
        wait_phase ^= 1u;
      }
    } else {
      cp_async_wait_pending(S - 2);
    }
    __syncwarp();  // tile q landed (every lane's copies), and tile q - 1 is read
    issue();

    float lo[R], hi[R];
#pragma unroll
    for (int m = 0; m < R; ++m) lo[m] = hi[m] = 0.0f;
    // The first groups_left groups of a box (all but in a partial last box):
    // signs by four ldmatrix, B fragments and seeds by 16-byte loads, the
    // scales of rows g and g + 8 by one load each. A partial box reads past
    // its last group within its own padded share and multiplies none of it.
    auto box_groups = [&](const unsigned char* box, const unsigned char* scale, const uint32_t* frag,
                          const int32_t* seed, int groups_left) {
      uint32_t a[8][2];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        uint32_t r[4];
        ldmatrix_x4(r, smem_addr(box + a_offset[u]));
        a[2 * u][0] = r[0];
        a[2 * u][1] = r[1];
        a[2 * u + 1][0] = r[2];
        a[2 * u + 1][1] = r[3];
      }
      uint32_t b[R][8];
      int32_t sd[R][8];
#pragma unroll
      for (int m = 0; m < R; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint4 v = *reinterpret_cast<const uint4*>(frag + (m * 2 + h) * 128);
          b[m][4 * h] = v.x;
          b[m][4 * h + 1] = v.y;
          b[m][4 * h + 2] = v.z;
          b[m][4 * h + 3] = v.w;
        }
#pragma unroll
        for (int h = 0; h < kGroupsPerBox / 4; ++h) {
          const int4 v = *reinterpret_cast<const int4*>(seed + m * 32 + 4 * h);
          sd[m][4 * h] = v.x;
          sd[m][4 * h + 1] = v.y;
          sd[m][4 * h + 2] = v.z;
          sd[m][4 * h + 3] = v.w;
        }
      }
      // kGroupsPerBox halves of rows g and g + 8.
      uint32_t s_lo[4], s_hi[4];
      if constexpr (kGroupsPerBox == 8) {
        const uint4 vl = *reinterpret_cast<const uint4*>(scale);
        const uint4 vh = *reinterpret_cast<const uint4*>(scale + 8 * L.scale_stride);
        s_lo[0] = vl.x, s_lo[1] = vl.y, s_lo[2] = vl.z, s_lo[3] = vl.w;
        s_hi[0] = vh.x, s_hi[1] = vh.y, s_hi[2] = vh.z, s_hi[3] = vh.w;
      } else {
        const uint2 vl = *reinterpret_cast<const uint2*>(scale);
        const uint2 vh = *reinterpret_cast<const uint2*>(scale + 8 * L.scale_stride);
        s_lo[0] = vl.x, s_lo[1] = vl.y, s_lo[2] = s_lo[3] = 0u;
        s_hi[0] = vh.x, s_hi[1] = vh.y, s_hi[2] = s_hi[3] = 0u;
      }
#pragma unroll
      for (int i = 0; i < kGroupsPerBox; ++i) {
        if (i >= groups_left) break;
        int32_t d[R][4];
#pragma unroll
        for (int h = 0; h < kPiecesPerGroup; ++h) {
          const int j = i * kPiecesPerGroup + h;
#pragma unroll
          for (int m = 0; m < R; ++m) {
            if (h == 0) {
              const int32_t zero[4] = {0, 0, 0, 0};
              mma_and_popc_168128(d[m], a[j][0], a[j][1], b[m][j], zero);
            } else {
              mma_and_popc_168128(d[m], a[j][0], a[j][1], b[m][j], d[m]);
            }
          }
        }
        const float sc_lo = __half2float(__ushort_as_half(uint16_t(s_lo[i >> 1] >> (16 * (i & 1)))));
        const float sc_hi = __half2float(__ushort_as_half(uint16_t(s_hi[i >> 1] >> (16 * (i & 1)))));
#pragma unroll
        for (int m = 0; m < R; ++m) {
          const int32_t x_lo = d[m][1] * w1 + (d[m][0] * w0 + sd[m][i]);
          const int32_t x_hi = d[m][3] * w1 + (d[m][2] * w0 + sd[m][i]);
          lo[m] = fmaf(sc_lo, __int_as_float(x_lo) - kMagicValue, lo[m]);
          hi[m] = fmaf(sc_hi, __int_as_float(x_hi) - kMagicValue, hi[m]);
        }
      }
    };
    const unsigned char* box = stage;
    const unsigned char* scale = stage + L.sign_bytes + g * L.scale_stride;
    const uint32_t* frag = frags + lane * 4;
    const int32_t* seed = seeds + t * 8;
    int groups_left = groups;
    for (; groups_left >= kGroupsPerBox; groups_left -= kGroupsPerBox) {
      box_groups(box, scale, frag, seed, kGroupsPerBox);
      box += kRowsBoxBytes;
      scale += 2 * kGroupsPerBox;
      frag += R * 256;
      seed += R * 32;
    }
    if (groups_left > 0) box_groups(box, scale, frag, seed, groups_left);

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
          const float score = add_bias(act_scale[m] * (half ? hi[m] : lo[m]), p.bias, row);
          if constexpr (kScores) {
            p.cand.scores[m * p.cand.score_stride + row] = score;
            continue;
          }
          // Rows come in increasing order: an equal key loses to the kept one.
          if (nt_order_key(score) > s.threshold[warp][m]) {
            const int slot = atomicAdd(&s.count[warp][m], 1);
            lists[size_t(m) * p.warp_stride + slot] = topk::Candidate{score, row};
          }
        }
      }
    }
    __syncwarp();
    // A list that could not take the next tile is cut back to its k best.
    for (int m = 0; m < (kScores ? 0 : p.rows); ++m) {
      const int count = s.count[warp][m];
      if (count > p.warp_stride - kRowsTile && count > p.cand.k) {
        const uint32_t key = topk::warp_compact<16>(lists + size_t(m) * p.warp_stride, count, p.cand.k,
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
  if constexpr (kScores) return;

  // The CTA's k best per token row over its warps' lists, into its slice of
  // the candidates (any order), with the key the merge may use as a floor.
  __syncthreads();
  for (int m = 0; m < p.rows; ++m) {
    int total = 0;
    for (int w = 0; w < warps; ++w) total += s.count[w][m];
    const topk::Candidate* list = lists + size_t(m) * p.warp_stride;
    const int n = s.count[warp][m];
    auto for_each = [&](auto&& f) {
      for (int i0 = 0; i0 < n; i0 += 32) {
        const int i = i0 + lane;
        const topk::Candidate c = i < n ? list[i] : topk::Candidate{0.0f, 0};
        f(i < n ? topk::rank_of(c.value, c.index) : 0ull, c.value);
      }
    };
    const bool cut = total > p.cand.k;
    const uint64_t threshold =
        cut ? block_rank_threshold(for_each, p.cand.k, s.select) : 0ull;
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
