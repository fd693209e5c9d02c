// nt_sample on CUDA: the call's plan and its launches (the kernels are in
// cuda/sample_scan.cuh, sample_merge.cuh and sample_fallback.cuh, the last
// with the phases of sample_large_keep.cuh). Everything the plan depends on
// is known on the host from shapes, dtypes, pointers and scalar parameters,
// so a captured graph replays the same work; per-row values are only ever
// read on the device.
#include <algorithm>
#include <string>

#include "core/check.h"
#include "cuda/ops.cuh"
#include "cuda/sample_common.cuh"
#include "cuda/sample_fallback.cuh"
#include "cuda/sample_launch.cuh"
#include "cuda/sample_scan.cuh"

namespace nt::cuda {
namespace {

constexpr const char* kOp = "sample";
// Resident scan CTAs per multiprocessor the split count is planned for.
constexpr int kScanCtasPerSm = 2;
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
// schedules clusters that large (a non-portable size), else the portable 8;
// and the largest batch whose rows merge in their clusters (make_plan).
constexpr int kMaxClusterChunks = 16;
constexpr int64_t kClusterRowsMax = 8;
// The large keep-set phases' work items: chunks of at least about this many
// tokens of each listed row, shared out over as many CTAs as the chip holds at once.
constexpr int64_t kLargeChunkTokens = 8192;

// A scan launch whose grid's chunks (blockIdx.y) of a row form one cluster;
// `attribute` holds the cluster shape the config points to.
cudaLaunchConfig_t scan_cluster_config(dim3 grid, size_t smem, cudaStream_t stream,
                                       cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(kScanThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  *attribute = cudaLaunchAttribute{};
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = 1;
  attribute->val.clusterDim.y = grid.y;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

// The largest cluster of scan CTAs (kMaxClusterChunks, else 8) the device can
// hold one of; 0 before sm_90. Asked of the filtered f32 scan, which has the
// most shared memory and registers of the scan kernels, so it holds for all.
int max_cluster_chunks(int device, int cc_major) {
  if (cc_major < 9) return 0;
  auto kernel = sample_scan_kernel<NT_F32, true, kFilteredRow>;
  allow_dynamic_smem(kernel, kScanSmemBytes, device, kOp);
  allow_nonportable_clusters(kernel, device, kOp);
  for (int size : {kMaxClusterChunks, 8}) {
    cudaLaunchAttribute attribute;
    const cudaLaunchConfig_t config =
        scan_cluster_config(dim3(1, unsigned(size), 1), kScanSmemBytes, nullptr, &attribute);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters > 0)
      return size;
    cudaGetLastError();  // an unsupported size is an answer, not an error
  }
  return 0;
}

// The plan of one call, made once: how rows split into chunks and merge,
// which kernels run, and where their state lies in the workspace. The kernels:
// the scan (which merges one-chunk rows and, in clusters, the rows of small
// batches), the merge kernel for the other rows of several chunks, and, where
// a row may be flagged (fallback_needed), the cooperative flagged-row kernel
// (large keep-set path, then exact fallback), its two counts cleared before
// the merges (by the scan where the merge kernel merges, else by a memset).
struct Plan {
  int mode = kAnyRow;  // RowClass of every row, or kAnyRow
  int splits = 1, chunk = 1, kchunk = 1;
  bool cluster = false;          // a row's chunks form one cluster that merges them
  bool filtered = true;          // some row may be filtered
  bool fallback_needed = true;   // some (filtered) row may keep more than its candidates
  bool row_mass = true;          // some filtered row's top-p is measured on the whole row
  size_t chunks_at = 0, candidates_at = 0, rows_at = 0, bytes = 0;
  size_t large_rows_at = 0, large_cnt_at = 0, large_mass_at = 0, large_cand_at = 0;
  size_t lists_at = 0;  // n_listed, n_flagged, listed[B], flagged[B]
  int large_splits = 1;
};

// Many splits when few rows (B = 1 spreads a row over the chip), one split when
// the rows alone fill it. Chunks are multiples of 8 tokens so that 16-byte
// vectors and Philox blocks never straddle two chunks. Batches of at most
// kClusterRowsMax rows whose rows resolve in the merge (no flagged-row
// kernel after it) take at most max_cluster chunks a row, launched as one
// cluster that merges them; the others take the merge kernel. `device` must
// be current.
Plan make_plan(const SampleCall& call, int device) {
  const DeviceLimits limits = device_limits(device, kOp);
  const int max_cluster = once_per(device, [&] { return max_cluster_chunks(device, limits.cc_major); });
  const int64_t rows = call.rows, vocab = call.vocab;
  const nt_row_params& r = call.scalar;
  Plan p;
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
    p.cluster = p.splits > 1 && !p.fallback_needed;
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

// What every launch of a call takes: its plan, the kernels' arguments, where.
struct Launch {
  const Plan& plan;
  SampleArgs args;
  int device;
  cudaStream_t stream;
};

SampleArgs kernel_args(const SampleCall& call, const Plan& plan, char* ws) {
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

template <nt_dtype DT, bool VEC, int MODE, bool RAW = false, bool MASS = true>
void launch_scan(const Launch& l) {
  auto kernel = sample_scan_kernel<DT, VEC, MODE, RAW, MASS>;
  const dim3 grid(l.args.rows, u32(l.plan.splits), 1);
  const size_t smem = l.plan.filtered ? size_t(kScanSmemBytes) : 0;
  if (smem > 0) allow_dynamic_smem(kernel, kScanSmemBytes, l.device, kOp);
  if (!l.plan.cluster) {
    kernel<<<grid, kScanThreads, smem, l.stream>>>(l.args);
    check_launch(kOp);
    return;
  }
  allow_nonportable_clusters(kernel, l.device, kOp);
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = scan_cluster_config(grid, smem, l.stream, &attribute);
  check_cuda(cudaLaunchKernelEx(&config, kernel, l.args), kOp);
}

// The flagged-row kernel, cooperative (its phases meet at grid syncs): one
// CTA per work item of the large keep-set phases, at most as many as the chip
// holds at once. Its CTAs loop over the listed and the flagged rows.
template <nt_dtype DT, bool VEC>
void launch_flagged_rows(const Launch& l) {
  auto kernel = sample_flagged_rows_kernel<DT, VEC>;
  const int per_sm = resident_blocks(kernel, kLargeThreads, 0, l.device, kOp);
  const int64_t resident = int64_t(device_limits(l.device, kOp).sm_count) * per_sm;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(u32(std::min<int64_t>(int64_t(l.args.rows) * l.plan.large_splits, resident)));
  config.blockDim = dim3(kLargeThreads);
  config.dynamicSmemBytes = 0;
  config.stream = l.stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&config, kernel, l.args), kOp);
}

template <nt_dtype DT, bool VEC>
void launch_all(const Launch& l) {
  // The flagged-row kernel's two counts: the scans merge rows of one chunk and
  // append to them, so they are cleared before; else the scan clears them.
  if (l.plan.fallback_needed && l.args.merge_in_scan)
    check_cuda(cudaMemsetAsync(l.args.large.n_listed, 0, 2 * sizeof(u32), l.stream), kOp);
  switch (l.plan.mode) {
    case kGreedyRow: launch_scan<DT, VEC, kGreedyRow>(l); break;
    case kPlainRow: launch_scan<DT, VEC, kPlainRow>(l); break;
    case kFilteredRow:
      if (l.args.raw_mass)
        launch_scan<DT, VEC, kFilteredRow, true>(l);
      else if (l.plan.row_mass)
        launch_scan<DT, VEC, kFilteredRow>(l);
      else
        launch_scan<DT, VEC, kFilteredRow, false, false>(l);
      break;
    default:
      l.args.raw_mass ? launch_scan<DT, VEC, kAnyRow, true>(l) : launch_scan<DT, VEC, kAnyRow>(l);
      break;
  }
  const Plan& p = l.plan;
  const u32 rows = l.args.rows;
  if (p.splits > 1 && !p.cluster) {
    const size_t smem = p.filtered ? (size_t(p.splits) * p.kchunk + kSortCap) * sizeof(u64) : 0;
    if (smem > 0) allow_dynamic_smem(sample_merge_kernel, kMergeSmemBytes, l.device, kOp);
    sample_merge_kernel<<<rows, kMergeThreads, smem, l.stream>>>(l.args);
    check_launch(kOp);
  }
  if (p.fallback_needed) launch_flagged_rows<DT, VEC>(l);
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
  if (!cooperative && make_plan(call, device).fallback_needed)
    fail(NT_ERROR_UNSUPPORTED, std::string(op) +
                                   ": the CUDA device cannot launch cooperative kernels (the kernel "
                                   "for rows whose keep-set may reach past the merged candidates)");
}

SampleArgs launch_sample(const SampleCall& call, char* ws, cudaStream_t stream, bool raw_mass) {
  const int device = call.args.logits.device_id;
  const Plan plan = make_plan(call, device);
  SampleArgs args = kernel_args(call, plan, ws);
  // The raw mass serves the logprobs candidates kernel, which takes filtered
  // rows of one chunk only.
  args.raw_mass = raw_mass && plan.filtered && plan.splits == 1;
  const Launch launch{plan, args, device, stream};
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
