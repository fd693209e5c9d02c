// CSR id lists of the penalty and logit-bias ops on the host: the clamped
// range of a row (core/penalties.h), and how many rows a pool task takes.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/penalties.h"
#include "nexttok/nexttok.h"

namespace nt::cpu {

struct TokenList {
  const void* offsets = nullptr;  // nullptr: absent (every row empty)
  bool i64 = false;
  const int32_t* ids = nullptr;
  int64_t n = 0;

  explicit TokenList(const nt_token_lists& l) {
    if (l.offsets.data == nullptr) return;
    offsets = l.offsets.data;
    i64 = l.offsets.dtype == NT_I64;
    ids = static_cast<const int32_t*>(l.ids.data);
    n = l.ids.shape[0];
  }
  int64_t offset(int64_t i) const {
    return i64 ? static_cast<const int64_t*>(offsets)[i] : static_cast<const int32_t*>(offsets)[i];
  }
  // [*lo, *hi) of row b, clamped as docs/SEMANTICS.md says.
  void range(int64_t b, int64_t* lo, int64_t* hi) const {
    *lo = *hi = 0;
    if (offsets == nullptr) return;
    *lo = nt_csr_clamp(offset(b), 0, n);
    *hi = nt_csr_clamp(offset(b + 1), *lo, n);
  }
};

// Rows a pool task takes at least: about 16K ids a task (for `ids` over `rows`
// rows), so that small calls stay on the caller.
inline int64_t min_rows_per_task(int64_t ids, int64_t rows) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ids / rows));
}

}  // namespace nt::cpu
