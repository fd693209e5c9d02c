// Shared pieces of the sampling tests: random parameters of a case, and the
// check of a device's tokens against the reference and the CPU backend
// (random inputs: harness/sample_inputs.h).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "harness/ops.h"
#include "harness/sample_inputs.h"

namespace ntt {

// Random temperature, top_k, top_p and min_p for c: one per row when
// per_row_params, else one scalar each.
inline void set_configs(SampleCase& c, Rng& rng, bool per_row_params) {
  std::vector<float> t, p, m;
  std::vector<int32_t> k;
  for (int64_t r = 0; r < (per_row_params ? c.rows : 1); ++r) {
    const RowConfig rc = random_config(rng, c.vocab, per_row_params);
    t.push_back(rc.temperature);
    k.push_back(rc.top_k);
    p.push_back(rc.top_p);
    m.push_back(rc.min_p);
  }
  c.temperature = {per_row_params, t};
  c.top_k = {per_row_params, k};
  c.top_p = {per_row_params, p};
  c.min_p = {per_row_params, m};
}

// Random seeds and offsets for c: one per row when per_row_seeds, else scalars.
inline void set_seeds(SampleCase& c, Rng& rng, bool per_row_seeds) {
  std::vector<uint64_t> s, o;
  for (int64_t r = 0; r < (per_row_seeds ? c.rows : 1); ++r) {
    s.push_back(rng.bits());
    o.push_back(rng.coin() ? rng.bits() : uint64_t(rng.integer(0, 1000)));
  }
  c.seed = {per_row_seeds, s};
  c.offset = {per_row_seeds, o};
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
