// nt_sample on CUDA: the call's plan, the merge kernel and the launch order;
// each logit layout's scan and flagged-row launches are in
// cuda/sample_kernels.cuh (the kernels in cuda/sample_scan.cuh and
// sample_fallback.cuh, the merge's code in sample_merge.cuh, the flagged-row
// kernel's phases in sample_large_keep.cuh). Everything the plan depends on
// is known on the host from shapes, dtypes, pointers and scalar parameters,
// so a captured graph replays the same work; per-row values are only ever
// read on the device.
#include <algorithm>
#include <string>

#include "core/check.h"
#include "cuda/ops.cuh"
#include "cuda/sample_common.cuh"
#include "cuda/sample_launch.cuh"
#include "cuda/sample_merge.cuh"

namespace nt::cuda {

// One merge CTA a row, for rows of several chunks that do not merge in their
// clusters.
__global__ void __launch_bounds__(kMergeThreads) sample_merge_kernel(SampleArgs a) {
  const u32 row = blockIdx.x;
  merge_row(a, load_row_cfg(a, row), row);
}

namespace {

constexpr const char* kOp = kSampleOp;
// Resident scan CTAs per multiprocessor the split count is planned for.
constexpr int kScanCtasPerSm = 2;
// The largest batch whose rows merge in their clusters (make_plan).
constexpr int64_t kClusterRowsMax = 8;
// The large keep-set phases' work items: chunks of at least about this many
// tokens of each listed row (four a thread), shared out over as many CTAs as
// the chip holds at once: a few listed rows take many CTAs each, since each
// phase over an item is a chain of load latencies.
constexpr int64_t kLargeChunkTokens = 2048;

// Many splits when few rows (B = 1 spreads a row over the chip), one split when
// the rows alone fill it. Chunks are multiples of 8 tokens so that 16-byte
// vectors and Philox blocks never straddle two chunks. Batches of at most
// kClusterRowsMax rows take at most max_cluster chunks a row, launched as one
// cluster that merges them and resolves them if flagged (the scan is the
// call's only kernel); the others take the merge kernel and, where a row may
// be flagged, the flagged-row kernel. `device` must be current.
SamplePlan make_plan(const SampleCall& call, int device) {
  const DeviceLimits limits = device_limits(device, kOp);
  const int max_cluster = once_per(device, [&] {
    return SampleKernels<NT_F32, true>::max_cluster_chunks(device, limits.cc_major);
  });
  const int64_t rows = call.rows, vocab = call.vocab;
  const nt_row_params& r = call.scalar;
  SamplePlan p;
  // With every parameter a scalar, the host knows each row's class and can
  // pick a leaner scan and skip kernels that would find nothing to do.
  if (!call.per_row) p.mode = call.row_class;
  p.filtered = p.mode == kFilteredRow || p.mode == kAnyRow;
  // filtered_needs_mass of every row (the same rule on the same scalars).
  p.row_mass = call.per_row || nt_top_p_on_row_mass(r, call.joint);
  const int64_t target = int64_t(limits.sm_count) * kScanCtasPerSm;
  const int64_t cap =
      std::min<int64_t>(kMaxSplits, std::max<int64_t>(1, (vocab + kTileTokens - 1) / kTileTokens));
  const int64_t wanted =
      rows >= target ? 1 : std::clamp<int64_t>(target / std::max<int64_t>(rows, 1), 1, cap);
  auto split = [&](int64_t splits) {
    const int64_t chunk = ((vocab + splits - 1) / splits + 7) / 8 * 8;
    p.splits = int((vocab + chunk - 1) / chunk);
    p.chunk = int(chunk);
    p.kchunk = int(std::min<int64_t>(kMaxChunkCandidates, kMaxMerged / p.splits));
    // A top-k within the chunk capacity always resolves in the merge (rows of
    // +inf logits are drawn from the chunks' Gumbel-max among them).
    p.fallback_needed = call.per_row || (p.mode == kFilteredRow &&
                                         !(r.top_k > 0 && r.top_k <= p.kchunk && !call.explicit_draw));
  };
  split(wanted);
  if (wanted > 1 && rows <= kClusterRowsMax && max_cluster > 1) {
    split(std::min<int64_t>(wanted, max_cluster));
    p.cluster = p.splits > 1;
    if (!p.cluster) split(wanted);
  }

  const size_t cells = size_t(rows) * size_t(p.splits);
  size_t at = 0;
  auto place = [&](size_t bytes) {
    const size_t start = at;
    at = align_up(at + bytes, 256);
    return start;
  };
  p.chunks_at = place(cells * sizeof(ChunkRecord));
  p.candidates_at = place(cells * size_t(p.kchunk) * sizeof(u64));
  p.rows_at = place(size_t(rows) * sizeof(RowState));
  // Rows that may keep more than their candidates get the flagged-row
  // kernel's histograms and lists (40 KB a row).
  if (p.fallback_needed) {
    p.large_rows_at = place(size_t(rows) * sizeof(LargeKeepRow));
    p.large_cnt_at = place(size_t(rows) * kLargeBins * sizeof(u32));
    p.large_mass_at = place(size_t(rows) * kLargeBins * sizeof(u64));
    p.large_cand_at = place(size_t(rows) * kLargeCap * sizeof(u64));
    p.lists_at = place((2 + 2 * size_t(rows)) * sizeof(u32));  // the two counts, then the rows
    p.large_splits = int(std::max<int64_t>(1, (vocab + kLargeChunkTokens - 1) / kLargeChunkTokens));
  }
  p.bytes = at + kWorkspaceSlack;
  return p;
}

SampleArgs kernel_args(const SampleCall& call, const SamplePlan& plan, char* ws) {
  const nt_sample_args& a = call.args;
  SampleArgs g{};
  g.logits = a.logits.data;
  g.row_stride = a.logits.row_stride;
  g.vocab = int32_t(call.vocab);
  g.rows = u32(call.rows);
  g.temperature = a.temperature;
  g.top_k = a.top_k;
  g.top_p = a.top_p;
  g.min_p = a.min_p;
  g.seed = a.seed;
  g.offset = a.offset;
  g.uniform = call.explicit_draw ? static_cast<const float*>(a.uniform.data) : nullptr;
  g.joint = call.joint;
  g.tokens_int32 = call.tokens_i32;
  g.tokens = a.tokens.data;
  g.splits = plan.splits;
  g.chunk = plan.chunk;
  g.kchunk = plan.kchunk;
  g.mass_bits = call.mass_bits;
  g.merge_in_scan = plan.filtered && plan.splits == 1;
  g.cluster_merge = plan.cluster;
  g.chunks = reinterpret_cast<ChunkRecord*>(ws + plan.chunks_at);
  g.candidates = reinterpret_cast<u64*>(ws + plan.candidates_at);
  g.row_states = reinterpret_cast<RowState*>(ws + plan.rows_at);
  if (plan.fallback_needed) {
    g.large.rows = reinterpret_cast<LargeKeepRow*>(ws + plan.large_rows_at);
    g.large.cnt = reinterpret_cast<u32*>(ws + plan.large_cnt_at);
    g.large.mass = reinterpret_cast<u64*>(ws + plan.large_mass_at);
    g.large.cand = reinterpret_cast<u64*>(ws + plan.large_cand_at);
    u32* lists = reinterpret_cast<u32*>(ws + plan.lists_at);
    g.large.n_listed = lists;
    g.large.n_flagged = lists + 1;
    g.large.listed = lists + 2;
    g.large.flagged = lists + 2 + call.rows;
    g.large.splits = plan.large_splits;
  }
  return g;
}

// The call's kernels in order: the scan, then, unless its clusters merge and
// resolve the rows, the merge kernel where rows take several chunks and the
// flagged-row kernel where a row may be flagged (its two counts cleared
// before: the scans merge rows of one chunk and append to them; else the scan
// clears them).
template <nt_dtype DT, bool VEC>
void launch_all(const SampleLaunch& l) {
  const SamplePlan& p = l.plan;
  if (p.fallback_needed && l.args.merge_in_scan)
    check_cuda(cudaMemsetAsync(l.args.large.n_listed, 0, 2 * sizeof(u32), l.stream), kOp);
  SampleKernels<DT, VEC>::scan(l);
  if (p.cluster) return;
  if (p.splits > 1) {
    const size_t smem = p.filtered ? (size_t(p.splits) * p.kchunk + kSortCap) * sizeof(u64) : 0;
    if (smem > 0) allow_dynamic_smem(sample_merge_kernel, kMergeSmemBytes, l.device, kOp);
    sample_merge_kernel<<<l.args.rows, kMergeThreads, smem, l.stream>>>(l.args);
    check_launch(kOp);
  }
  if (p.fallback_needed) SampleKernels<DT, VEC>::flagged_rows(l);
}

}  // namespace

size_t sample_layout_bytes(const SampleCall& call, int device) {
  return make_plan(call, device).bytes - kWorkspaceSlack;
}

void check_sample_limits(const char* op, const SampleCall& call) {
  if (call.rows > INT32_MAX)
    fail(NT_ERROR_UNSUPPORTED, std::string(op) + ": the CUDA backend takes at most 2^31-1 rows, got " +
                                   std::to_string(call.rows));
  const int device = call.args.logits.device_id;
  const int smem_optin = device_limits(device, op).max_smem_optin;
  if (smem_optin < std::max(kScanSmemBytes, kMergeSmemBytes) + 16 * 1024)
    fail(NT_ERROR_UNSUPPORTED, std::string(op) +
                                   ": the CUDA device has too little shared memory per block (" +
                                   std::to_string(smem_optin) + " bytes)");
  // The flagged-row kernel is a cooperative launch.
  const bool cooperative = once_per(device, [&] {
    int supported = 0;
    check_cuda(cudaDeviceGetAttribute(&supported, cudaDevAttrCooperativeLaunch, device), op);
    return supported != 0;
  });
  if (cooperative) return;
  const SamplePlan plan = make_plan(call, device);
  if (plan.fallback_needed && !plan.cluster)
    fail(NT_ERROR_UNSUPPORTED, std::string(op) +
                                   ": the CUDA device cannot launch cooperative kernels (the kernel "
                                   "for rows whose keep-set may reach past the merged candidates)");
}

SampleArgs launch_sample(const SampleCall& call, char* ws, cudaStream_t stream, bool raw_mass) {
  const int device = call.args.logits.device_id;
  const SamplePlan plan = make_plan(call, device);
  SampleArgs args = kernel_args(call, plan, ws);
  // The raw mass serves the logprobs candidates kernel, which takes filtered
  // rows of one chunk only.
  args.raw_mass = raw_mass && plan.filtered && plan.splits == 1;
  const SampleLaunch launch{plan, args, device, stream};
  with_logit_layout(call.args.logits.dtype, rows_16b_aligned(call.args.logits), [&](auto layout) {
    launch_all<decltype(layout)::kDtype, decltype(layout)::kVec>(launch);
  });
  return launch.args;
}

size_t CudaBackend::sample_workspace_size(const SampleCall& call) {
  if (call.rows == 0) return 0;
  DeviceScope scope(call.args.logits.device_id, kOp);
  return make_plan(call, call.args.logits.device_id).bytes;
}

void CudaBackend::sample(const SampleCall& call, void* workspace, size_t workspace_bytes,
                         void* stream) {
  if (call.rows == 0) return;
  const int device = call.args.logits.device_id;
  DeviceScope scope(device, kOp);
  check_sample_limits(kOp, call);
  check_workspace(kOp, make_plan(call, device).bytes, workspace, workspace_bytes);
  launch_sample(call, aligned_workspace(workspace), static_cast<cudaStream_t>(stream), false);
}

}  // namespace nt::cuda
