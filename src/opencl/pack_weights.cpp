// pack_weights on OpenCL: one work-item per output word.
#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt::opencl {

void OpenclBackend::pack_weights(const nt_pack_weights_args& a, void* stream) {
  const char* op = "pack_weights";
  const Queue q = queue_of(op, stream);
  const cl_ulong rows = cl_ulong(a.signs.shape[0]);
  const cl_uint words = cl_uint(a.signs.shape[1] / 32);
  guarded(op, [&] {
    const View signs = view(op, "signs", q, a.signs);
    const View wq = view(op, "wq", q, a.wq);
    if (rows == 0) return;
    cl::Kernel k = kernel(op, q, {{"pack_weights.cl"}, ""}, "nt_pack_weights");
    set_args(k, signs, cl_ulong(a.signs.row_stride), rows, words, wq, cl_ulong(a.wq.row_stride));
    enqueue(k, q, rows * words, work_group_size(k, q, 256));
  });
}

}  // namespace nt::opencl
