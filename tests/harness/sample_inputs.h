// Random sampling inputs, shared by the sampling suites (tests/ops) and the case
// table of `nexttok check` (cases.cpp): parameter sets, BENCH.md logit rows, and
// the redraw of rows the reference finds degenerate.
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/run_ops.h"

namespace ntt {

struct RowConfig {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
};

// Sampling configurations an engine sends, plus the odd per-row values whose
// meaning SEMANTICS.md fixes (allowed only when `odd`: scalars reject them).
inline RowConfig random_config(Rng& rng, int64_t vocab, bool odd) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  RowConfig c;
  c.temperature = float(rng.uniform(0.3, 1.5));
  switch (rng.integer(0, odd ? 13 : 7)) {
    case 0: break;                                              // plain temperature
    case 1: c.top_k = int32_t(rng.integer(2, 60)); break;
    case 2: c.top_p = float(rng.uniform(0.3, 0.97)); break;
    case 3: c.min_p = float(rng.uniform(0.01, 0.3)); break;
    case 4: c.top_k = 50; c.top_p = 0.9f; break;
    case 5: c.top_k = 50; c.top_p = 0.9f; c.min_p = 0.05f; break;
    case 6: c.top_k = int32_t(rng.integer(2, 400)); c.top_p = float(rng.uniform(0.5, 0.99));
            c.min_p = float(rng.uniform(0.0, 0.1)); break;
    case 7: c.temperature = 0.0f; break;                        // greedy
    case 8: c.top_k = 1; break;                                 // greedy
    case 9: c.temperature = nan; break;                         // greedy
    case 10: c.top_p = rng.coin() ? 0.0f : -0.25f; break;       // keep the top token
    case 11: c.top_p = rng.coin() ? nan : 1.5f; c.top_k = int32_t(vocab + 3); break;  // off
    case 12: c.min_p = rng.coin() ? 2.0f : 1.0f; break;         // only the top score's ties
    case 13: c.top_k = rng.coin() ? -7 : 0; c.min_p = nan; c.temperature = -1.0f; break;
  }
  return c;
}

// One row of BENCH.md logits ("peaked" or "flat", data.h), rounded to the dtype.
inline void fill_row(Rng& rng, bool peaked, nt_dtype dtype, float* row, int64_t vocab) {
  const std::vector<float> x = peaked ? peaked_logits(rng, 1, vocab) : flat_logits(rng, 1, vocab);
  for (int64_t i = 0; i < vocab; ++i) row[i] = round_to(dtype, x[size_t(i)]);
}

inline void fill_logits(SampleCase& c, Rng& rng, bool peaked) {
  c.logits.assign(size_t(c.rows * c.vocab), 0.0f);
  for (int64_t r = 0; r < c.rows; ++r) fill_row(rng, peaked, c.dtype, &c.logits[size_t(r * c.vocab)], c.vocab);
}

// The contract holds on non-degenerate inputs only: refill(row) draws anew the
// logits of any row the reference finds within the margin of a cut.
template <class Refill>
void redraw_degenerate_rows(SampleCase& c, Refill&& refill) {
  for (int64_t r = 0; r < c.rows; ++r)
    for (int tries = 0; reference_sample(c, r).degenerate; ++tries) {
      if (tries == 100)
        throw std::runtime_error("no non-degenerate input found for row " + std::to_string(r) +
                                 " (" + describe(c.row_params(r)) + "): " +
                                 reference_sample(c, r).why_degenerate);
      refill(&c.logits[size_t(r * c.vocab)]);
    }
}

// Every row of c drawn by refill(row), then drawn again while degenerate.
template <class Refill>
void fill_rows(SampleCase& c, Refill&& refill) {
  c.logits.resize(size_t(c.rows * c.vocab));
  for (int64_t r = 0; r < c.rows; ++r) refill(&c.logits[size_t(r * c.vocab)]);
  redraw_degenerate_rows(c, refill);
}

inline void redraw_degenerate_rows(SampleCase& c, Rng& rng, bool peaked) {
  redraw_degenerate_rows(c, [&](float* row) { fill_row(rng, peaked, c.dtype, row, c.vocab); });
}

}  // namespace ntt
