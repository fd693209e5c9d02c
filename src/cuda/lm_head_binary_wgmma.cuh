// The binary head's warpgroup-MMA pass kernels (sm_90a): one fed by bulk
// tensor copies (the default for calls of more than 2 rows where it takes the
// shape), one by cp.async stages (passes of calls of more than 8 rows of any
// other shape). Included by
// cuda/lm_head_topk_binary.cu only.
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

// ---- warpgroup-MMA scoring kernel (sm_90a) -----------------------------------
//
// binary_mma_kernel's tiles, chunks, stage slices and arithmetic, with one
// warpgroup MMA (m64 x 8NT x k32) where that kernel issues NT warp MMAs of
// 8 token rows each, so the MMA count no longer grows with the token rows.
// Four warpgroups (16 warps: the expansion and scaling are issue-bound, and
// 8 warps left the schedulers waiting on dependent latencies, run 38) each take
// one m64 block of a 256-row tile. A, the signs, comes from registers as bytes
// +-64: ((w << (7 - c)) & 0x80808080) ^ 0xC0C0C0C0 maps bit 1 to 0x40 and bit
// 0 to 0xC0, so the MMA (s8 x s8) yields 64 * D directly, made an exact float
// through kMagicBits: the same integers, hence the same fp32 scores, as
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

// One group of a warp's 16 rows (rows g and g + 8 of the m64 block's warp
// slice) against all token rows, issued: A from the group's sign words
// w_lo/w_hi[wb] (word t + 4wb, classes 2jj and 2jj + 1 at k-step 4wb + jj)
// into `a`, the group's kSteps MMAs on B at the k-steps' offsets from act_desc
// (column `col0` of the chunk onward; boxes of 128 columns, box_bytes apart)
// into `acc` (the first k-step starts it from zero), committed as one group.
// `a` and `acc` belong to the MMAs until a wgmma_wait has retired them. No
// instruction writes `acc` before the MMAs: register moves there (seeding
// kMagicBits, as the kernel did first) made ptxas wait for every MMA in flight.
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

// One group issued, waited for and scaled.
template <int NT, int kSteps>
__device__ __forceinline__ void wgmma_group(float (&out)[NT][4], const uint32_t (&w_lo)[kSteps / 4],
                                            const uint32_t (&w_hi)[kSteps / 4], uint64_t act_desc, int box_bytes,
                                            int col0, float s_lo, float s_hi, uint32_t flip) {
  int32_t acc[NT * 4];
  uint32_t a[kSteps][4];
  wgmma_group_issue<NT, kSteps>(acc, a, w_lo, w_hi, act_desc, box_bytes, col0, flip);
  wgmma_wait<0>();
  wgmma_group_scale<NT>(out, acc, s_lo, s_hi);
}

// kSteps = G / 32 k-steps per group (G = 128 or 256).
template <int NT, int kSteps>
__global__ void __launch_bounds__(kWgmmaThreads, 1) binary_wgmma_kernel(BinaryParams p) {
  extern __shared__ __align__(16) unsigned char wgmma_smem[];
  __shared__ topk::CtaShared<kWgmmaWarps> topk_shared;
  topk::CtaTopk<kWgmmaWarps> topk(topk_shared, p.cand, p.rows);
  unsigned char* smem = align_shared(wgmma_smem, 1024);

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
  float out[NT][4] = {};
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
      uint32_t w_lo[kSteps / 4], w_hi[kSteps / 4];
#pragma unroll
      for (int wb = 0; wb < kSteps / 4; ++wb) {
        // word t (+4) of the group
        const unsigned char* w = sign_lo + stage_offset + 4 * (gi * kSteps + 4 * wb);
        w_lo[wb] = *reinterpret_cast<const uint32_t*>(w);
        w_hi[wb] = *reinterpret_cast<const uint32_t*>(w + 8 * kSignRowBytes);
      }
      const unsigned char* sc = smem + stage_offset + scale_lo + 2 * gi;
      const float s_lo = __half2float(*reinterpret_cast<const __half*>(sc));
      const float s_hi = __half2float(*reinterpret_cast<const __half*>(sc + 8 * L.scale_row_bytes));
      wgmma_group<NT, kSteps>(out, w_lo, w_hi, act_desc, K.box_bytes, gi * 32 * kSteps, s_lo, s_hi, flip);
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

// ---- the warpgroup-MMA kernel fed by bulk tensor copies ----------------------
//
// binary_wgmma_kernel with its stages filled by the copy engine: one lane of
// a fifth warpgroup issues, per chunk, the tile's sign words as four 64-row boxes (64 bytes a
// row, 64-byte swizzle: piece c of row r at c ^ ((r / 2) % 4), conflict-free
// word loads) and the pass's activations as the same four 128-byte swizzled
// boxes, and per tile the scale rows as four 64-row boxes into one of two
// tile buffers. Stages and scale buffers are handed over by mbarriers, so the
// scoring warps neither issue copies nor meet at a CTA barrier per chunk (in
// run 40 the copies, the proxy fence and the barrier were ~35% of the samples
// at W1 M=16; run 41: M=16 237.7 -> 188.4 us, M=64 448.9 -> 370.6). Boxes
// past the CTA's rows are not loaded. Whole chunks only (H % 512 == 0).

// Warps 0-15 score and keep the top-k, and warp 16 of a fifth warpgroup
// copies; warps 17-19 only give their registers away (below). All 20 get 96
// registers a thread at launch. (Top-k warps that kept the top-k from a
// score buffer while warps 4-19 scored were slower at every M, run 57: W1
// M=16 269 us against 163, M=64 786 against 362; removed after 49aa8c6.)
constexpr int kBulkThreads = kWgmmaThreads + 128;
// The copy warpgroup keeps 24 registers a thread and the scoring warpgroups
// take 112: a CTA's pool holds only what its own warps release,
// 128 x (96 - 24) = 9,216 >= 512 x (112 - 96). (Claiming 120 hung every
// call on the H200, run 78: three warpgroups got theirs, the fourth waited.)
// Room for a second set of A registers and two halves of accumulators at
// M = 64 (kHalves).
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

// Two groups in flight need a second set of accumulators and A registers
// (NT * 4 + kSteps * 4 a set): within the 96 registers the 17-warp kernel
// had (ptxas serializes the MMAs where they do not fit: C7512) at G = 128 and
// NT <= 4 only. (With the scoring warps' 112 this may now hold for more.)
template <int NT, int kSteps>
constexpr bool kTwoGroupsInFlight = NT * 4 + kSteps * 4 <= 32;

// kHalves (NT = 8, G = 128; NEXTTOK_CUDA_LM_HEAD_GROUPS=one pins the plain
// loop): a group's MMAs in two halves of 32 token rows, one half's flush
// running while the other half's MMAs do, and the next group's signs
// expanded into a second set of A registers, so a warpgroup always has MMAs
// in flight (one group at a time, run 77's profile: the MMAs' wait is the
// hottest stall at W1 M=64).
template <int NT, int kSteps, bool kHalves = false>
__global__ void __launch_bounds__(kBulkThreads, 1)
    binary_wgmma_bulk_kernel(const __grid_constant__ BinaryBulkParams bp) {
  static_assert(!kHalves || (NT == 8 && kSteps == 4), "halves: M = 64 passes at G = 128");
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
  topk::CtaTopk<kWgmmaWarps, kBulkTopkBarrier> topk(topk_shared, p.cand, p.rows);
  float out[NT][4] = {};
  // As in binary_wgmma_kernel: warp w scores tile rows 16w..16w+15. Rows g
  // and g + 8 share their swizzle, (row / 2) % 4 = (g / 2) % 4.
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
        // MMA in flight (one in flight across the loop's back edge made ptxas
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
      } else if constexpr (kHalves) {
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
        // One group at a time. Splitting each group's MMAs into two halves of
        // the token rows, the first half scaled while the second ran, measured
        // 376.6 us at W1 M=64 against 366.6 (runs 43, 42), in 96 registers with
        // one set of A registers (kHalves keeps two).
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
