// Grammar-mask kernels of one logits row: tokens [t0, t1) (t0 a multiple of 32)
// whose bit is 0, or whose word lies at or beyond the mask's `words`, become
// -inf; the others keep their bits (never written, or written back as read).
// Three implementations with identical results, chosen at run time
// (mask_row_kernel): AVX-512 masked stores (one or two a mask word, the
// logits never read), AVX2 blends, and portable C++.
#pragma once

#include <cstdint>

#include "nexttok/nexttok.h"

namespace nt::cpu {

using MaskRowFn = void (*)(void* row, nt_dtype dtype, const uint32_t* mask, int64_t words,
                           int64_t t0, int64_t t1);

void mask_row_portable(void* row, nt_dtype dtype, const uint32_t* mask, int64_t words,
                       int64_t t0, int64_t t1);
// nullptr when the kernel is not compiled in (non-x86 builds); run them only
// where use_avx2() / use_avx512() (cpu/row_io.h) say the CPU has them.
MaskRowFn mask_row_avx2();
MaskRowFn mask_row_avx512();

// The best of the three this CPU runs; chosen once.
MaskRowFn mask_row_kernel();

}  // namespace nt::cpu
