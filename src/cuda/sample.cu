// nt_sample on CUDA: launch planning and workspace layout (the kernels are in
// cuda/sample_scan.cuh, sample_merge.cuh and sample_fallback.cuh). Everything
// the launches depend on is known on the host from shapes, dtypes, pointers and
// scalar parameters, so a captured graph replays the same work; per-row values
// are only ever read on the device.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "core/check.h"
#include "core/sampling.h"
#include "cuda/ops.cuh"
#include "cuda/sample_common.cuh"
#include "cuda/sample_fallback.cuh"
#include "cuda/sample_large_keep.cuh"
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

struct Plan {
  int splits = 1, chunk = 1, kchunk = 1, mass_bits = 40;
  bool cluster = false;          // the row's chunks form one cluster that merges them
  int mode = kAnyRow;            // RowClass of every row, or kAnyRow
  bool fallback_needed = true;   // some row may keep more than its candidates
  size_t chunks_at = 0, candidates_at = 0, rows_at = 0, bytes = 0;
  size_t large_rows_at = 0, large_cnt_at = 0, large_mass_at = 0, large_cand_at = 0;
};

int bit_length(uint64_t v) {
  int n = 0;
  for (; v; v >>= 1) ++n;
  return n;
}

// Many splits when few rows (B = 1 spreads a row over the chip), one split when
// the rows alone fill it. Chunks are multiples of 8 tokens so that 16-byte
// vectors and Philox blocks never straddle two chunks. Batches of at most
// kClusterRowsMax rows whose rows resolve in the merge (no large keep-set
// kernels after it) take at most max_cluster chunks a row, launched as one
// cluster that merges them: no second launch. Larger batches, and rows that
// may need the large keep-set kernels (which run on a row's chunks), take the
// merge kernel.
Plan make_plan(const nt_sample_args& a, int sms, int max_cluster) {
  const int64_t rows = a.logits.shape[0], vocab = a.logits.shape[1];
  Plan p;
  // With every parameter a scalar, the host knows each row's class and can
  // pick a leaner scan and skip kernels that would find nothing to do.
  const bool per_row = a.temperature.per_row || a.top_k.per_row || a.top_p.per_row || a.min_p.per_row;
  const bool uniform = present(a.uniform);
  nt_row_params r{};
  if (!per_row) {
    r = nt_resolve_row_params(a.temperature.scalar, a.top_k.scalar, a.top_p.scalar, a.min_p.scalar,
                              int32_t(vocab));
    p.mode = r.greedy ? kGreedyRow
             : (r.top_k == 0 && r.top_p >= 1.0f && r.min_p <= 0.0f && !uniform) ? kPlainRow
                                                                               : kFilteredRow;
  }
  const int64_t target = int64_t(sms) * kScanCtasPerSm;
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
    p.fallback_needed =
        per_row || (p.mode == kFilteredRow && !(r.top_k > 0 && r.top_k <= p.kchunk && !uniform));
  };
  split(wanted);
  if (wanted > 1 && rows <= kClusterRowsMax && max_cluster > 1) {
    split(std::min<int64_t>(wanted, max_cluster));
    p.cluster = p.splits > 1 && !p.fallback_needed;
    if (!p.cluster) split(wanted);
  }
  const int64_t splits = p.splits;
  // Fixed-point masses: V terms of at most 2^bits must sum below 2^62.
  p.mass_bits = std::clamp(62 - bit_length(uint64_t(vocab)), 24, 40);
  size_t at = 0;
  p.chunks_at = at;
  at = align_up(at + size_t(rows) * size_t(splits) * sizeof(ChunkRecord), 256);
  p.candidates_at = at;
  at = align_up(at + size_t(rows) * size_t(splits) * size_t(p.kchunk) * sizeof(u64), 256);
  p.rows_at = at;
  at = align_up(at + size_t(rows) * sizeof(RowState), 256);

  // Rows that may keep more than their candidates get the large keep-set
  // kernels' histograms and lists (40 KB a row).
  if (p.fallback_needed) {
    p.large_rows_at = at;
    at = align_up(at + size_t(rows) * sizeof(LargeKeepRow), 256);
    p.large_cnt_at = at;
    at = align_up(at + size_t(rows) * kLargeBins * sizeof(u32), 256);
    p.large_mass_at = at;
    at = align_up(at + size_t(rows) * kLargeBins * sizeof(u64), 256);
    p.large_cand_at = at;
    at = align_up(at + size_t(rows) * kLargeCap * sizeof(u64), 256);
  }
  p.bytes = rows == 0 ? 0 : at;
  return p;
}

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
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kScanSmemBytes),
             kOp);
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), kOp);
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

// max_cluster_chunks once per device.
int cluster_chunks(int device, int cc_major) {
  static std::mutex mutex;
  static std::map<int, int> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(device); it != known.end()) return it->second;
  return known[device] = max_cluster_chunks(device, cc_major);
}

struct Launch {
  SampleArgs args;
  int mode;            // RowClass of every row, or kAnyRow
  bool run_merge;
  bool run_fallback;
  dim3 scan_grid;
  int scan_smem;
  int merge_smem;
  int device;
  cudaStream_t stream;
};

template <nt_dtype DT, bool VEC, int MODE>
void launch_scan(const Launch& l) {
  auto kernel = sample_scan_kernel<DT, VEC, MODE>;
  static std::atomic<int> cluster_allowed[64];
  if (l.scan_smem > 0) allow_dynamic_smem(kernel, kScanSmemBytes, l.device, kOp);
  if (!l.args.cluster_merge) {
    kernel<<<l.scan_grid, kScanThreads, size_t(l.scan_smem), l.stream>>>(l.args);
    check_cuda(cudaGetLastError(), kOp);
    return;
  }
  if (l.device < 0 || l.device >= 64 || !cluster_allowed[l.device].load(std::memory_order_acquire)) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), kOp);
    if (l.device >= 0 && l.device < 64) cluster_allowed[l.device].store(1, std::memory_order_release);
  }
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config =
      scan_cluster_config(l.scan_grid, size_t(l.scan_smem), l.stream, &attribute);
  check_cuda(cudaLaunchKernelEx(&config, kernel, l.args), kOp);
}

template <nt_dtype DT, bool VEC>
void launch_all(const Launch& l) {
  switch (l.mode) {
    case kGreedyRow: launch_scan<DT, VEC, kGreedyRow>(l); break;
    case kPlainRow: launch_scan<DT, VEC, kPlainRow>(l); break;
    case kFilteredRow: launch_scan<DT, VEC, kFilteredRow>(l); break;
    default: launch_scan<DT, VEC, kAnyRow>(l); break;
  }
  if (l.run_merge) {
    if (l.merge_smem > 0) allow_dynamic_smem(sample_merge_kernel, kMergeSmemBytes, l.device, kOp);
    sample_merge_kernel<<<l.args.rows, kMergeThreads, size_t(l.merge_smem), l.stream>>>(l.args);
    check_cuda(cudaGetLastError(), kOp);
  }
  if (l.run_fallback) {
    sample_large_hist_kernel<DT, VEC><<<l.scan_grid, kLargeThreads, 0, l.stream>>>(l.args);
    check_cuda(cudaGetLastError(), kOp);
    sample_large_collect_kernel<DT, VEC><<<l.scan_grid, kLargeThreads, 0, l.stream>>>(l.args);
    check_cuda(cudaGetLastError(), kOp);
    sample_large_finish_kernel<<<l.args.rows, kLargeThreads, 0, l.stream>>>(l.args);
    check_cuda(cudaGetLastError(), kOp);
    sample_fallback_kernel<DT, VEC><<<l.args.rows, kFallbackThreads, 0, l.stream>>>(l.args);
    check_cuda(cudaGetLastError(), kOp);
  }
}

template <nt_dtype DT>
void launch_dtype(const Launch& l, bool vec) {
  if (vec)
    launch_all<DT, true>(l);
  else
    launch_all<DT, false>(l);
}

}  // namespace

size_t sample_workspace_size(const nt_sample_args& a) {
  const int64_t rows = a.logits.shape[0];
  if (rows == 0) return 0;
  DeviceScope scope(a.logits.device_id, kOp);
  const DeviceLimits limits = device_limits(a.logits.device_id, kOp);
  return make_plan(a, limits.sm_count, cluster_chunks(a.logits.device_id, limits.cc_major)).bytes;
}

void sample(const nt_sample_args& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const int64_t rows = a.logits.shape[0], vocab = a.logits.shape[1];
  if (rows == 0) return;
  if (rows > INT32_MAX)
    fail(NT_ERROR_UNSUPPORTED, "sample: the CUDA backend takes at most 2^31-1 rows, got " +
                                   std::to_string(rows));
  const int device = a.logits.device_id;
  DeviceScope scope(device, kOp);
  const DeviceLimits limits = device_limits(device, kOp);
  const Plan plan = make_plan(a, limits.sm_count, cluster_chunks(device, limits.cc_major));
  if (workspace_bytes < plan.bytes)
    fail(NT_ERROR_WORKSPACE, "sample: argument 'workspace_bytes' is " + std::to_string(workspace_bytes) +
                                 " but " + std::to_string(plan.bytes) + " bytes are needed");
  if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    fail(NT_ERROR_WORKSPACE, "sample: argument 'workspace' must be 16-byte aligned");
  if (limits.max_smem_optin < std::max(kScanSmemBytes, kMergeSmemBytes) + 16 * 1024)
    fail(NT_ERROR_UNSUPPORTED, "sample: the CUDA device has too little shared memory per block (" +
                                   std::to_string(limits.max_smem_optin) + " bytes)");

  Launch l{};
  SampleArgs& g = l.args;
  g.logits = a.logits.data;
  g.row_stride = a.logits.row_stride;
  g.vocab = int32_t(vocab);
  g.rows = u32(rows);
  g.temperature = static_cast<const float*>(a.temperature.per_row);
  g.top_k = static_cast<const int32_t*>(a.top_k.per_row);
  g.top_p = static_cast<const float*>(a.top_p.per_row);
  g.min_p = static_cast<const float*>(a.min_p.per_row);
  g.seed = static_cast<const uint64_t*>(a.seed.per_row);
  g.offset = static_cast<const uint64_t*>(a.offset.per_row);
  g.uniform = present(a.uniform) ? static_cast<const float*>(a.uniform.data) : nullptr;
  g.temperature_scalar = a.temperature.scalar;
  g.top_k_scalar = a.top_k.scalar;
  g.top_p_scalar = a.top_p.scalar;
  g.min_p_scalar = a.min_p.scalar;
  g.seed_scalar = a.seed.scalar;
  g.offset_scalar = a.offset.scalar;
  g.joint = (a.flags & NT_SAMPLE_TOP_P_JOINT) != 0;
  g.tokens_int32 = a.tokens.dtype == NT_I32;
  g.tokens = a.tokens.data;
  g.splits = plan.splits;
  g.chunk = plan.chunk;
  g.kchunk = plan.kchunk;
  g.mass_bits = plan.mass_bits;
  char* ws = static_cast<char*>(workspace);
  g.chunks = reinterpret_cast<ChunkRecord*>(ws + plan.chunks_at);
  g.candidates = reinterpret_cast<u64*>(ws + plan.candidates_at);
  g.row_states = reinterpret_cast<RowState*>(ws + plan.rows_at);

  l.mode = plan.mode;
  const bool filtered = l.mode == kFilteredRow || l.mode == kAnyRow;
  g.merge_in_scan = filtered && plan.splits == 1;
  g.cluster_merge = plan.cluster;
  l.run_merge = plan.splits > 1 && !plan.cluster;
  l.run_fallback = filtered && plan.fallback_needed;
  if (l.run_fallback) {
    g.large.rows = reinterpret_cast<LargeKeepRow*>(ws + plan.large_rows_at);
    g.large.cnt = reinterpret_cast<u32*>(ws + plan.large_cnt_at);
    g.large.mass = reinterpret_cast<u64*>(ws + plan.large_mass_at);
    g.large.cand = reinterpret_cast<u64*>(ws + plan.large_cand_at);
  }
  l.scan_grid = dim3(u32(rows), u32(plan.splits), 1);
  l.scan_smem = filtered ? kScanSmemBytes : 0;
  l.merge_smem = filtered ? int((size_t(plan.splits) * plan.kchunk + kSortCap) * sizeof(u64)) : 0;
  l.device = device;
  l.stream = stream;

  const size_t esize = dtype_size(a.logits.dtype);
  const bool vec = reinterpret_cast<uintptr_t>(a.logits.data) % 16 == 0 &&
                   (rows == 1 || (size_t(a.logits.row_stride) * esize) % 16 == 0);
  switch (a.logits.dtype) {
    case NT_F32: launch_dtype<NT_F32>(l, vec); break;
    case NT_F16: launch_dtype<NT_F16>(l, vec); break;
    case NT_BF16: launch_dtype<NT_BF16>(l, vec); break;
    default: fail_argument(kOp, "logits", "has an unsupported dtype");
  }
}

}  // namespace nt::cuda
