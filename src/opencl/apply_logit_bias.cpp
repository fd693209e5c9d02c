// apply_logit_bias on OpenCL: one work-group per row, its table in the
// workspace (apply_logit_bias.cl, token_table.cl).
#include <string>

#include "core/check.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"
#include "opencl/token_lists.h"

namespace nt::opencl {

// Three words (key, first entry, entry count) per slot, 2 slots per id.
size_t OpenclBackend::apply_logit_bias_workspace_size(const nt_apply_logit_bias_args& a) {
  return size_t(a.tokens.ids.shape[0]) * 2 * 3 * sizeof(cl_uint);
}

void OpenclBackend::apply_logit_bias(const nt_apply_logit_bias_args& a, void* workspace_handle,
                                     size_t workspace_bytes, void* stream) {
  const char* op = "apply_logit_bias";
  check_workspace(op, apply_logit_bias_workspace_size(a), workspace_handle, workspace_bytes);
  const Queue q = queue_of(op, stream);
  const cl_ulong rows = cl_ulong(a.logits.shape[0]);
  guarded(op, [&] {
    const View logits = view(op, "logits", q, a.logits);
    const ListArgs tokens = list_args(op, q, "tokens.offsets", "tokens.ids", a.tokens);
    const View values = view(op, "values", q, a.values);
    const size_t bytes = apply_logit_bias_workspace_size(a);
    if (rows == 0 || bytes == 0) return;
    const cl::Buffer table = workspace(op, q, workspace_handle, workspace_bytes, bytes);
    cl::Kernel k = kernel(op, q, {{"token_table.cl", "apply_logit_bias.cl"},
                                  "-DNT_ELEM=" + std::to_string(int(a.logits.dtype))},
                          "nt_apply_logit_bias");
    set_args(k, logits, cl_ulong(a.logits.row_stride), cl_uint(a.logits.shape[1]), rows, tokens,
             values, table, cl_ulong(bytes / (3 * sizeof(cl_uint))));
    const size_t wg = work_group_size(k, q, 256);
    enqueue(k, q, size_t(rows) * wg, wg);
  });
}

}  // namespace nt::opencl
