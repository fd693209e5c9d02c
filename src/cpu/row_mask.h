// Grammar-mask kernels of one logits row: tokens [t0, t1) (t0 a multiple of 32)
// whose bit is 0, or whose word lies beyond the mask's `words`, become -inf;
// the others are not written at all, so allowed logits keep their bits.
#pragma once

#include <cstdint>

#include "nexttok/nexttok.h"

namespace nt::cpu {

using MaskRowFn = void (*)(void* row, nt_dtype dtype, const uint32_t* mask, int64_t words,
                           int64_t t0, int64_t t1);

void mask_row_portable(void* row, nt_dtype dtype, const uint32_t* mask, int64_t words,
                       int64_t t0, int64_t t1);
// nullptr when the AVX2 kernel is not compiled in (non-x86 builds).
MaskRowFn mask_row_avx2();

}  // namespace nt::cpu
