// lm_head_topk_binary on OpenCL: per launch of up to kMaxHeadRows activation
// rows, one scoring pass over the packed signs and scales feeding the
// candidate buffers, then the merge stages (opencl/lm_head_plan.h).
#include <algorithm>
#include <string>

#include "core/check.h"
#include "opencl/lm_head_plan.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt::opencl {

constexpr const char* kOp = "lm_head_topk_binary";

size_t OpenclBackend::lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a) {
  return head_workspace_size(kOp, a.wq.data, a.wq.shape[0], a.act_q.shape[0], a.k, 0);
}

void OpenclBackend::lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace,
                                        size_t workspace_bytes, void* stream) {
  const Queue q = queue_of(kOp, stream);
  const size_t rows = size_t(a.act_q.shape[0]);
  guarded(kOp, [&] {
    const View act = view(kOp, "act_q", q, a.act_q);
    const View act_scale = view(kOp, "act_scale", q, a.act_scale);
    const View wq = view(kOp, "wq", q, a.wq);
    const View wscale = view(kOp, "wscale", q, a.wscale);
    const View bias = present(a.bias) ? view(kOp, "bias", q, a.bias) : View{};
    const View values = view(kOp, "values", q, a.values);
    const View indices = view(kOp, "indices", q, a.indices);
    if (rows == 0) return;
    const HeadPlan plan = head_plan(q.device, a.wq.shape[0], a.act_q.shape[0], a.k, 0);
    const cl::Buffer ws = opencl::workspace(kOp, q, workspace, workspace_bytes, plan.bytes);
    const ProgramSpec spec{{"topk_select.cl", "lm_head_topk_binary.cl"},
                           "-DNT_MB_MAX=" + std::to_string(kMaxHeadRows)};
    cl::Kernel scores = kernel(kOp, q, spec, "nt_binary_scores");
    const cl::Kernel merge = kernel(kOp, q, spec, "nt_topk_merge");
    const cl_int bias_dtype = present(a.bias) ? cl_int(a.bias.dtype) : -1;
    for (size_t base = 0; base < rows; base += plan.rows_per_launch) {
      const size_t n = std::min(plan.rows_per_launch, rows - base);
      set_args(scores, act, cl_ulong(a.act_q.row_stride), act_scale, wq, cl_ulong(a.wq.row_stride),
               wscale, cl_ulong(a.wscale.row_stride), cl_uint(a.wq.shape[0]),
               cl_uint(a.act_q.shape[1]), cl_uint(a.group_size), cl_uint(n), cl_uint(base), bias,
               bias_dtype, cl_uint(a.k), cl_uint(plan.cap), cl_uint(plan.items),
               cl_uint(plan.rows_per_item), ws, cl_ulong(plan.counts_at), cl_ulong(plan.cand_at));
      enqueue(scores, q, plan.items, work_group_size(scores, q, plan.work_group));
      merge_candidates(merge, q, plan, ws, a.k, n, base, values, a.values.row_stride, indices,
                       a.indices.row_stride);
    }
  });
}

}  // namespace nt::opencl
