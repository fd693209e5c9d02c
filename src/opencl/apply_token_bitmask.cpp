// apply_token_bitmask on OpenCL: one launch over (selected row, mask word).
#include "core/check.h"
#include "core/half.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt::opencl {

void OpenclBackend::apply_token_bitmask(const nt_apply_token_bitmask_args& a, void* stream) {
  const char* op = "apply_token_bitmask";
  const Queue q = queue_of(op, stream);
  const bool listed = present(a.indices);
  const cl_ulong rows = cl_ulong(a.logits.shape[0]);
  const cl_ulong selected = listed ? cl_ulong(a.indices.shape[0]) : rows;
  const cl_uint vocab = cl_uint(a.logits.shape[1]);
  guarded(op, [&] {
    const View logits = view(op, "logits", q, a.logits);
    const View mask = view(op, "bitmask", q, a.bitmask);
    const View indices = listed ? view(op, "indices", q, a.indices) : View{};
    if (selected == 0 || rows == 0) return;
    const bool wide = a.logits.dtype == NT_F32;
    cl::Kernel k = kernel(op, q, {{"apply_token_bitmask.cl"}, ""}, wide ? "nt_mask_32" : "nt_mask_16");
    const cl_int index_mode = !listed ? 0 : a.indices.dtype == NT_I32 ? 1 : 2;
    set_args(k, logits, cl_ulong(a.logits.row_stride), vocab, rows, mask,
             cl_ulong(a.bitmask.row_stride), cl_uint(a.bitmask.shape[1]), indices, index_mode,
             selected);
    if (wide) k.setArg(13, cl_uint(NT_F32_NEG_INF));
    else k.setArg(13, cl_ushort(a.logits.dtype == NT_F16 ? NT_F16_NEG_INF : NT_BF16_NEG_INF));
    enqueue(k, q, selected * ((vocab + 31) / 32), work_group_size(k, q, 256));
  });
}

}  // namespace nt::opencl
