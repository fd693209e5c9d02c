// CSR id lists (penalties, logit bias) as the kernels of token_table.cl take
// them.
#pragma once

#include "core/check.h"
#include "opencl/runtime.h"

namespace nt::opencl {

// offsets (+ offset in elements; mode 0 absent / 1 i32 / 2 i64), ids (+ offset), N.
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

}  // namespace nt::opencl
