// apply_penalties on the CPU, the oracle: per row, the ids that matter (the
// prompt's only when the row's repetition penalty is on) are gathered as
// (id, from the output) keys and sorted, so that each distinct token is
// updated once with its prompt membership and output count. Rows are split
// over the pool.
#include <algorithm>
#include <vector>

#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/thread_pool.h"
#include "cpu/token_lists.h"

namespace nt::cpu {

void CpuBackend::apply_penalties(const nt_apply_penalties_args& a, void*, size_t, void*) {
  const int64_t rows = a.logits.shape[0], vocab = a.logits.shape[1];
  const TokenList prompt(a.prompt), output(a.output);
  if (rows == 0 || (prompt.n == 0 && output.n == 0)) return;
  const int dtype = int(a.logits.dtype);
  const int64_t min_rows = min_rows_per_task(prompt.n + output.n, rows);
  parallel_for(rows, min_rows, [&](int64_t begin, int64_t end, int) {
    std::vector<uint64_t> keys;  // id << 1 | (1 for an output occurrence)
    for (int64_t b = begin; b < end; ++b) {
      const float r = nt_resolve_repetition(row_param(a.repetition, b));
      const float f = nt_resolve_additive_penalty(row_param(a.frequency, b));
      const float p = nt_resolve_additive_penalty(row_param(a.presence, b));
      if (r == 1.0f && f == 0.0f && p == 0.0f) continue;
      int64_t plo, phi, olo, ohi;
      prompt.range(b, &plo, &phi);
      output.range(b, &olo, &ohi);
      if (r == 1.0f) plo = phi;  // the prompt only matters to the repetition penalty
      keys.clear();
      for (int64_t i = plo; i < phi; ++i)
        if (prompt.ids[i] >= 0 && prompt.ids[i] < vocab) keys.push_back(uint64_t(prompt.ids[i]) << 1);
      for (int64_t i = olo; i < ohi; ++i)
        if (output.ids[i] >= 0 && output.ids[i] < vocab) keys.push_back(uint64_t(output.ids[i]) << 1 | 1u);
      std::sort(keys.begin(), keys.end());
      void* row = row_address(a.logits, b);
      // Each distinct token once (each is in the prompt or the output).
      for (size_t i = 0; i < keys.size();) {
        const int64_t id = int64_t(keys[i] >> 1);
        uint32_t count = 0;
        for (; i < keys.size() && int64_t(keys[i] >> 1) == id; ++i) count += uint32_t(keys[i] & 1u);
        const float x = widen_element(row, a.logits.dtype, id);
        if (nt_f32_is_nan(x)) continue;  // NaN logits keep their bits
        store_element(row, a.logits.dtype, id, nt_penalize_logit(x, count, r, f, p, dtype));
      }
    }
  });
}

}  // namespace nt::cpu
