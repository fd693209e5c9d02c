// Top-k warps: the warps of a scoring kernel that keep its CTA's top-k
// (cuda/topk_cta.cuh) while the scoring warps go on multiplying. After each
// tile the scoring warps write every score of the tile to a shared-memory
// buffer, [token row][kTileRows floats + 4] (a warp's stores of one MMA
// accumulator, rows g and token rows 2t, fall in banks 8t + g, all distinct),
// and arrive at `full` (every scoring thread); the top-k warps take what
// enters from the buffer, arrive at `empty` (every top-k thread) and cut
// their lists while the scoring warps fill the next tile. Inline, the scoring
// warps' offers and cuts stalled the tensor cores at every tile end and, once
// the copy ring was full, the copies too (run 54: W2 M=64 800 -> 667 us, W1
// M=64 372 -> 249 us with that upkeep skipped). Three warps offering every
// score and cutting every list as the inline upkeep does ran far slower
// (run 55: W1 M=64 803 us, W2 M=64 902): a cut reads and rewrites a list in
// global memory, ~10 us a row under the weight stream. With at most k
// entering a tile (below) they are still slower than inline (run 56: W2
// M=64 821 us against 798, W1 M=16 267 against 162, M=64 786 against 362),
// so they are opt-in (NEXTTOK_CUDA_LM_HEAD_TOPK=warps): the dense ring loses
// two of its five stages to the buffer at M=64; why the binary kernel loses
// 100 us even at M=16 is not yet known.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cuda/async_copy.cuh"
#include "cuda/timeline.cuh"
#include "cuda/topk_cta.cuh"

namespace nt::cuda::topk {

// NEXTTOK_CUDA_LM_HEAD_TOPK=warps: the sm_90 LM-head kernels hand their
// tiles to top-k warps (opt-in: slower at every M as measured, run 57; read
// on every call).
inline bool lm_head_topk_warps() {
  const char* v = std::getenv("NEXTTOK_CUDA_LM_HEAD_TOPK");
  return v != nullptr && std::strcmp(v, "warps") == 0;
}

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
// tile by tile, each token row's scores (token row m by warp m % kTopkWarps,
// as score_of(token row, raw score, vocabulary row)) read from the buffer into
// registers; of those above the row's threshold at most k enter its list: the
// tile's k best by a radix select in registers where more are above, and the
// threshold rises to the key of the tile's k-th best (a lower bound of the
// CTA's k-th best; a later equal key has a larger index, so it ranks below
// the k that set it). At most k a tile enter, so the lists are cut (in
// global memory, the slow part of the inline upkeep) only when k more would
// not fit, and at the end.
template <int kBarrier, class ScoreOf>
__device__ void keep_tiles(CtaShared<kTopkWarps>& shared, const CandidateArgs& args, int rows, const float* scores,
                           uint64_t* full, uint64_t* empty, int row_begin, int row_end, ScoreOf&& score_of) {
  constexpr int kPerLane = kScoreTileRows / 32;
  CtaTopk<kTopkWarps, kBarrier> topk(shared, args, rows);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_tiles = (row_end - row_begin + kScoreTileRows - 1) / kScoreTileRows;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile_row0 = row_begin + tile * kScoreTileRows;
    const int valid = min(kScoreTileRows, row_end - tile_row0);
    [[maybe_unused]] const long long waited = NT_TIMELINE_CLOCK();
    mbarrier_wait(full, uint32_t(tile & 1));
    NT_TIMELINE_ADD(phase::kTileWait, waited);
    [[maybe_unused]] const long long selected = NT_TIMELINE_CLOCK();
    for (int m = warp; m < rows; m += kTopkWarps) {
      const float* row = scores + m * kScoreStride;
      const uint32_t floor = shared.threshold[m];
      uint64_t rank[kPerLane];
      float value[kPerLane];
      int above = 0;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int r = lane + 32 * j;
        value[j] = r < valid ? score_of(m, row[r], tile_row0 + r) : 0.0f;
        rank[j] = r < valid && nt_order_key(value[j]) > floor ? rank_of(value[j], tile_row0 + r) : 0ull;
        above += __popc(__ballot_sync(0xffffffffu, rank[j] != 0ull));
      }
      if (above == 0) continue;
      uint64_t bound = 1;  // every rank above the threshold
      if (above > args.k)
        bound = warp_register_rank_threshold(rank, args.k, shared.hist[warp]);
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        topk.append_warp(m, rank[j] >= bound, value[j], tile_row0 + lane + 32 * j);
      if (above > args.k && lane == 0) shared.threshold[m] = max(floor, uint32_t(bound >> 32));
    }
    mbarrier_arrive(empty);  // every thread, after its last read of the buffer
    NT_TIMELINE_ADD(phase::kSelect, selected);
    [[maybe_unused]] const long long cut = NT_TIMELINE_CLOCK();
    topk.end_tile(args.k, tile == n_tiles - 1);  // at most k more a row next tile
    NT_TIMELINE_ADD(tile == n_tiles - 1 ? phase::kLastCut : phase::kCut, cut);
  }
}

}  // namespace nt::cuda::topk
