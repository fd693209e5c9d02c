// Sampled frequencies against the renormalised softmax of the keep-set.
//
// Bound: N independent draws from a distribution p over a support of K tokens,
// empirical frequencies q. E|q_i - p_i| <= sqrt(p_i (1 - p_i) / N), and by
// Cauchy-Schwarz sum_i sqrt(p_i) <= sqrt(K), so E[TV] = E[sum|q_i - p_i|] / 2
// <= 0.5 sqrt(K / N). Changing one draw moves TV by at most 1/N, so McDiarmid
// gives P(TV > E[TV] + t) <= exp(-2 N t^2); t = sqrt(ln(1e6) / (2N)) makes a false
// failure a one-in-a-million event. With N = 40,000 and K <= 40 the bound is
// <= 0.0158 + 0.0131 = 0.029, while dropping or adding one keep-set token of mass
// 1/K, or sampling at the wrong temperature, moves TV by several times that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>

#include "ops/sample_support.h"

namespace ntt {
namespace {

class SampleDistribution : public DeviceTest {};

constexpr int64_t kDraws = 40000;
constexpr int64_t kBatch = 5000;

enum class Cut { kTopK, kTopP, kMinP };

struct Config {
  uint64_t seed;
  nt_dtype dtype;
  RowConfig params;
  uint32_t flags;
  Cut binding;  // the cut that must decide the keep-set, so the test checks it
};

void check_distribution(TestDevice& dev, const Config& cfg) {
  Rng rng(cfg.seed);
  SCOPED_TRACE(seed_trace(cfg.seed) + " " + dtype_label(cfg.dtype));
  const int64_t vocab = 1000;
  SampleCase one;
  one.vocab = vocab;
  one.dtype = cfg.dtype;
  one.temperature = scalar(cfg.params.temperature);
  one.top_k = scalar(cfg.params.top_k);
  one.top_p = scalar(cfg.params.top_p);
  one.min_p = scalar(cfg.params.min_p);
  one.flags = cfg.flags;
  one.logits.resize(size_t(vocab));
  fill_row(rng, false, cfg.dtype, one.logits.data(), vocab);
  redraw_degenerate_rows(one, rng, false);
  const SampleReference ref = reference_sample(one, 0);
  const size_t support = ref.keep.size();
  ASSERT_GE(support, 8u) << "keep-set too small for a meaningful test";
  ASSERT_LE(support, 40u) << "keep-set too large for the bound below";
  // The intended cut decides the keep-set: every other enabled cut is longer.
  const RowConfig& q = cfg.params;
  const std::pair<Cut, size_t> cuts[] = {{Cut::kTopK, q.top_k > 1 ? ref.n_top_k : SIZE_MAX},
                                         {Cut::kTopP, q.top_p < 1 ? ref.n_top_p : SIZE_MAX},
                                         {Cut::kMinP, q.min_p > 0 ? ref.n_min_p : SIZE_MAX}};
  for (const auto& cut : cuts) {
    if (cut.first == cfg.binding) ASSERT_EQ(cut.second, support) << "the intended cut is not the keep-set";
    else ASSERT_GT(cut.second, support) << "another cut is as short as the intended one";
  }
  if (cfg.flags & NT_SAMPLE_TOP_P_JOINT) {  // and joint mode must make a difference
    SampleCase plain = one;
    plain.flags = 0;
    ASSERT_NE(reference_sample(plain, 0).keep.size(), support) << "joint mode changes nothing here";
  }

  // The renormalised softmax of the keep-set, in double.
  std::map<int64_t, double> p;
  double z = 0;
  const float s_max = one.logits[size_t(ref.keep[0])] / cfg.params.temperature;
  for (int64_t i : ref.keep) z += p[i] = std::exp(double(one.logits[size_t(i)] / cfg.params.temperature) - s_max);
  for (auto& kv : p) kv.second /= z;

  // One row, one seed, kDraws offsets, in batches of identical rows.
  const uint64_t sampling_seed = rng.bits();
  std::map<int64_t, int64_t> counts;
  int64_t outside = 0;
  for (int64_t start = 0; start < kDraws; start += kBatch) {
    SampleCase c = one;
    c.rows = kBatch;
    c.logits.clear();
    for (int64_t r = 0; r < kBatch; ++r) c.logits.insert(c.logits.end(), one.logits.begin(), one.logits.end());
    c.seed = per_row(std::vector<uint64_t>(size_t(kBatch), sampling_seed));
    std::vector<uint64_t> offsets;
    for (int64_t r = 0; r < kBatch; ++r) offsets.push_back(uint64_t(start + r) * 7919u);
    c.offset = per_row(offsets);
    const auto tokens = run_sample(dev, c);
    if (dev.type() != NT_DEVICE_CPU) {
      EXPECT_EQ(tokens, run_sample(cpu_device(), c)) << "draws differ from the cpu backend";
    }
    for (int64_t t : tokens) {
      if (p.count(t)) ++counts[t];
      else ++outside;
    }
  }
  EXPECT_EQ(outside, 0) << "draws outside the keep-set";
  double tv = 0;
  for (auto& kv : p) tv += std::fabs(double(counts[kv.first]) / kDraws - kv.second);
  tv /= 2;
  const double bound = 0.5 * std::sqrt(double(support) / kDraws) +
                       std::sqrt(std::log(1e6) / (2.0 * kDraws));
  EXPECT_LE(tv, bound) << "total variation over a keep-set of " << support << " tokens";
  ::testing::Test::RecordProperty("tv", std::to_string(tv));
}

TEST_P(SampleDistribution, MinPDecides) {
  check_distribution(dev(), {8001, NT_F32, {0.8f, 60, 0.95f, 0.15f}, 0, Cut::kMinP});
}

TEST_P(SampleDistribution, JointTopPDecidesOnBf16) {
  check_distribution(dev(), {8002, NT_BF16, {0.5f, 50, 0.4f, 0.0f}, NT_SAMPLE_TOP_P_JOINT, Cut::kTopP});
}

TEST_P(SampleDistribution, TopKDecidesOnF16) {
  check_distribution(dev(), {8003, NT_F16, {1.3f, 25, 1.0f, 0.01f}, 0, Cut::kTopK});
}

NTT_INSTANTIATE_ON_DEVICES(SampleDistribution);

}  // namespace
}  // namespace ntt
