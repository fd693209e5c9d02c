// bitmask_from_allowed on OpenCL: one work-item per output word.
#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt::opencl {

void OpenclBackend::bitmask_from_allowed(const nt_bitmask_from_allowed_args& a, void* stream) {
  const char* op = "bitmask_from_allowed";
  const Queue q = queue_of(op, stream);
  const cl_ulong rows = cl_ulong(a.allowed.shape[0]);
  const cl_uint vocab = cl_uint(a.allowed.shape[1]);
  guarded(op, [&] {
    const View allowed = view(op, "allowed", q, a.allowed);
    const View bitmask = view(op, "bitmask", q, a.bitmask);
    if (rows == 0 || vocab == 0) return;
    cl::Kernel k = kernel(op, q, {{"bitmask_from_allowed.cl"}, ""}, "nt_bitmask_from_allowed");
    set_args(k, allowed, cl_ulong(a.allowed.row_stride), vocab, rows, bitmask,
             cl_ulong(a.bitmask.row_stride));
    enqueue(k, q, rows * ((vocab + 31) / 32), work_group_size(k, q, 256));
  });
}

}  // namespace nt::opencl
