// apply_logit_bias on the CPU, the oracle: per row, the valid entries are
// sorted by (id, position), so each token's entries are added one after the
// other in entry order and the token is written once. Rows are split over the
// pool.
#include <algorithm>
#include <vector>

#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/thread_pool.h"
#include "cpu/token_lists.h"

namespace nt::cpu {

void CpuBackend::apply_logit_bias(const nt_apply_logit_bias_args& a, void*, size_t, void*) {
  const int64_t rows = a.logits.shape[0], vocab = a.logits.shape[1];
  const TokenList tokens(a.tokens);
  if (rows == 0 || tokens.n == 0) return;
  const float* values = static_cast<const float*>(a.values.data);
  const int dtype = int(a.logits.dtype);
  parallel_for(rows, min_rows_per_task(tokens.n, rows), [&](int64_t begin, int64_t end, int) {
    std::vector<uint64_t> keys;  // id << 32 | position in the row (< 2^30)
    for (int64_t b = begin; b < end; ++b) {
      int64_t lo, hi;
      tokens.range(b, &lo, &hi);
      keys.clear();
      for (int64_t i = lo; i < hi; ++i)
        if (tokens.ids[i] >= 0 && tokens.ids[i] < vocab)
          keys.push_back(uint64_t(tokens.ids[i]) << 32 | uint64_t(i - lo));
      std::sort(keys.begin(), keys.end());
      void* row = row_address(a.logits, b);
      for (size_t i = 0; i < keys.size();) {
        const int64_t id = int64_t(keys[i] >> 32);
        const float x0 = widen_element(row, a.logits.dtype, id);
        float x = x0;
        for (; i < keys.size() && int64_t(keys[i] >> 32) == id; ++i)
          x = nt_bias_logit(x, values[lo + int64_t(keys[i] & 0xFFFFFFFFu)], dtype);
        if (!nt_f32_is_nan(x0)) store_element(row, a.logits.dtype, id, x);  // NaN keeps its bits
      }
    }
  });
}

}  // namespace nt::cpu
