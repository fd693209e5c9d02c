/* The bitmask's rule, for the C++ and CUDA backends (OpenCL's kernels spell it
 * in their own address spaces): word w of a row holds tokens 32w..32w+31, bit
 * set = allowed; tokens at or past 32 * words are disallowed; no mask allows all. */
#ifndef NEXTTOK_CORE_BITMASK_H
#define NEXTTOK_CORE_BITMASK_H

#include <cstdint>

#include "core/portable.h"

NT_FN bool nt_mask_allows(const nt_u32* mask, int64_t words, int64_t token) {
  return mask == nullptr || (token / 32 < words && ((mask[token / 32] >> (token % 32)) & 1u) != 0);
}

#endif /* NEXTTOK_CORE_BITMASK_H */
