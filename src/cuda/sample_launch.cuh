// nt_sample's plan and launches (cuda/sample.cu), shared with the kernels of
// each logit layout (cuda/sample_kernels.cuh) and with nt_sample_logprobs
// (cuda/sample_logprobs.cu), whose kernels run after the sampler's on the same
// stream and read the row states it leaves in the workspace
// (RowState::keep_cut).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "core/check.h"
#include "cuda/sample_common.cuh"

namespace nt::cuda {

constexpr const char* kSampleOp = "sample";
// The general filtered scan's list and one tile, or the list scan's per-warp
// lists and radix histograms.
constexpr int kScanSmemBytes =
    std::max<int>((kMaxChunkCandidates + kTileTokens) * int(sizeof(u64)),
                  kScanThreads / 32 * (kListCap * int(sizeof(u64)) + 256 * int(sizeof(u32))));
constexpr int kMergeSmemBytes = (kMaxMerged + kSortCap) * int(sizeof(u64));
static_assert(kScanSmemBytes >= (kMaxChunkCandidates + kSortCap) * int(sizeof(u64)),
              "a one-chunk row's merge runs in the scan's shared memory");
static_assert(kScanSmemBytes >= kMergeSmemBytes,
              "a cluster's merge runs in its first scan CTA's shared memory");
// Chunks a row may take when they form one cluster: 16 where the device
// schedules clusters that large (a non-portable size), else the portable 8.
constexpr int kMaxClusterChunks = 16;

// The plan of one call, made once: how rows split into chunks and merge,
// which kernels run, and where their state lies in the workspace. The kernels:
// the scan (which merges one-chunk rows and, in clusters, merges and resolves
// the rows of small batches), the merge kernel for the other rows of several
// chunks, and, where a row may be flagged (fallback_needed) outside clusters,
// the cooperative flagged-row kernel (large keep-set path, then exact
// fallback), its two counts cleared before the merges (by the scan where the
// merge kernel merges, else by a memset).
struct SamplePlan {
  int mode = kAnyRow;  // RowClass of every row, or kAnyRow
  int splits = 1, chunk = 1, kchunk = 1;
  bool cluster = false;          // a row's chunks form one cluster that merges and resolves them
  bool filtered = true;          // some row may be filtered
  bool fallback_needed = true;   // some (filtered) row may keep more than its candidates
  bool row_mass = true;          // some filtered row's top-p is measured on the whole row
  size_t chunks_at = 0, candidates_at = 0, rows_at = 0, bytes = 0;
  size_t large_rows_at = 0, large_cnt_at = 0, large_mass_at = 0, large_cand_at = 0;
  size_t lists_at = 0;  // n_listed, n_flagged, listed[B], flagged[B]
  int large_splits = 1;
};

// What every launch of a call takes: its plan, the kernels' arguments, where.
struct SampleLaunch {
  const SamplePlan& plan;
  SampleArgs args;
  int device;
  cudaStream_t stream;
};

// nt_sample's kernels for one logit layout. Each layout's kernels are compiled
// in a translation unit of their own (the build generates one per layout from
// cuda/sample_kernels.cuh), so that the scan's many instances build in parallel.
template <nt_dtype DT, bool VEC>
struct SampleKernels {
  // The largest cluster (kMaxClusterChunks, else 8) the device can hold one
  // of, both of this layout's filtered scan and of its scan that resolves in
  // clusters (the scans with the most shared memory and registers); 0 before
  // sm_90. make_plan asks the f32 layout's, which holds for all. `device` must
  // be current.
  static int max_cluster_chunks(int device, int cc_major);
  // The scan the plan's mode takes, in clusters where the plan says so.
  static void scan(const SampleLaunch& l);
  // The flagged-row kernel (cooperative).
  static void flagged_rows(const SampleLaunch& l);
};

// Bytes of the sampler's workspace layout from its 256-aligned start (the
// size query's answer without kWorkspaceSlack). `device` must be current.
size_t sample_layout_bytes(const SampleCall& call, int device);
// The backend's own limits (rows, shared memory, cooperative launch where the
// call may flag rows), checked before any launch. `call`'s device must be current.
void check_sample_limits(const char* op, const SampleCall& call);
// nt_sample's kernels on the aligned workspace `ws` (checked by the caller);
// returns the arguments they ran with. `raw_mass`: the filtered scans also sum
// each chunk's raw mass where the logprobs candidates kernel can use it
// (SampleArgs::raw_mass says whether they did). The logits' device must be
// current.
SampleArgs launch_sample(const SampleCall& call, char* ws, cudaStream_t stream, bool raw_mass);

}  // namespace nt::cuda
