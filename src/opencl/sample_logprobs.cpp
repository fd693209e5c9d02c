// nt_sample_logprobs on OpenCL: nt_sample's pipeline (opencl/sample.h), then
// one kernel (sample_logprobs.cl), a work-group per row, on the same queue.
// It reads the row states the pipeline left in the workspace, so the
// workspace is nt_sample's.
#include <string>

#include "core/check.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"
#include "opencl/sample.h"

namespace nt::opencl {
namespace {

constexpr const char* kOp = "sample_logprobs";

}  // namespace

size_t OpenclBackend::sample_logprobs_workspace_size(const SampleLogprobsCall& call) {
  return sample_workspace_bytes(call.sample);
}

void OpenclBackend::sample_logprobs(const SampleLogprobsCall& call, void* workspace,
                                    size_t workspace_bytes, void* stream) {
  const nt_sample_logprobs_args& a = call.args;
  const SampleCall& s = call.sample;
  const Queue q = queue_of(kOp, stream);
  guarded(kOp, [&] {
    View ids, values, ranks;
    enqueue_sample(kOp, s, workspace, workspace_bytes, q, [&] {
      ids = view(kOp, "logprob_ids", q, a.logprob_ids);
      values = view(kOp, "logprobs", q, a.logprobs);
      ranks = view(kOp, "ranks", q, a.ranks);
    });
    if (s.rows == 0) return;
    const View logits = view(kOp, "logits", q, s.args.logits);
    const View tokens = view(kOp, "tokens", q, s.args.tokens);
    const cl::Buffer ws =
        opencl::workspace(kOp, q, workspace, workspace_bytes, sample_workspace_bytes(s));
    cl::Kernel k = kernel(kOp, q, {{"sample_state.cl", "sample_logprobs.cl"},
                                   sample_program_defines(s.args.logits.dtype)},
                          "nt_sample_logprobs");
    set_args(k, logits, cl_ulong(s.args.logits.row_stride), cl_uint(s.vocab), tokens,
             cl_int(s.tokens_i32), ws, cl_int(call.n), cl_int(call.processed), cl_int(s.mass_bits),
             ids, cl_ulong(a.logprob_ids.row_stride), values, cl_ulong(a.logprobs.row_stride),
             ranks);
    const size_t wg = work_group_size(k, q, kSampleRowWorkGroup);
    enqueue(k, q, size_t(s.rows) * wg, wg);
  });
}

}  // namespace nt::opencl
