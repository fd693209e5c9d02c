// nt_sample_logprobs on CUDA: nt_sample's launches (cuda/sample_launch.cuh; in
// raw mode its filtered scans also sum each chunk's raw mass), then the
// logprobs kernels (cuda/sample_logprobs.cuh) on the same stream: the row
// kernel where the candidates may answer rows, else the scan and finish
// kernels. The workspace is the sampler's layout followed by one record per
// (row, chunk); the plan depends only on the shapes and the device, so a
// captured graph replays the same work.
#include <algorithm>
#include <string>

#include "core/check.h"
#include "cuda/ops.cuh"
#include "cuda/sample_launch.cuh"
#include "cuda/sample_logprobs.cuh"

namespace nt::cuda {
namespace {

constexpr const char* kOp = "sample_logprobs";
// The least tokens a chunk takes (a CTA's 256 threads, kLogprobTokens tokens each) and
// the most chunks a row; the chunking aims at kLogprobCtasPerSm scan CTAs per
// multiprocessor (cuda/sample_logprobs.cuh).
constexpr int64_t kLogprobMinChunk = 2048;
constexpr int64_t kLogprobMaxSplits = 128;

struct LogprobPlan {
  int splits = 1, chunk = 1;
  size_t records_at = 0, bytes = 0;
};

// Few rows: a row spreads over many CTAs (B = 1 over the chip); many rows:
// one CTA a row. Chunks are multiples of 8 tokens (whole load groups).
LogprobPlan make_logprob_plan(const SampleCall& call, int device) {
  const DeviceLimits limits = device_limits(device, kOp);
  const int64_t rows = call.rows, vocab = call.vocab;
  const int64_t target = int64_t(limits.sm_count) * int64_t(kLogprobCtasPerSm);
  const int64_t cap = std::clamp<int64_t>(vocab / kLogprobMinChunk, 1, kLogprobMaxSplits);
  const int64_t wanted = std::clamp<int64_t>(target / std::max<int64_t>(rows, 1), 1, cap);
  const int64_t chunk = ((vocab + wanted - 1) / wanted + 7) / 8 * 8;
  LogprobPlan p;
  p.chunk = int(chunk);
  p.splits = int((vocab + chunk - 1) / chunk);
  p.records_at = align_up(sample_layout_bytes(call, device), 256);
  p.bytes = p.records_at + size_t(rows) * size_t(p.splits) * sizeof(LogprobChunk) + kWorkspaceSlack;
  return p;
}

}  // namespace

size_t CudaBackend::sample_logprobs_workspace_size(const SampleLogprobsCall& call) {
  if (call.sample.rows == 0) return 0;
  const int device = call.sample.args.logits.device_id;
  DeviceScope scope(device, kOp);
  return make_logprob_plan(call.sample, device).bytes;
}

void CudaBackend::sample_logprobs(const SampleLogprobsCall& call, void* workspace,
                                  size_t workspace_bytes, void* stream) {
  const SampleCall& s = call.sample;
  if (s.rows == 0) return;
  const int device = s.args.logits.device_id;
  DeviceScope scope(device, kOp);
  check_sample_limits(kOp, s);
  const LogprobPlan plan = make_logprob_plan(s, device);
  check_workspace(kOp, plan.bytes, workspace, workspace_bytes);
  char* ws = aligned_workspace(workspace);
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const bool processed = call.processed;
  const SampleArgs args = launch_sample(s, ws, st, !processed);

  const nt_sample_logprobs_args& a = call.args;
  LogprobArgs l{};
  l.n = call.n;
  l.processed = call.processed ? 1 : 0;
  l.splits = plan.splits;
  l.chunk = plan.chunk;
  l.rows_last_first = s.rows <= 65535 ? 1 : 0;  // a grid's y extent is at most 65535
  l.ids = static_cast<int32_t*>(a.logprob_ids.data);
  l.ids_stride = a.logprob_ids.row_stride;
  l.values = static_cast<float*>(a.logprobs.data);
  l.values_stride = a.logprobs.row_stride;
  l.ranks = static_cast<int32_t*>(a.ranks.data);
  l.chunks = reinterpret_cast<LogprobChunk*>(ws + plan.records_at);
  // A filtered row possible (per-row parameters, or scalars that make every
  // row filtered) and rows of one chunk (batches that fill the chip, or rows
  // of a few thousand tokens; at most kMaxChunkCandidates candidates a row):
  // the row kernel answers rows from the candidates, in raw mode where the
  // scans summed the raw mass, and scans the others whole, one CTA a row. A
  // row of several chunks is spread over many CTAs by the scan for less than
  // one CTA would take over its candidates.
  const bool from_candidates = (s.per_row || s.row_class == kFilteredRow) && args.splits == 1 &&
                               (processed || args.raw_mass);
  const u32 rows = u32(s.rows);
  with_logit_layout(s.args.logits.dtype, rows_16b_aligned(s.args.logits), [&](auto layout) {
    constexpr nt_dtype DT = decltype(layout)::kDtype;
    if (from_candidates) {
      sample_logprobs_row_kernel<DT, decltype(layout)::kVec>
          <<<rows, kLogprobThreads, 0, st>>>(args, l);
      check_launch(kOp);
      return;
    }
    const dim3 grid =
        l.rows_last_first ? dim3(u32(plan.splits), rows, 1) : dim3(rows, u32(plan.splits), 1);
    sample_logprobs_scan_kernel<DT, decltype(layout)::kVec>
        <<<grid, kLogprobThreads, 0, st>>>(args, l);
    check_launch(kOp);
    sample_logprobs_finish_kernel<DT><<<rows, kLogprobFinishThreads, 0, st>>>(args, l);
    check_launch(kOp);
  });
}

}  // namespace nt::cuda
