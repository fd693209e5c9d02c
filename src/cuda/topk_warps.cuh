// Top-k warps: the warps of a scoring kernel that keep its CTA's top-k
// (cuda/topk_cta.cuh) while the scoring warps go on multiplying. After each
// tile the scoring warps write every score of the tile to a shared-memory
// buffer, [token row][kTileRows floats + 4] (a warp's stores of one MMA
// accumulator, rows g and token rows 2t, fall in banks 8t + g, all distinct),
// and arrive at `full` (every scoring thread); the top-k warps offer the
// buffer, arrive at `empty` (every top-k thread) and cut their lists while
// the scoring warps fill the next tile. Inline, the scoring warps' offers and
// cuts stalled the tensor cores at every tile end and, once the copy ring was
// full, the copies too (run 54: W2 M=64 800 -> 667 us, W1 M=64 372 -> 249 us
// with that upkeep skipped).
#pragma once

#include <cstdint>

#include "cuda/async_copy.cuh"
#include "cuda/topk_cta.cuh"

namespace nt::cuda::topk {

constexpr int kTopkWarps = 3;  // with a copy warp, one warpgroup beside the scoring warpgroups
constexpr int kScoreTileRows = 256;
constexpr int kScoreStride = kScoreTileRows + 4;

__host__ __device__ constexpr int score_buffer_bytes(int token_rows) {
  return token_rows * kScoreStride * int(sizeof(float));
}

// The buffer slot of one score: token row `tok`, tile row `row`.
__device__ __forceinline__ int score_slot(int tok, int row) { return tok * kScoreStride + row; }

// The scoring warps' side after a tile: wait until the top-k warps are done
// with the previous tile's buffer (write(scores) then stores this thread's
// scores), then hand the buffer over.
template <class Write>
__device__ __forceinline__ void hand_over_scores(int tile, uint64_t* full, uint64_t* empty, Write&& write) {
  mbarrier_wait(empty, uint32_t(tile & 1) ^ 1u);
  write();
  mbarrier_arrive(full);
}

// The top-k warps' side (threads [0, 32 kTopkWarps), named barrier kBarrier):
// tile by tile, every score of the tile's rows in the range, as
// score_of(token row, raw score, vocabulary row), offered (token row m by
// warp m % kTopkWarps), the buffer handed back, the lists cut.
template <int kBarrier, class ScoreOf>
__device__ void keep_tiles(CtaShared<kTopkWarps>& shared, const CandidateArgs& args, int rows, const float* scores,
                           uint64_t* full, uint64_t* empty, int row_begin, int row_end, ScoreOf&& score_of) {
  CtaTopk<kTopkWarps, kBarrier> topk(shared, args, rows);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_tiles = (row_end - row_begin + kScoreTileRows - 1) / kScoreTileRows;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile_row0 = row_begin + tile * kScoreTileRows;
    const int valid = min(kScoreTileRows, row_end - tile_row0);
    mbarrier_wait(full, uint32_t(tile & 1));
    for (int m = warp; m < rows; m += kTopkWarps) {
      const float* row = scores + m * kScoreStride;
#pragma unroll 4
      for (int r = lane; r < kScoreTileRows; r += 32) {
        const bool in = r < valid;
        topk.offer_warp(m, in, in ? score_of(m, row[r], tile_row0 + r) : 0.0f, tile_row0 + r);
      }
    }
    mbarrier_arrive(empty);  // every thread, after its last read of the buffer
    topk.end_tile(kScoreTileRows, tile == n_tiles - 1);
  }
}

}  // namespace nt::cuda::topk
