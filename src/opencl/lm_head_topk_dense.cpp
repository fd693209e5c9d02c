// lm_head_topk_dense on OpenCL: per launch of up to kMaxHeadRows hidden rows,
// the rows widened to f32 once, one scoring pass over the weights feeding the
// candidate buffers, then the merge stages (opencl/lm_head_plan.h). The [M, V]
// logits never exist; the workspace holds the buffers.
#include <algorithm>
#include <string>

#include "core/check.h"
#include "opencl/lm_head_plan.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt::opencl {

constexpr const char* kOp = "lm_head_topk_dense";

size_t OpenclBackend::lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a) {
  return head_workspace_size(kOp, a.weight.data, a.weight.shape[0], a.hidden.shape[0], a.k,
                             round_up(size_t(a.weight.shape[1]), 8));
}

void OpenclBackend::lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace,
                                       size_t workspace_bytes, void* stream) {
  const Queue q = queue_of(kOp, stream);
  const size_t rows = size_t(a.hidden.shape[0]), columns = size_t(a.weight.shape[1]);
  guarded(kOp, [&] {
    const View hidden = view(kOp, "hidden", q, a.hidden);
    const View weight = view(kOp, "weight", q, a.weight);
    const View bias = present(a.bias) ? view(kOp, "bias", q, a.bias) : View{};
    const View values = view(kOp, "values", q, a.values);
    const View indices = view(kOp, "indices", q, a.indices);
    if (rows == 0) return;
    const size_t h8 = round_up(columns, 8);
    const HeadPlan plan = head_plan(q.device, a.weight.shape[0], a.hidden.shape[0], a.k, h8);
    const cl::Buffer ws = opencl::workspace(kOp, q, workspace, workspace_bytes, plan.bytes);
    const ProgramSpec spec{{"topk_select.cl", "lm_head_topk_dense.cl"},
                           "-DNT_ELEM=" + std::to_string(int(a.weight.dtype)) +
                               " -DNT_MB_MAX=" + std::to_string(kMaxHeadRows)};
    cl::Kernel widen = kernel(kOp, q, spec, "nt_dense_widen_hidden");
    cl::Kernel scores = kernel(kOp, q, spec, "nt_dense_scores");
    const cl::Kernel merge = kernel(kOp, q, spec, "nt_topk_merge");
    const cl_int bias_dtype = present(a.bias) ? cl_int(a.bias.dtype) : -1;
    for (size_t base = 0; base < rows; base += plan.rows_per_launch) {
      const size_t n = std::min(plan.rows_per_launch, rows - base);
      set_args(widen, hidden, cl_ulong(a.hidden.row_stride), cl_uint(columns), cl_uint(h8),
               cl_uint(n), cl_uint(base), cl_uint(round_up(n, 4)), ws);
      enqueue(widen, q, round_up(n, 4) * h8, work_group_size(widen, q, 256));
      set_args(scores, weight, cl_ulong(a.weight.row_stride), cl_uint(a.weight.shape[0]),
               cl_uint(columns), cl_uint(h8), cl_uint(n), bias, bias_dtype, cl_uint(a.k),
               cl_uint(plan.cap), cl_uint(plan.items), cl_uint(plan.rows_per_item), ws,
               cl_ulong(plan.counts_at), cl_ulong(plan.cand_at));
      enqueue(scores, q, plan.items, work_group_size(scores, q, plan.work_group));
      merge_candidates(merge, q, plan, ws, a.k, n, base, values, a.values.row_stride, indices,
                       a.indices.row_stride);
    }
  });
}

}  // namespace nt::opencl
