// apply_penalties on OpenCL: one work-group per row, its table in the
// workspace (apply_penalties.cl, token_table.cl).
#include <string>

#include "core/check.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"
#include "opencl/token_lists.h"

namespace nt::opencl {
namespace {

constexpr const char* kOp = "apply_penalties";

}  // namespace

// Two words (key, output count) per slot, 2 slots per id.
size_t OpenclBackend::apply_penalties_workspace_size(const nt_apply_penalties_args& a) {
  return size_t(list_ids(a.prompt) + list_ids(a.output)) * 2 * 2 * sizeof(cl_uint);
}

void OpenclBackend::apply_penalties(const nt_apply_penalties_args& a, void* workspace_handle,
                                    size_t workspace_bytes, void* stream) {
  check_workspace(kOp, apply_penalties_workspace_size(a), workspace_handle, workspace_bytes);
  const Queue q = queue_of(kOp, stream);
  const cl_ulong rows = cl_ulong(a.logits.shape[0]);
  guarded(kOp, [&] {
    const View logits = view(kOp, "logits", q, a.logits);
    const ListArgs prompt = list_args(kOp, q, "prompt.offsets", "prompt.ids", a.prompt);
    const ListArgs output = list_args(kOp, q, "output.offsets", "output.ids", a.output);
    const cl::Buffer r = per_row(kOp, "repetition", q, a.repetition.per_row, rows * 4);
    const cl::Buffer p = per_row(kOp, "presence", q, a.presence.per_row, rows * 4);
    const cl::Buffer f = per_row(kOp, "frequency", q, a.frequency.per_row, rows * 4);
    const size_t bytes = apply_penalties_workspace_size(a);
    if (rows == 0 || bytes == 0) return;
    const cl::Buffer table = workspace(kOp, q, workspace_handle, workspace_bytes, bytes);
    const cl_int per_row_bits = (a.repetition.per_row ? 1 : 0) | (a.presence.per_row ? 2 : 0) |
                                (a.frequency.per_row ? 4 : 0);
    cl::Kernel k = kernel(kOp, q, {{"token_table.cl", "apply_penalties.cl"},
                                   "-DNT_ELEM=" + std::to_string(int(a.logits.dtype))},
                          "nt_apply_penalties");
    set_args(k, logits, cl_ulong(a.logits.row_stride), cl_uint(a.logits.shape[1]), rows, prompt,
             output, per_row_bits, r, a.repetition.scalar, p, a.presence.scalar, f,
             a.frequency.scalar, table, cl_ulong(bytes / (2 * sizeof(cl_uint))));
    const size_t wg = work_group_size(k, q, 256);
    enqueue(k, q, size_t(rows) * wg, wg);
  });
}

}  // namespace nt::opencl
