// binary_wgmma_bulk_kernel (sm_90a), the binary head's pass kernel for calls
// of more than 2 rows whose shape it takes (lm_head_topk_binary.cu,
// wgmma_bulk_takes), fed by bulk tensor copies.
//
// binary_mma_kernel's tiles (256 rows), chunks (512 columns) and arithmetic,
// with one warpgroup MMA (m64 x 8NT x k32) where that kernel issues NT warp
// MMAs of 8 token rows each. Four scoring warpgroups (16 warps) each take one
// m64 block of a tile. A, the signs, comes from registers as bytes +-64:
// ((w << (7 - c)) & 0x80808080) ^ 0xC0C0C0C0 maps bit 1 to 0x40 and bit 0 to
// 0xC0, so the MMA (s8 x s8) yields 64 * D directly, made an exact float
// through kMagicBits: the same integers, hence the same fp32 scores, as
// binary_mma_kernel's seeded accumulators. B, the activations, sits in the
// MMA's K order (binary_k_order_column) in 128-byte swizzled boxes of
// 128 columns x 8NT rows.
//
// One lane of a fifth warpgroup issues every copy: per chunk, the tile's sign
// words as four 64-row boxes (64 bytes a row, 64-byte swizzle: piece c of row
// r at c ^ ((r / 2) % 4)) and the pass's activations as the four boxes above;
// per tile, the scale rows as four 64-row boxes into one of two tile buffers.
// Stages and scale buffers are handed over by mbarriers (no CTA barrier per
// chunk). Boxes past the CTA's rows are not loaded; sign and scale boxes are
// copied L2 evict-first (weights_l2_policy).
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/async_copy.cuh"
#include "cuda/lm_head_binary.cuh"
#include "cuda/lm_head_binary_pass.cuh"
#include "cuda/lm_head_device.cuh"
#include "cuda/topk_cta.cuh"
#include "cuda/wgmma.cuh"

namespace nt::cuda::lm_head {

constexpr int kWgmmaWarps = 16;  // the scoring warps
constexpr int kWgmmaThreads = kWgmmaWarps * 32;

// `flip` is 0xC0C0C0C0 read from the parameters (BinaryParams::sign_flip):
// with both masks immediates ptxas splits the AND and the XOR into two LOP3s
// (an instruction has one immediate), and folds any constant it can see.
__device__ __forceinline__ uint32_t signs_as_pm64(uint32_t w, int shift, uint32_t flip) {
  return ((w << shift) & 0x80808080u) ^ flip;
}

// A group's A registers from its sign words w_lo/w_hi[wb] (word t + 4wb,
// classes 2jj and 2jj + 1 at k-step 4wb + jj).
template <int kSteps>
__device__ __forceinline__ void wgmma_group_signs(uint32_t (&a)[kSteps][4], const uint32_t (&w_lo)[kSteps / 4],
                                                  const uint32_t (&w_hi)[kSteps / 4], uint32_t flip) {
#pragma unroll
  for (int wb = 0; wb < kSteps / 4; ++wb)
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      uint32_t(&r)[4] = a[4 * wb + jj];
      r[0] = signs_as_pm64(w_lo[wb], 7 - 2 * jj, flip);
      r[1] = signs_as_pm64(w_hi[wb], 7 - 2 * jj, flip);
      r[2] = signs_as_pm64(w_lo[wb], 6 - 2 * jj, flip);
      r[3] = signs_as_pm64(w_hi[wb], 6 - 2 * jj, flip);
    }
}

// The group's kSteps MMAs of N token rows (B from act_desc on), committed as one group.
template <int N, int kSteps>
__device__ __forceinline__ void wgmma_group_mmas(int32_t (&acc)[N / 2], const uint32_t (&a)[kSteps][4],
                                                 uint64_t act_desc, int box_bytes, int col0) {
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const int col = col0 + 32 * j;
    wgmma_s8_m64k32<N>(acc, a[j], act_desc + uint64_t(((col >> 7) * box_bytes + (col & 127)) >> 4), j > 0);
  }
  wgmma_commit();
}

// One group of a warp's 16 rows (rows g and g + 8 of the m64 block's warp
// slice) against all token rows, issued: A from the group's sign words into
// `a`, then its kSteps MMAs on B from act_desc (column `col0` of the chunk
// onward; boxes of 128 columns, box_bytes apart) into `acc`, the first k-step
// starting it from zero. `a` and `acc` belong to the MMAs until a wgmma_wait
// has retired them. No instruction may write `acc` before the MMAs: a register
// move there (seeding kMagicBits, say) makes ptxas wait for every MMA in flight.
template <int NT, int kSteps>
__device__ __forceinline__ void wgmma_group_issue(int32_t (&acc)[NT * 4], uint32_t (&a)[kSteps][4],
                                                  const uint32_t (&w_lo)[kSteps / 4],
                                                  const uint32_t (&w_hi)[kSteps / 4], uint64_t act_desc,
                                                  int box_bytes, int col0, uint32_t flip) {
  wgmma_group_signs<kSteps>(a, w_lo, w_hi, flip);
  wgmma_group_mmas<8 * NT, kSteps>(acc, a, act_desc, box_bytes, col0);
}

// A retired group's accumulators (64 * D) into the scores: out += s * D, rows
// g and g + 8 scaled by s_lo, s_hi; D exact as fp32 through kMagicBits (an
// integer add and a float subtract, as binary_mma_kernel's seeded sums).
// kCount n-tiles from out[kFirst] on (a group's MMAs in parts of the token rows).
template <int NT, int kFirst = 0, int kCount = NT>
__device__ __forceinline__ void wgmma_group_scale(float (&out)[NT][4], int32_t (&acc)[kCount * 4], float s_lo,
                                                  float s_hi) {
  wgmma_fence_operands(acc);
#pragma unroll
  for (int n = 0; n < kCount; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      out[kFirst + n][i] =
          fmaf(i < 2 ? s_lo : s_hi, __int_as_float(acc[4 * n + i] + kMagicBits) - kMagicValue, out[kFirst + n][i]);
}

// Warps 0-15 score and keep the top-k, and warp 16 of a fifth warpgroup
// copies; warps 17-19 only give their registers away. All 20 get 96
// registers a thread at launch; the copy warpgroup then keeps 24 and the
// scoring warpgroups take 112 (room for a second set of A registers and two
// halves of accumulators at M = 64, kHalves). A CTA's pool holds only what
// its own warps release, 128 x (96 - 24) = 9,216 >= 512 x (112 - 96): a claim
// beyond it would leave a warpgroup waiting for registers forever.
constexpr int kBulkThreads = kWgmmaThreads + 128;
constexpr int kCopyRegisters = 24;
constexpr int kScoringRegisters = 112;
// The launch's registers a thread (ptxas gives every bulk kernel the most
// its 640 threads allow) and what the claim takes from the release.
constexpr int kLaunchRegisters = (65536 / kBulkThreads) & ~7;
static_assert(kLaunchRegisters == 96 &&
                  kWgmmaThreads * (kScoringRegisters - kLaunchRegisters) <= 128 * (kLaunchRegisters - kCopyRegisters),
              "the scoring warpgroups' claim must fit in what the copy warpgroup releases");
using BulkTopkShared = topk::CtaShared<kWgmmaWarps>;
constexpr int kBulkTopkBarrier = 1;  // named barrier of the scoring warps
constexpr int kBulkBoxRows = 64;
constexpr int kBulkSignBoxBytes = kBulkBoxRows * (kChunkCols / 8);

struct BinaryBulkParams {
  CUtensorMap sign_map;   // [V, H / 16] 16-bit units: boxes of 64 rows x 64 bytes, 64-byte swizzle
  CUtensorMap scale_map;  // [V, H / G] halves: boxes of 64 whole rows
  CUtensorMap act_map;    // the pass's [rows, padded H / 2] 16-bit units: boxes of 8NT rows x 128 bytes, swizzled
  BinaryParams b;
};

struct BulkLayout {
  int box_bytes, stage_bytes, scale_row_bytes, scale_bytes;
};

__host__ __device__ inline BulkLayout bulk_layout(int cols, int group, int nt) {
  BulkLayout l;
  l.box_bytes = nt * 8 * 128;
  l.stage_bytes = (kTileRows / kBulkBoxRows) * kBulkSignBoxBytes + (kChunkCols / 128) * l.box_bytes;
  l.scale_row_bytes = 2 * (cols / group);
  l.scale_bytes = (kTileRows * l.scale_row_bytes + 1023) / 1024 * 1024;
  return l;
}

// How a chunk's groups keep MMAs in flight while the previous ones are
// scaled:
// - two groups (kTwoGroupsInFlight): a second set of accumulators and A
//   registers (NT * 4 + kSteps * 4 a set), which leaves the MMAs unserialized
//   (ptxas serializes them where the sets do not fit: C7512) while a set is at
//   most 32 registers: at G = 128 and NT <= 4;
// - halves (NT = 8, G = 128): a group's MMAs in two halves of 32 token rows,
//   one half's flush running while the other half's MMAs do, and the next
//   group's signs expanded into a second set of A registers;
// - otherwise (G = 256) one group at a time.
template <int NT, int kSteps>
constexpr bool kTwoGroupsInFlight = NT * 4 + kSteps * 4 <= 32;
template <int NT, int kSteps>
constexpr bool kHalves = NT == 8 && kSteps == 4;

// kSteps = G / 32 k-steps per group (G = 128 or 256).
template <int NT, int kSteps, bool kScores>
__global__ void __launch_bounds__(kBulkThreads, 1)
    binary_wgmma_bulk_kernel(const __grid_constant__ BinaryBulkParams bp) {
  const BinaryParams& p = bp.b;
  extern __shared__ __align__(16) unsigned char bulk_smem[];
  __shared__ BulkTopkShared topk_shared;
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages], scale_full[2], scale_empty[2];
  unsigned char* smem = align_shared(bulk_smem, 1024);
  const BulkLayout B = bulk_layout(p.cols, p.group, NT);
  const int S = p.stages;
  unsigned char* scale_buf = smem + S * B.stage_bytes;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row_begin = blockIdx.x * p.rows_per_cta;
  const int row_end = min(p.vocab, row_begin + p.rows_per_cta);
  const int n_tiles = (row_end - row_begin + kTileRows - 1) / kTileRows;
  const int n_chunks = p.cols / kChunkCols;
  constexpr int kGroupsPerChunk = kChunkCols / (32 * kSteps);
  static_assert(kGroupsPerChunk == 2 || kGroupsPerChunk == 4, "G = 128 or 256 in 512-column chunks");

  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) {
      mbarrier_init(&full[i], 1);
      mbarrier_init(&empty[i], kWgmmaWarps);
    }
    for (int i = 0; i < 2; ++i) {
      mbarrier_init(&scale_full[i], 1);
      mbarrier_init(&scale_empty[i], kWgmmaWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  // The copy warp: one lane issues every copy. (Its warpgroup's release and
  // the scoring warpgroups' claim below each dominate only their own code,
  // so ptxas allocates each within its budget.)
  if (warp >= kWgmmaWarps) {
    warpgroup_registers_release<kCopyRegisters>();
    if (warp != kWgmmaWarps || lane != 0) return;
    tma_prefetch_map(&bp.sign_map);
    tma_prefetch_map(&bp.scale_map);
    tma_prefetch_map(&bp.act_map);
    const uint64_t policy = weights_l2_policy();
    int slot = 0;
    uint32_t phase = 0;
    for (int tile = 0; tile < n_tiles; ++tile) {
      const int row0 = row_begin + tile * kTileRows;
      const int boxes = min(kTileRows / kBulkBoxRows, (row_end - row0 + kBulkBoxRows - 1) / kBulkBoxRows);
      const int sb = tile & 1;
      mbarrier_wait(&scale_empty[sb], ((tile >> 1) & 1) ^ 1u);
      unsigned char* scales = scale_buf + sb * B.scale_bytes;
      mbarrier_arrive_expect_tx(&scale_full[sb], uint32_t(boxes * kBulkBoxRows * B.scale_row_bytes));
      for (int b = 0; b < boxes; ++b)
        tma_load_2d_weights(scales + b * kBulkBoxRows * B.scale_row_bytes, &bp.scale_map, 0,
                            row0 + b * kBulkBoxRows, &scale_full[sb], policy);
      for (int ch = 0; ch < n_chunks; ++ch) {
        mbarrier_wait(&empty[slot], phase ^ 1u);
        unsigned char* stage = smem + slot * B.stage_bytes;
        mbarrier_arrive_expect_tx(&full[slot], uint32_t(boxes * kBulkSignBoxBytes + 4 * B.box_bytes));
        for (int b = 0; b < boxes; ++b)
          tma_load_2d_weights(stage + b * kBulkSignBoxBytes, &bp.sign_map, ch * (kChunkCols / 16),
                              row0 + b * kBulkBoxRows, &full[slot], policy);
        unsigned char* act = stage + (kTileRows / kBulkBoxRows) * kBulkSignBoxBytes;
        for (int b = 0; b < kChunkCols / 128; ++b)
          tma_load_2d(act + b * B.box_bytes, &bp.act_map, ch * (kChunkCols / 2) + 64 * b, 0, &full[slot]);
        if (++slot == S) {
          slot = 0;
          phase ^= 1u;
        }
      }
    }
    return;
  }
  warpgroup_registers_claim<kScoringRegisters>();
  topk::SinkOf<kScores, kWgmmaWarps, kBulkTopkBarrier> topk(topk_shared, p.cand, p.rows);
  float out[NT][4] = {};
  // Warp w scores tile rows 16w..16w+15 (warpgroup wg: rows [64wg, 64wg + 64)).
  // Rows g and g + 8 share their swizzle, (row / 2) % 4 = (g / 2) % 4.
  const int frag_row = 16 * warp + g;
  const int swz = (g >> 1) & 3;
  const uint32_t flip = p.sign_flip;
  int slot = 0;
  uint32_t phase = 0;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile_row0 = row_begin + tile * kTileRows;
    const int sb = tile & 1;
    mbarrier_wait(&scale_full[sb], (tile >> 1) & 1);
    const unsigned char* scales = scale_buf + sb * B.scale_bytes + frag_row * B.scale_row_bytes;
    for (int ch = 0; ch < n_chunks; ++ch) {
      mbarrier_wait(&full[slot], phase);
      const unsigned char* stage = smem + slot * B.stage_bytes;
      const unsigned char* signs = stage + frag_row * (kChunkCols / 8) + 4 * t;
      const uint64_t act_desc = wgmma_desc_sw128(smem_addr(stage + (kTileRows / kBulkBoxRows) * kBulkSignBoxBytes));
      const unsigned char* sc = scales + 2 * ch * kGroupsPerChunk;
      // Group gi of the chunk: its sign words and row scales, its MMAs issued.
      auto issue = [&](int gi, int32_t(&acc)[NT * 4], uint32_t(&a)[kSteps][4], float& s_lo, float& s_hi) {
        uint32_t w_lo[kSteps / 4], w_hi[kSteps / 4];
#pragma unroll
        for (int wb = 0; wb < kSteps / 4; ++wb) {
          const int piece = ((gi * kSteps) >> 2) + wb;  // 16-byte piece of the row: words 4 piece..4 piece + 3
          const unsigned char* w = signs + 16 * (piece ^ swz);
          w_lo[wb] = *reinterpret_cast<const uint32_t*>(w);
          w_hi[wb] = *reinterpret_cast<const uint32_t*>(w + 8 * (kChunkCols / 8));
        }
        s_lo = __half2float(*reinterpret_cast<const __half*>(sc + 2 * gi));
        s_hi = __half2float(*reinterpret_cast<const __half*>(sc + 2 * gi + 8 * B.scale_row_bytes));
        wgmma_group_issue<NT, kSteps>(acc, a, w_lo, w_hi, act_desc, B.box_bytes, gi * 32 * kSteps, flip);
      };
      if constexpr (kTwoGroupsInFlight<NT, kSteps>) {
        static_assert(kGroupsPerChunk == 4, "the groups below are those of a chunk at G = 128");
        // Group gi + 1's MMAs run while group gi is scaled, two sets of
        // accumulators and A registers taking turns; the chunk ends with no
        // MMA in flight (one across the loop's back edge makes ptxas
        // serialize every MMA).
        int32_t acc0[NT * 4], acc1[NT * 4];
        uint32_t a0[kSteps][4], a1[kSteps][4];
        float s0_lo, s0_hi, s1_lo, s1_hi;
        issue(0, acc0, a0, s0_lo, s0_hi);
        issue(1, acc1, a1, s1_lo, s1_hi);
        wgmma_wait<1>();
        wgmma_group_scale<NT>(out, acc0, s0_lo, s0_hi);
        issue(2, acc0, a0, s0_lo, s0_hi);
        wgmma_wait<1>();
        wgmma_group_scale<NT>(out, acc1, s1_lo, s1_hi);
        issue(3, acc1, a1, s1_lo, s1_hi);
        wgmma_wait<1>();
        wgmma_group_scale<NT>(out, acc0, s0_lo, s0_hi);
        wgmma_wait<0>();
        wgmma_group_scale<NT>(out, acc1, s1_lo, s1_hi);
      } else if constexpr (kHalves<NT, kSteps>) {
        // Group gi's halves lo (token rows 0-31) and hi (32-63); pending
        // commit groups at each wait, oldest first: lo(gi), hi(gi) at the
        // first, then hi(gi), lo(gi + 1) at the second. The chunk ends with
        // none in flight.
        constexpr int kHalfRows = 32;
        const uint64_t hi_desc = act_desc + uint64_t((kHalfRows * 128) >> 4);  // a 1024-byte multiple: same swizzle
        int32_t acc_lo[kHalfRows / 2], acc_hi[kHalfRows / 2];
        uint32_t a[2][kSteps][4];
        float s_lo[2], s_hi[2];
        auto load = [&](int gi) {
          uint32_t w_lo[kSteps / 4], w_hi[kSteps / 4];
#pragma unroll
          for (int wb = 0; wb < kSteps / 4; ++wb) {
            const int piece = ((gi * kSteps) >> 2) + wb;
            const unsigned char* w = signs + 16 * (piece ^ swz);
            w_lo[wb] = *reinterpret_cast<const uint32_t*>(w);
            w_hi[wb] = *reinterpret_cast<const uint32_t*>(w + 8 * (kChunkCols / 8));
          }
          s_lo[gi & 1] = __half2float(*reinterpret_cast<const __half*>(sc + 2 * gi));
          s_hi[gi & 1] = __half2float(*reinterpret_cast<const __half*>(sc + 2 * gi + 8 * B.scale_row_bytes));
          wgmma_group_signs<kSteps>(a[gi & 1], w_lo, w_hi, flip);
        };
        load(0);
        wgmma_group_mmas<kHalfRows, kSteps>(acc_lo, a[0], act_desc, B.box_bytes, 0);
        wgmma_group_mmas<kHalfRows, kSteps>(acc_hi, a[0], hi_desc, B.box_bytes, 0);
#pragma unroll
        for (int gi = 0; gi < kGroupsPerChunk; ++gi) {
          const bool more = gi + 1 < kGroupsPerChunk;
          wgmma_wait<1>();
          wgmma_group_scale<NT, 0, kHalfRows / 8>(out, acc_lo, s_lo[gi & 1], s_hi[gi & 1]);
          if (more) {
            load(gi + 1);
            wgmma_group_mmas<kHalfRows, kSteps>(acc_lo, a[(gi + 1) & 1], act_desc, B.box_bytes,
                                                (gi + 1) * 32 * kSteps);
            wgmma_wait<1>();
          } else {
            wgmma_wait<0>();
          }
          wgmma_group_scale<NT, kHalfRows / 8, kHalfRows / 8>(out, acc_hi, s_lo[gi & 1], s_hi[gi & 1]);
          if (more)
            wgmma_group_mmas<kHalfRows, kSteps>(acc_hi, a[(gi + 1) & 1], hi_desc, B.box_bytes,
                                                (gi + 1) * 32 * kSteps);
        }
      } else {
        // One group at a time.
#pragma unroll 1
        for (int gi = 0; gi < kGroupsPerChunk; ++gi) {
          int32_t acc[NT * 4];
          uint32_t a[kSteps][4];
          float s_lo, s_hi;
          issue(gi, acc, a, s_lo, s_hi);
          wgmma_wait<0>();
          wgmma_group_scale<NT>(out, acc, s_lo, s_hi);
        }
      }
      // The stage's reads (generic loads and the MMAs') are done: the copy
      // engine may refill it.
      __syncwarp();
      if (lane == 0) {
        fence_proxy_async_shared();
        mbarrier_arrive(&empty[slot]);
      }
      if (++slot == S) {
        slot = 0;
        phase ^= 1u;
      }
    }
    __syncwarp();
    if (lane == 0) {
      fence_proxy_async_shared();
      mbarrier_arrive(&scale_empty[sb]);
    }
    offer_block<NT>(topk, out, p, tile_row0 + frag_row, row_end, t);
    topk.end_tile(kTileRows, tile == n_tiles - 1);
  }
}

}  // namespace nt::cuda::lm_head
