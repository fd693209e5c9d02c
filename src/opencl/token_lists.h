// CSR id lists (penalties, logit bias) as the kernels of token_table.cl take
// them.
#pragma once

#include "core/check.h"
#include "opencl/runtime.h"

namespace nt::opencl {

// offsets (mode 0 absent / 1 i32 / 2 i64), ids, N.
struct ListArgs {
  View offsets, ids;
  cl_int mode = 0;
  cl_ulong n = 0;
};

inline ListArgs list_args(const char* op, const Queue& q, const char* offsets_arg,
                          const char* ids_arg, const nt_token_lists& l) {
  ListArgs out;
  if (!present(l.offsets)) return out;
  out.offsets = view(op, offsets_arg, q, l.offsets);
  out.ids = view(op, ids_arg, q, l.ids);
  out.mode = l.offsets.dtype == NT_I64 ? 2 : 1;
  out.n = cl_ulong(l.ids.shape[0]);
  return out;
}

// A list's kernel arguments: offsets (buffer, offset), mode, ids (buffer, offset), N.
inline void set_arg(cl::Kernel& k, cl_uint& i, const ListArgs& l) {
  set_arg(k, i, l.offsets);
  set_arg(k, i, l.mode);
  set_arg(k, i, l.ids);
  set_arg(k, i, l.n);
}

}  // namespace nt::opencl
