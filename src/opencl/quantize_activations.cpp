// quantize_activations on OpenCL: one work-group per row.
#include <string>

#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt::opencl {

void OpenclBackend::quantize_activations(const nt_quantize_activations_args& a, void* stream) {
  const char* op = "quantize_activations";
  const Queue q = queue_of(op, stream);
  const size_t rows = size_t(a.x.shape[0]);
  guarded(op, [&] {
    const View x = view(op, "x", q, a.x);
    const View act_q = view(op, "act_q", q, a.act_q);
    const View scale = view(op, "act_scale", q, a.act_scale);
    if (rows == 0) return;
    cl::Kernel k = kernel(op, q, {{"quantize_activations.cl"}, "-DNT_ELEM=" + std::to_string(int(a.x.dtype))},
                          "nt_quantize_activations");
    set_args(k, x, cl_ulong(a.x.row_stride), cl_uint(a.x.shape[1]), act_q,
             cl_ulong(a.act_q.row_stride), scale);
    const size_t wg = work_group_size(k, q, 128);
    enqueue(k, q, rows * wg, wg);
  });
}

}  // namespace nt::opencl
