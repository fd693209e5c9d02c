// Shared pieces of the sampling tests: random parameter sets and the check of a
// device's tokens against the reference and the CPU backend.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "harness/ops.h"

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

// One row of BENCH.md logits ("peaked" or "flat"), rounded to the dtype.
inline void fill_row(Rng& rng, bool peaked, nt_dtype dtype, float* row, int64_t vocab) {
  const std::vector<float> x = peaked ? peaked_logits(rng, 1, vocab) : flat_logits(rng, 1, vocab);
  for (int64_t i = 0; i < vocab; ++i) row[i] = round_to(dtype, x[size_t(i)]);
}

inline void fill_logits(SampleCase& c, Rng& rng, bool peaked) {
  c.logits.assign(size_t(c.rows * c.vocab), 0.0f);
  for (int64_t r = 0; r < c.rows; ++r) fill_row(rng, peaked, c.dtype, &c.logits[size_t(r * c.vocab)], c.vocab);
}

// The contract holds on non-degenerate inputs only: redraw the logits of any row
// the reference finds within the margin of a cut.
inline void redraw_degenerate_rows(SampleCase& c, Rng& rng, bool peaked) {
  for (int64_t r = 0; r < c.rows; ++r)
    for (int tries = 0; reference_sample(c, r).degenerate; ++tries) {
      if (tries == 100)
        throw std::runtime_error("no non-degenerate input found for row " + std::to_string(r) +
                                 " (" + describe(c.row_params(r)) + "): " +
                                 reference_sample(c, r).why_degenerate);
      fill_row(rng, peaked, c.dtype, &c.logits[size_t(r * c.vocab)], c.vocab);
    }
}

// Tokens of `dev` for case `c`: equal to the reference's (Gumbel-max bit for bit,
// or the explicit draw), inside the keep-set, and equal to the CPU backend's.
inline void expect_tokens_match(TestDevice& dev, const SampleCase& c) {
  const std::vector<int64_t> got = run_sample(dev, c);
  std::vector<int64_t> cpu;
  if (dev.type() != NT_DEVICE_CPU) cpu = run_sample(cpu_device(), c);
  for (int64_t r = 0; r < c.rows; ++r) {
    const SampleReference ref = reference_sample(c, r);
    const std::string where = "row " + std::to_string(r) + " of " + std::to_string(c.rows) +
                              ", V=" + std::to_string(c.vocab) + " " + dtype_label(c.dtype) +
                              ", " + describe(c.row_params(r));
    ASSERT_FALSE(ref.degenerate) << where << ": test input is degenerate (" << ref.why_degenerate
                                 << ")";
    EXPECT_EQ(got[size_t(r)], ref.token) << where << ", keep-set size " << ref.keep.size();
    if (ref.token >= 0) {
      bool inside = false;
      for (int64_t k : ref.keep) inside |= k == got[size_t(r)];
      EXPECT_TRUE(inside) << where << ": token " << got[size_t(r)] << " outside the keep-set";
    }
    if (!cpu.empty()) {
      EXPECT_EQ(got[size_t(r)], cpu[size_t(r)]) << where << ": differs from cpu";
    }
  }
}

}  // namespace ntt
