// Speculative verification (verify_draft, verify_tree) on every device: tokens
// equal to the fp64 reference of harness/reference_verify.cpp wherever it is not
// degenerate and to the CPU backend's everywhere (the decisions are exact
// integer arithmetic on every backend), greedy requests against a plain argmax
// loop, the emitted tokens' distribution against the target's whatever the
// drafts, batch-position independence, edge cases and argument errors.
//
// Distribution bound (as the sampler's distribution test): N draws over a
// support of K tokens, E[TV] <= 0.5 sqrt(K / N), and McDiarmid adds
// sqrt(ln(1e6) / (2N)) for a one-in-a-million false failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <utility>

#include "core/portable_exp.h"
#include "harness/ops.h"

namespace ntt {
namespace {

class VerifyDraft : public DeviceTest {};
class VerifyDistribution : public DeviceTest {};
class VerifyErrors : public DeviceTest {};

constexpr float kInf = INFINITY;
const float kNaN = std::nanf("");

std::string where(const VerifyCase& c, int64_t b) {
  return std::string(c.tree ? "tree" : "chain") + " request " + std::to_string(b) + " of " +
         std::to_string(c.requests) + ", V=" + std::to_string(c.vocab) + " " +
         dtype_label(c.dtype) + ", " + describe(c.request_params(b));
}

// Every request's row is its emitted tokens then -1, num_emitted their number.
void expect_well_formed(const VerifyCase& c, const VerifyResult& r) {
  for (int64_t b = 0; b < c.requests; ++b) {
    const int32_t n = r.num_emitted[size_t(b)];
    ASSERT_TRUE(n >= 0 && n <= c.width) << where(c, b) << ": num_emitted " << n;
    for (int64_t k = 0; k < c.width; ++k) {
      const int32_t t = r.out_ids[size_t(b * c.width + k)];
      if (k < n) EXPECT_TRUE(t >= 0 && t < c.vocab) << where(c, b) << ": token " << t << " at " << k;
      else EXPECT_EQ(t, -1) << where(c, b) << ": position " << k << " after the last token";
    }
  }
}

// Runs c on dev: well formed, equal to the CPU backend's, and equal to the
// reference for every non-degenerate request. Returns the degenerate count.
int64_t expect_matches(TestDevice& dev, const VerifyCase& c, const VerifyResult* known = nullptr) {
  const VerifyResult got = known ? *known : run_verify(dev, c);
  expect_well_formed(c, got);
  if (::testing::Test::HasFatalFailure()) return 0;  // num_emitted out of range: nothing to slice
  if (dev.type() != NT_DEVICE_CPU) {
    const VerifyResult cpu = run_verify(cpu_device(), c);
    EXPECT_EQ(got.out_ids, cpu.out_ids) << "differs from the cpu backend";
    EXPECT_EQ(got.num_emitted, cpu.num_emitted) << "differs from the cpu backend";
    EXPECT_EQ(got.out_nodes, cpu.out_nodes) << "differs from the cpu backend";
  }
  int64_t skipped = 0;
  for (int64_t b = 0; b < c.requests; ++b) {
    const VerifyReference ref = reference_verify(c, b);
    if (ref.degenerate) {
      ++skipped;
      continue;
    }
    const std::vector<int32_t> tokens(got.out_ids.begin() + b * c.width,
                                      got.out_ids.begin() + b * c.width + got.num_emitted[size_t(b)]);
    EXPECT_EQ(tokens, ref.tokens) << where(c, b);
    if (c.with_nodes && !got.out_nodes.empty()) {
      const std::vector<int32_t> nodes(got.out_nodes.begin() + b * c.width,
                                       got.out_nodes.begin() + b * c.width + got.num_emitted[size_t(b)]);
      EXPECT_EQ(nodes, ref.nodes) << where(c, b) << ": accepted nodes";
      for (int64_t k = got.num_emitted[size_t(b)]; k < c.width; ++k)
        EXPECT_EQ(got.out_nodes[size_t(b * c.width + k)], -1) << where(c, b);
    }
  }
  EXPECT_LE(skipped * 10, c.requests) << "too many degenerate requests for a meaningful test";
  return skipped;
}

// Per-request parameters drawn from a few regimes, greedy included.
void random_params(Rng& rng, VerifyCase& c) {
  std::vector<float> t, p, mp;
  std::vector<int32_t> k;
  std::vector<uint64_t> seed, offset;
  for (int64_t b = 0; b < c.requests; ++b) {
    const int regime = int(rng.integer(0, 4));
    t.push_back(regime == 0 ? 0.0f : float(rng.uniform(0.5, 1.5)));
    k.push_back(regime == 2 ? int32_t(rng.integer(2, 6)) : 0);
    p.push_back(regime == 3 ? float(rng.uniform(0.5, 0.95)) : 1.0f);
    mp.push_back(regime == 4 ? float(rng.uniform(0.01, 0.2)) : 0.0f);
    seed.push_back(rng.bits());
    offset.push_back(rng.bits());
  }
  c.temperature = per_row(t);
  c.top_k = per_row(k);
  c.top_p = per_row(p);
  c.min_p = per_row(mp);
  c.seed = per_row(seed);
  c.offset = per_row(offset);
}

TEST_P(VerifyDraft, GreedyEqualsAnArgmaxLoop) {
  for (uint64_t seed : {101u, 102u}) {
    Rng rng(seed);
    SCOPED_TRACE(seed_trace(seed));
    VerifyCase c = random_verify_chain(rng, 9, 77, 4, seed == 102, NT_F32);
    c.temperature = scalar(0.0f);
    const VerifyResult got = run_verify(dev(), c);
    expect_well_formed(c, got);
    for (int64_t b = 0; b < c.requests; ++b) {
      std::vector<int32_t> want;
      const int32_t lo = c.cu[size_t(b)], n = c.cu[size_t(b) + 1] - lo;
      for (int32_t j = 0; j <= n; ++j) {
        const int64_t a = first_argmax(&c.logits[size_t((lo + b + j) * c.vocab)], c.vocab);
        want.push_back(int32_t(a));
        if (j == n || c.draft_ids[size_t(lo + j)] != a) break;
      }
      const std::vector<int32_t> tokens(got.out_ids.begin() + b * c.width,
                                        got.out_ids.begin() + b * c.width + got.num_emitted[size_t(b)]);
      EXPECT_EQ(tokens, want) << where(c, b);
    }
    expect_matches(dev(), c, &got);
  }
}

TEST_P(VerifyDraft, NgramDraftsMatchTheReference) {
  for (uint64_t seed : {201u, 202u, 203u}) {
    Rng rng(seed);
    SCOPED_TRACE(seed_trace(seed));
    VerifyCase c = random_verify_chain(rng, 24, seed == 203 ? 1000 : 45, 5, false,
                                seed == 202 ? NT_BF16 : NT_F32);
    c.row_gap = seed == 201 ? 3 : 0;
    random_params(rng, c);
    expect_matches(dev(), c);
  }
}

TEST_P(VerifyDraft, DraftProbsMatchTheReference) {
  for (uint64_t seed : {301u, 302u}) {
    Rng rng(seed);
    SCOPED_TRACE(seed_trace(seed));
    VerifyCase c = random_verify_chain(rng, 24, seed == 302 ? 300 : 33, 4, true,
                                seed == 302 ? NT_F16 : NT_F32);
    random_params(rng, c);
    if (seed == 302) c.flags = NT_SAMPLE_TOP_P_JOINT;
    expect_matches(dev(), c);
  }
}

TEST_P(VerifyDraft, ScalarParametersAndSeed) {
  Rng rng(351);
  VerifyCase c = random_verify_chain(rng, 16, 64, 3, true, NT_F32);
  c.temperature = scalar(0.8f);
  c.top_k = scalar<int32_t>(20);
  c.top_p = scalar(0.9f);
  c.seed = scalar<uint64_t>(rng.bits());
  c.offset = scalar<uint64_t>(5);
  expect_matches(dev(), c);
}

TEST_P(VerifyDraft, TreeMatchesTheReference) {
  for (uint64_t seed : {401u, 402u, 403u}) {
    Rng rng(seed);
    SCOPED_TRACE(seed_trace(seed));
    VerifyCase c = random_verify_tree(rng, 12, seed == 403 ? 200 : 21, 8, seed == 402 ? 3 : 8);
    random_params(rng, c);
    expect_matches(dev(), c);
  }
}

// The same requests in reverse order, with per-request seeds: each request's
// tokens do not depend on its batch position.
TEST_P(VerifyDraft, ResultsIndependentOfBatchPosition) {
  Rng rng(501);
  VerifyCase c = random_verify_chain(rng, 10, 40, 3, true, NT_F32);
  random_params(rng, c);
  VerifyCase r = c;
  const int64_t B = c.requests, V = c.vocab;
  r.cu = {0};
  r.draft_ids.clear();
  r.draft_probs.clear();
  r.logits.clear();
  auto reverse = [&](auto p) { std::reverse(p.values.begin(), p.values.end()); return p; };
  r.temperature = reverse(c.temperature);
  r.top_k = reverse(c.top_k);
  r.top_p = reverse(c.top_p);
  r.min_p = reverse(c.min_p);
  r.seed = reverse(c.seed);
  r.offset = reverse(c.offset);
  for (int64_t rb = 0; rb < B; ++rb) {
    const int64_t b = B - 1 - rb, lo = c.cu[size_t(b)], n = c.cu[size_t(b) + 1] - lo;
    r.cu.push_back(r.cu.back() + int32_t(n));
    r.draft_ids.insert(r.draft_ids.end(), c.draft_ids.begin() + lo, c.draft_ids.begin() + lo + n);
    r.draft_probs.insert(r.draft_probs.end(), c.draft_probs.begin() + lo * V,
                         c.draft_probs.begin() + (lo + n) * V);
  }
  // Target rows follow the layout: request rb's rows are cu[rb] + rb .. cu[rb+1] + rb.
  for (int64_t rb = 0; rb < B; ++rb) {
    const int64_t b = B - 1 - rb, lo = c.cu[size_t(b)], n = c.cu[size_t(b) + 1] - lo;
    r.logits.insert(r.logits.end(), c.logits.begin() + (lo + b) * V,
                    c.logits.begin() + (lo + b + n + 1) * V);
  }
  const VerifyResult a = run_verify(dev(), c), z = run_verify(dev(), r);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t rb = B - 1 - b;
    EXPECT_EQ(a.num_emitted[size_t(b)], z.num_emitted[size_t(rb)]) << where(c, b);
    for (int64_t k = 0; k < c.width; ++k)
      EXPECT_EQ(a.out_ids[size_t(b * c.width + k)], z.out_ids[size_t(rb * c.width + k)]) << where(c, b);
  }
  expect_matches(dev(), r, &z);
}

// Hand-made requests with known outcomes.
TEST_P(VerifyDraft, EdgeCases) {
  Rng rng(601);
  const int64_t V = 37;
  VerifyCase c;
  c.vocab = V;
  c.width = 3;
  c.requests = 7;
  c.cu = {0, 0, 2, 4, 6, 8, 10, 12};  // request 0 has no drafts
  const int64_t rows = 12 + 7;
  c.logits = normal_logits(rng, rows * V, 1.0);
  auto row = [&](int64_t r) { return &c.logits[size_t(r * V)]; };
  c.draft_ids.assign(12, 0);
  // Request 1 (rows 1..3): top_k = 3 below, its first draft the row's smallest
  // logit, outside the keep-set: rejected at position 0.
  c.draft_ids[0] = int32_t(std::min_element(row(1), row(1) + V) - row(1));
  c.draft_ids[1] = 5;
  // Request 2 (rows 4..6): position 0's row all -inf: nothing is emitted.
  std::fill(row(4), row(4) + V, -kInf);
  // Request 3 (rows 7..9): NaN everywhere but token 11 of position 0, drafted:
  // accepted (p = 1); position 1's row has +inf at 3 and 30, draft 30: accepted
  // with probability 1/2, else 3; the bonus row emits something.
  std::fill(row(7), row(7) + V, kNaN);
  row(7)[11] = 0.5f;
  c.draft_ids[4] = 11;
  row(8)[3] = kInf;
  row(8)[30] = kInf;
  c.draft_ids[5] = 30;
  // Request 4 (rows 10..12): position 1's row all NaN after an accepted draft.
  c.draft_ids[6] = int32_t(first_argmax(row(10), V));
  std::fill(row(11), row(11) + V, kNaN);
  // Request 5 (rows 13..15) and 6 (rows 16..18): random drafts.
  c.draft_ids[8] = 7;
  c.draft_ids[9] = 8;
  c.draft_ids[10] = int32_t(first_argmax(row(16), V));
  c.draft_ids[11] = 1;
  c.top_k = per_row(std::vector<int32_t>{0, 3, 0, 0, 0, 0, 0});
  c.temperature = per_row(std::vector<float>{1, 1, 1, 1, 0, 1, 0.7f});
  std::vector<uint64_t> seeds;
  for (int b = 0; b < 7; ++b) seeds.push_back(rng.bits());
  c.seed = per_row(seeds);
  const VerifyResult r = run_verify(dev(), c);
  expect_matches(dev(), c, &r);
  auto tokens = [&](int64_t b) {
    return std::vector<int32_t>(r.out_ids.begin() + b * 3, r.out_ids.begin() + b * 3 + r.num_emitted[size_t(b)]);
  };
  EXPECT_EQ(r.num_emitted[0], 1) << "no drafts: the bonus token alone";
  ASSERT_EQ(r.num_emitted[1], 1) << "a draft outside the keep-set is rejected at position 0";
  EXPECT_NE(tokens(1)[0], c.draft_ids[0]);
  std::vector<int32_t> top3(static_cast<size_t>(V));
  std::iota(top3.begin(), top3.end(), 0);
  std::stable_sort(top3.begin(), top3.end(), [&](int32_t a, int32_t b) { return row(1)[a] > row(1)[b]; });
  top3.resize(3);
  EXPECT_NE(std::find(top3.begin(), top3.end(), tokens(1)[0]), top3.end()) << "outside the top-3";
  EXPECT_EQ(r.num_emitted[2], 0) << "an empty target row emits nothing";
  ASSERT_GE(r.num_emitted[3], 2);
  EXPECT_EQ(tokens(3)[0], 11);
  EXPECT_TRUE(tokens(3)[1] == 30 || tokens(3)[1] == 3);
  if (tokens(3)[1] == 3) {
    EXPECT_EQ(r.num_emitted[3], 2);
  }
  EXPECT_EQ(tokens(4), std::vector<int32_t>{c.draft_ids[6]}) << "greedy, then an empty row";
}

// Rows of 5,003 tokens whose keep-sets take each of the ways a backend may
// resolve them: a top-k found from a sample of the row, a top-k whose sampled
// estimate holds too many tied tokens (a few 5s among about 2,500 4s) or too
// few (ten high tokens, all sampled, under a top-40), ties past the list but
// not past the candidates (a third of the row at the top value), top-p alone,
// no cut, and a top-512 over more candidates than the list holds (random
// rows: about 1,500 at or above the pivot).
TEST_P(VerifyDraft, LargeRowsEveryKeepSetPath) {
  Rng rng(651);
  const int64_t V = 5003;
  VerifyCase c = random_verify_chain(rng, 10, V, 2, false, NT_F32);
  for (int64_t r = 0; r < c.target_rows(); ++r) {
    float* x = &c.logits[size_t(r * V)];
    const int kind = int(r % 4);
    if (kind == 3) {  // ten high tokens, all where a 64-token sample looks
      for (int j = 0; j < 10; ++j) x[j * 64 + 63] = 10.0f + float(j);
    } else if (kind == 1) {  // 30 fives, about 2,500 fours, the rest below
      for (int64_t i = 0; i < V; ++i) x[i] = float(rng.integer(0, 3)) - float(rng.uniform(0, 0.5));
      for (int n = 0; n < 3500; ++n) x[rng.integer(0, V - 1)] = 4.0f;
      for (int n = 0; n < 30; ++n) x[rng.integer(0, V - 1)] = 5.0f;
    } else if (kind == 2) {  // values 0, 1, 2 only
      for (int64_t i = 0; i < V; ++i) x[i] = float(rng.integer(0, 2));
    }
  }
  const std::vector<int32_t> ks = {20, 5, 0, 0, 64, 40, 512};
  const std::vector<float> ps = {0.93f, 1.0f, 0.73f, 1.0f, 0.95f, 0.91f, 0.97f};
  for (size_t v = 0; v < ks.size(); ++v) {
    SCOPED_TRACE("top_k=" + std::to_string(ks[v]) + " top_p=" + std::to_string(ps[v]));
    c.top_k = scalar(ks[v]);
    c.top_p = scalar(ps[v]);
    c.seed = scalar<uint64_t>(rng.bits());
    expect_matches(dev(), c);
  }
}

// The portable exp is monotone only to within an ulp: at d = -0x1.fd029cp-7 it
// returns one ulp more than at the next float towards 0. With min_p equal to
// the larger value, the min-p prefix ends at the first token below min_p (the
// higher score), so the token after it is out although its probability
// reaches min_p: only the top token is kept, on every backend.
TEST_P(VerifyDraft, MinPCutEndsAtTheFirstTokenBelow) {
  const float d = -0x1.fd029cp-7f;
  const float d_above = std::nextafter(d, 0.0f);
  const float e_low = nt_portable_exp(d), e_high = nt_portable_exp(d_above);
  ASSERT_GT(e_low, e_high) << "the exp's non-monotone step moved";
  VerifyCase c;
  c.vocab = 6;
  c.requests = 8;
  c.width = 2;
  c.cu = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  c.draft_ids.assign(8, 2);  // the token whose probability reaches min_p
  for (int r = 0; r < 16; ++r) {
    const std::vector<float> row = {0.0f, d_above, d, -3.0f, -4.0f, -5.0f};
    c.logits.insert(c.logits.end(), row.begin(), row.end());
  }
  c.min_p = scalar(e_low);
  std::vector<uint64_t> seeds;
  for (uint64_t s = 0; s < 8; ++s) seeds.push_back(1000 + s);
  c.seed = per_row(seeds);
  const VerifyResult r = run_verify(dev(), c);
  for (int64_t b = 0; b < c.requests; ++b) {
    ASSERT_GE(r.num_emitted[size_t(b)], 1);
    EXPECT_EQ(r.out_ids[size_t(b * 2)], 0) << "request " << b;
  }
}

TEST_P(VerifyDraft, OneTokenVocabularyAndMalformedOffsets) {
  Rng rng(701);
  VerifyCase one;
  one.vocab = 1;
  one.requests = 3;
  one.width = 3;
  one.cu = {0, 2, 2, 3};
  one.draft_ids = {0, 0, 0};
  one.logits = normal_logits(rng, 6, 1.0);
  const VerifyResult r = run_verify(dev(), one);
  EXPECT_EQ(r.num_emitted, (std::vector<int32_t>{3, 1, 2}));
  EXPECT_EQ(r.out_ids, (std::vector<int32_t>{0, 0, 0, 0, -1, -1, 0, 0, -1}));

  // Offsets that are not a CSR, and more drafts than out_ids holds: clamped.
  VerifyCase c = random_verify_chain(rng, 4, 50, 4, true, NT_F32);
  c.width = 3;  // max_draft 2
  random_params(rng, c);
  const int32_t td = int32_t(c.draft_ids.size());
  c.cu = {-3, td + 5, 2, 1, td};
  expect_matches(dev(), c);
}

TEST_P(VerifyDraft, EmptyBatch) {
  VerifyCase c;
  c.vocab = 10;
  c.width = 2;
  c.cu = {0};
  EXPECT_TRUE(run_verify(dev(), c).num_emitted.empty());
}

// ---- distributions --------------------------------------------------------------

// Counts of the k-th emitted token among requests that emitted it, against p.
void expect_distribution(const std::vector<int32_t>& tokens, const std::vector<double>& p,
                         const char* what) {
  const double n = double(tokens.size());
  ASSERT_GE(n, 1500) << what << ": too few draws";
  std::map<int32_t, double> counts;
  int64_t outside = 0;
  for (int32_t t : tokens) {
    counts[t] += 1;
    outside += (t < 0 || size_t(t) >= p.size()) ? 1 : 0;
  }
  EXPECT_EQ(outside, 0) << what << ": tokens outside the vocabulary (or none emitted)";
  double tv = 0;
  int64_t support = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    tv += std::fabs(counts[int32_t(i)] / n - p[i]);
    support += p[i] > 0;
    if (p[i] == 0) {
      EXPECT_EQ(counts[int32_t(i)], 0) << what << ": token " << i << " outside the keep-set";
    }
  }
  tv /= 2;
  const double bound = 0.5 * std::sqrt(double(support) / n) + std::sqrt(std::log(1e6) / (2.0 * n));
  EXPECT_LE(tv, bound) << what << ": total variation over " << n << " draws";
}

// Softmax of logits / T over the top-k (fp64): the target distribution.
std::vector<double> target_distribution(const float* x, int64_t vocab, float t, int32_t top_k) {
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
  std::vector<double> p(static_cast<size_t>(vocab), 0.0);
  double z = 0;
  for (int64_t j = 0; j < top_k; ++j) z += p[size_t(order[size_t(j)])] = std::exp(double(x[order[size_t(j)]] / t));
  for (double& v : p) v /= z;
  return p;
}

// N requests with the same three target rows (positions 0, 1 and the bonus)
// and two drafts each drawn from q (or fixed n-gram drafts): the first emitted
// token follows p0, the second (where the first was accepted) p1, the third p2.
void chain_distribution(TestDevice& dev, uint64_t seed, bool with_probs) {
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  const int64_t V = 7, N = 40000;
  const float T = 0.9f;
  const int32_t K = 5;
  const std::vector<float> rows = normal_logits(rng, 3 * V, 1.0);
  const std::vector<float> q0 = random_distribution(rng, V), q1 = random_distribution(rng, V);
  VerifyCase c;
  c.vocab = V;
  c.requests = N;
  c.width = 3;
  c.temperature = scalar(T);
  c.top_k = scalar(K);
  c.cu = {0};
  std::discrete_distribution<int> d0(q0.begin(), q0.end()), d1(q1.begin(), q1.end());
  std::mt19937_64 gen(seed);
  std::vector<uint64_t> seeds;
  for (int64_t b = 0; b < N; ++b) {
    c.cu.push_back(c.cu.back() + 2);
    c.draft_ids.push_back(with_probs ? d0(gen) : 2);
    c.draft_ids.push_back(with_probs ? d1(gen) : 4);
    if (with_probs) {
      c.draft_probs.insert(c.draft_probs.end(), q0.begin(), q0.end());
      c.draft_probs.insert(c.draft_probs.end(), q1.begin(), q1.end());
    }
    c.logits.insert(c.logits.end(), rows.begin(), rows.end());
    seeds.push_back(rng.bits());
  }
  c.seed = per_row(seeds);
  const VerifyResult r = run_verify(dev, c);
  if (dev.type() != NT_DEVICE_CPU) {
    const VerifyResult cpu = run_verify(cpu_device(), c);
    EXPECT_EQ(r.out_ids, cpu.out_ids) << "differs from the cpu backend";
  }
  std::vector<int32_t> first, second, third;
  for (int64_t b = 0; b < N; ++b) {
    const int32_t n = r.num_emitted[size_t(b)];
    ASSERT_GE(n, 1);
    first.push_back(r.out_ids[size_t(b * 3)]);
    if (n >= 2) second.push_back(r.out_ids[size_t(b * 3 + 1)]);
    if (n >= 3) third.push_back(r.out_ids[size_t(b * 3 + 2)]);
  }
  expect_distribution(first, target_distribution(&rows[0], V, T, K), "position 0");
  expect_distribution(second, target_distribution(&rows[size_t(V)], V, T, K), "position 1");
  expect_distribution(third, target_distribution(&rows[size_t(2 * V)], V, T, K), "bonus");
}

TEST_P(VerifyDistribution, ChainWithDraftProbs) { chain_distribution(dev(), 801, true); }
TEST_P(VerifyDistribution, ChainWithNgramDrafts) { chain_distribution(dev(), 802, false); }

// A root with four children (one token twice, one outside the keep-set): the
// first emitted token follows the root row's distribution.
TEST_P(VerifyDistribution, TreeFirstLevel) {
  Rng rng(803);
  const int64_t V = 6, N = 20000, D = 5;
  const float T = 1.1f;
  const int32_t K = 4;
  const std::vector<float> root = normal_logits(rng, V, 1.0);
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return root[size_t(a)] > root[size_t(b)]; });
  VerifyCase c;
  c.tree = true;
  c.vocab = V;
  c.requests = N;
  c.nodes = D;
  c.width = 2;
  c.temperature = scalar(T);
  c.top_k = scalar(K);
  const std::vector<int64_t> cand = {0, order[1], order[0], order[1], order[5]};
  const std::vector<int64_t> next = {1, -1, -1, -1, -1}, sib = {-1, 2, 3, 4, -1};
  std::vector<uint64_t> seeds;
  for (int64_t b = 0; b < N; ++b) {
    c.candidates.insert(c.candidates.end(), cand.begin(), cand.end());
    c.next_token.insert(c.next_token.end(), next.begin(), next.end());
    c.next_sibling.insert(c.next_sibling.end(), sib.begin(), sib.end());
    c.logits.insert(c.logits.end(), root.begin(), root.end());
    for (int64_t d = 1; d < D; ++d) {
      const auto other = normal_logits(rng, V, 1.0);
      c.logits.insert(c.logits.end(), other.begin(), other.end());
    }
    seeds.push_back(rng.bits());
  }
  c.seed = per_row(seeds);
  const VerifyResult r = run_verify(dev(), c);
  ASSERT_NO_FATAL_FAILURE(expect_well_formed(c, r));
  std::vector<int32_t> first;
  for (int64_t b = 0; b < N; ++b) first.push_back(r.out_ids[size_t(b * 2)]);
  expect_distribution(first, target_distribution(root.data(), V, T, K), "tree level 1");
}

// ---- errors ---------------------------------------------------------------------

TEST_P(VerifyErrors, NameTheArgumentAndWriteNothing) {
  const int64_t B = 2, V = 40, td = 3;
  std::vector<float> logits((td + B) * V, 0.5f);
  auto target = to_device(dev(), logits);
  auto drafts = to_device(dev(), std::vector<int32_t>{1, 2, 3});
  auto cu = to_device(dev(), std::vector<int32_t>{0, 2, 3});
  auto probs = to_device(dev(), std::vector<float>(td * V, 0.025f));
  const std::vector<int32_t> poison(B * 3, kPoisonI32);
  auto out = to_device(dev(), poison);
  auto num = to_device(dev(), std::vector<int32_t>(B, kPoisonI32));
  auto valid = [&] {
    nt_verify_draft_args a{};
    a.target_logits = target->matrix(NT_F32, td + B, V);
    a.draft_ids = drafts->vector(NT_I32, td);
    a.cu_num_draft = cu->vector(NT_I32, B + 1);
    a.draft_probs = probs->matrix(NT_F32, td, V);
    a.temperature = {nullptr, 1.0f};
    a.top_k = {nullptr, 0};
    a.top_p = {nullptr, 1.0f};
    a.min_p = {nullptr, 0.0f};
    a.out_ids = out->matrix(NT_I32, B, 3);
    a.num_emitted = num->vector(NT_I32, B);
    return a;
  };
  using A = nt_verify_draft_args;
  const std::vector<std::tuple<const char*, const char*, std::function<void(A&)>>> cases = {
      {"target dtype", "target_logits", [](A& a) { a.target_logits.dtype = NT_I32; }},
      {"target rows", "target_logits", [](A& a) { a.target_logits.shape[0] -= 1; }},
      {"V = 0", "target_logits", [](A& a) { a.target_logits.shape[1] = 0; }},
      {"draft dtype", "draft_ids", [](A& a) { a.draft_ids.dtype = NT_I64; }},
      {"cu length", "cu_num_draft", [](A& a) { a.cu_num_draft.shape[0] = 2; }},
      {"cu null", "cu_num_draft", [](A& a) { a.cu_num_draft.data = nullptr; }},
      {"probs V", "draft_probs", [](A& a) { a.draft_probs.shape[1] = 39; }},
      {"probs dtype", "draft_probs", [](A& a) { a.draft_probs.dtype = NT_F16; }},
      {"out dtype", "out_ids", [](A& a) { a.out_ids.dtype = NT_I64; }},
      {"out no columns", "out_ids", [](A& a) { a.out_ids.shape[1] = 0; }},
      {"num length", "num_emitted", [](A& a) { a.num_emitted.shape[0] = 3; }},
      {"num device", "num_emitted", [](A& a) { a.num_emitted.device_id += 1; }},
      {"temperature NaN", "temperature", [&](A& a) { a.temperature.scalar = kNaN; }},
      {"top_p 0", "top_p", [](A& a) { a.top_p.scalar = 0.0f; }},
      {"min_p 2", "min_p", [](A& a) { a.min_p.scalar = 2.0f; }},
      {"top_k -2", "top_k", [](A& a) { a.top_k.scalar = -2; }},
      {"flags", "flags", [](A& a) { a.flags = 8; }},
  };
  auto untouched = [&](const char* what) {
    EXPECT_EQ(from_device<int32_t>(*out, poison.size()), poison) << what << ": out_ids written";
    EXPECT_EQ(from_device<int32_t>(*num, size_t(B)), std::vector<int32_t>(B, kPoisonI32)) << what;
  };
  for (const auto& [what, arg, mutate] : cases) {
    A a = valid();
    mutate(a);
    size_t bytes = 0;
    EXPECT_EQ(nt_verify_draft_workspace_size(&a, &bytes), NT_ERROR_INVALID_ARGUMENT) << what;
    EXPECT_EQ(nt_verify_draft(&a, nullptr, 0, dev().stream()), NT_ERROR_INVALID_ARGUMENT) << what;
    const std::string message = nt_last_error();
    EXPECT_NE(message.find(std::string("'") + arg + "'"), std::string::npos)
        << what << ": \"" << message << "\" does not name '" << arg << "'";
    dev().sync();
    untouched(what);
  }
  A a = valid();
  size_t bytes = 0;
  ASSERT_EQ(nt_verify_draft_workspace_size(&a, &bytes), NT_OK) << nt_last_error();
  if (bytes > 0) {
    auto ws = std::make_unique<Buffer>(dev(), bytes);
    EXPECT_EQ(nt_verify_draft(&a, ws->handle(), bytes - 1, dev().stream()), NT_ERROR_WORKSPACE);
    EXPECT_NE(std::string(nt_last_error()).find("'workspace_bytes'"), std::string::npos) << nt_last_error();
    dev().sync();
    untouched("short workspace");
  }
  EXPECT_EQ(nt_verify_draft(nullptr, nullptr, 0, dev().stream()), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nt_verify_draft_workspace_size(&a, nullptr), NT_ERROR_INVALID_ARGUMENT);

  // Tree layout.
  const int64_t D = 4;
  auto tree_target = to_device(dev(), std::vector<float>(B * D * V, 0.5f));
  auto nodes = to_device(dev(), std::vector<int64_t>(B * D, -1));
  auto tree_valid = [&] {
    nt_verify_tree_args t{};
    t.target_logits = tree_target->matrix(NT_F32, B * D, V);
    t.candidates = nodes->matrix(NT_I64, B, D);
    t.retrieve_next_token = nodes->matrix(NT_I64, B, D);
    t.retrieve_next_sibling = nodes->matrix(NT_I64, B, D);
    t.temperature = {nullptr, 1.0f};
    t.top_p = {nullptr, 1.0f};
    t.out_ids = out->matrix(NT_I32, B, 3);
    t.num_emitted = num->vector(NT_I32, B);
    return t;
  };
  using T = nt_verify_tree_args;
  const std::vector<std::tuple<const char*, const char*, std::function<void(T&)>>> tree_cases = {
      {"target rows", "target_logits", [](T& t) { t.target_logits.shape[0] = 7; }},
      {"candidates dtype", "candidates", [](T& t) { t.candidates.dtype = NT_I32; }},
      {"next token shape", "retrieve_next_token", [](T& t) { t.retrieve_next_token.shape[1] = 3; }},
      {"next sibling rows", "retrieve_next_sibling", [](T& t) { t.retrieve_next_sibling.shape[0] = 1; }},
      {"out_nodes shape", "out_nodes", [&](T& t) { t.out_nodes = out->matrix(NT_I32, B, 2); }},
      {"out rows", "num_emitted", [&](T& t) { t.out_ids = out->matrix(NT_I32, 1, 3); }},
  };
  for (const auto& [what, arg, mutate] : tree_cases) {
    T t = tree_valid();
    mutate(t);
    EXPECT_EQ(nt_verify_tree(&t, nullptr, 0, dev().stream()), NT_ERROR_INVALID_ARGUMENT) << what;
    const std::string message = nt_last_error();
    EXPECT_NE(message.find(std::string("'") + arg + "'"), std::string::npos)
        << what << ": \"" << message << "\" does not name '" << arg << "'";
    dev().sync();
    untouched(what);
  }
}

NTT_INSTANTIATE_ON_DEVICES(VerifyDraft);
NTT_INSTANTIATE_ON_DEVICES(VerifyDistribution);
NTT_INSTANTIATE_ON_DEVICES(VerifyErrors);

}  // namespace
}  // namespace ntt
