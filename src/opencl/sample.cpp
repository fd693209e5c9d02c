// nt_sample on OpenCL: the kernel pipeline of opencl/sample.cl, enqueued in
// order on the caller's queue with the same arguments; each kernel serves the
// rows in its phase and the others return at once. Which kernels can have work
// follows from the scalar parameters, so only those are launched. The
// workspace holds each row's state and candidate list: a fixed size per row.
#include <string>
#include <vector>

#include "core/check.h"
#include "core/sampling.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"
#include "opencl/sample.h"

namespace nt::opencl {
namespace {

constexpr const char* kOp = "sample";
constexpr size_t kListCap = 1024;        // the local list's entries
constexpr size_t kStateBytes = 2048;     // a row's state (sample_state.cl checks it fits)
constexpr size_t kRowBytes = kStateBytes + 8 * kListCap;
constexpr size_t kRowWorkGroup = kSampleRowWorkGroup;  // the histogram scratch is sized for it
// Level launches per search; rows needing more refine serially in the list kernel.
constexpr int kLevelLaunches = 2;
// The kernels' flags besides the NT_PER_ROW_* bits (sample.cl's NT_HAS_UNIFORM ...).
constexpr cl_uint kHasUniform = 64, kJoint = 128, kTokensI32 = 256;

// The kernels the call needs, in order: the plan of a call.
std::vector<const char*> pipeline(const SampleCall& call) {
  const nt_row_params& p = call.scalar;
  if (!call.per_row && p.greedy) return {"nt_sample_start"};
  const char* draw_row = call.explicit_draw ? "nt_sample_explicit_row" : "nt_sample_gumbel_row";
  const bool cuts = call.per_row || p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f;
  if (!cuts) return {"nt_sample_start", draw_row};
  std::vector<const char*> k = {"nt_sample_start", "nt_sample_ladder"};
  // Top-p renormalised on the top-k set may search twice.
  const bool twice = call.per_row || (p.top_k > 0 && p.top_p < 1.0f && !call.joint);
  for (int round = 0; round < (twice ? 2 : 1); ++round) {
    for (int i = 0; i < kLevelLaunches; ++i) k.push_back("nt_sample_level");
    k.push_back("nt_sample_list");
  }
  k.push_back(call.explicit_draw ? "nt_sample_explicit_list" : "nt_sample_gumbel_list");
  k.push_back(draw_row);
  return k;
}

}  // namespace

std::string sample_program_defines(nt_dtype logits_dtype) {
  return "-DNT_ELEM=" + std::to_string(int(logits_dtype)) + " -DNT_LIST_CAP=" +
         std::to_string(kListCap) + " -DNT_STATE_BYTES=" + std::to_string(kStateBytes) +
         " -DNT_ROW_WG=" + std::to_string(kRowWorkGroup);
}

size_t sample_workspace_bytes(const SampleCall& call) { return size_t(call.rows) * kRowBytes; }

void enqueue_sample(const char* op, const SampleCall& call, void* workspace,
                    size_t workspace_bytes, const Queue& q, const std::function<void()>& checks) {
  const nt_sample_args& a = call.args;
  const size_t rows = size_t(call.rows);
  guarded(op, [&] {
    const View logits = view(op, "logits", q, a.logits);
    const View tokens = view(op, "tokens", q, a.tokens);
    const View uniform = call.explicit_draw ? view(op, "uniform", q, a.uniform) : View{};
    const RowParams params = row_params(op, q, rows, a);
    if (checks) checks();
    if (rows == 0) return;
    const cl::Buffer ws = opencl::workspace(op, q, workspace, workspace_bytes, rows * kRowBytes);
    const cl_uint flags = params.per_row_flags | (call.explicit_draw ? kHasUniform : 0) |
                          (call.joint ? kJoint : 0) | (call.tokens_i32 ? kTokensI32 : 0);
    const ProgramSpec spec{{"sample_state.cl", "sample_passes.cl", "sample_select.cl", "sample.cl"},
                           sample_program_defines(a.logits.dtype)};
    for (const char* name : pipeline(call)) {
      cl::Kernel kern = kernel(op, q, spec, name);
      set_args(kern, logits, cl_ulong(a.logits.row_stride), cl_uint(call.vocab), params, uniform,
               flags, cl_int(call.mass_bits), tokens, ws);
      const size_t wg = work_group_size(kern, q, kRowWorkGroup);
      enqueue(kern, q, rows * wg, wg);
    }
  });
}

size_t OpenclBackend::sample_workspace_size(const SampleCall& call) {
  return sample_workspace_bytes(call);
}

void OpenclBackend::sample(const SampleCall& call, void* workspace, size_t workspace_bytes,
                           void* stream) {
  enqueue_sample(kOp, call, workspace, workspace_bytes, queue_of(kOp, stream), nullptr);
}

}  // namespace nt::opencl
