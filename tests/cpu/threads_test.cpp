// The CPU backend's results do not depend on its thread count: work is split
// differently across 1, 2, 3 and 8 workers, and every answer must stay the same.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "harness/ops.h"
#include "ops/sample_support.h"

namespace ntt {
namespace {

class CpuThreads : public ::testing::Test {
 protected:
  void TearDown() override { nt_cpu_set_num_threads(0); }
};

const int kThreadCounts[] = {1, 2, 3, 8};

TEST_F(CpuThreads, NumThreadsIsSettable) {
  for (int n : kThreadCounts) {
    ASSERT_EQ(nt_cpu_set_num_threads(n), NT_OK);
    EXPECT_EQ(nt_cpu_num_threads(), n);
  }
  ASSERT_EQ(nt_cpu_set_num_threads(0), NT_OK);
  const int hw = int(std::thread::hardware_concurrency());
  if (hw > 0) {
    EXPECT_EQ(nt_cpu_num_threads(), hw);
  }
  EXPECT_GE(nt_cpu_num_threads(), 1);
}

TEST_F(CpuThreads, SampleIndependentOfThreadCount) {
  const uint64_t seed = 13000;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 33;
  c.vocab = 40009;
  std::vector<float> t, p, m;
  std::vector<int32_t> k;
  for (int64_t r = 0; r < c.rows; ++r) {
    const RowConfig rc = random_config(rng, c.vocab, true);
    t.push_back(rc.temperature);
    k.push_back(rc.top_k);
    p.push_back(rc.top_p);
    m.push_back(rc.min_p);
  }
  c.temperature = per_row(t);
  c.top_k = per_row(k);
  c.top_p = per_row(p);
  c.min_p = per_row(m);
  c.seed = scalar<uint64_t>(rng.bits());
  c.offset = scalar<uint64_t>(99);
  fill_logits(c, rng, false);
  std::vector<int64_t> first;
  for (int n : kThreadCounts) {
    ASSERT_EQ(nt_cpu_set_num_threads(n), NT_OK);
    const auto tokens = run_sample(cpu_device(), c);
    if (first.empty()) first = tokens;
    EXPECT_EQ(tokens, first) << n << " threads";
    // One long row: any split of a single row must agree too.
    SampleCase one = c;
    one.rows = 1;
    one.logits.resize(size_t(c.vocab));
    for (auto* prm : {&one.temperature, &one.top_p, &one.min_p}) prm->values.resize(1);
    one.top_k.values.resize(1);
    one.seed = scalar<uint64_t>(c.seed.values[0]);
    const SampleReference ref = reference_sample(one, 0);
    if (!ref.degenerate) {
      EXPECT_EQ(run_sample(cpu_device(), one)[0], ref.token) << n << " threads";
    }
  }
}

// Logprobs are each row's own serial passes: bit for bit the same whether rows
// run one per thread or a row's sampling is split over the pool (B < threads).
TEST_F(CpuThreads, SampleLogprobsIndependentOfThreadCount) {
  const uint64_t seed = 13050;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  for (int64_t rows : {1, 2, 9}) {
    SampleCase c;
    c.rows = rows;
    c.vocab = 30011;
    std::vector<float> t, p;
    std::vector<int32_t> k;
    for (int64_t r = 0; r < rows; ++r) {
      t.push_back(float(rng.uniform(0.5, 1.2)));
      k.push_back(r % 3 ? 0 : 50);
      p.push_back(r % 2 ? 0.9f : 1.0f);
    }
    c.temperature = per_row(t);
    c.top_k = per_row(k);
    c.top_p = per_row(p);
    c.seed = scalar<uint64_t>(rng.bits());
    fill_logits(c, rng, false);
    for (uint32_t mode : {uint32_t(NT_LOGPROBS_RAW), uint32_t(NT_LOGPROBS_PROCESSED)}) {
      LogprobsResult first;
      for (int n : kThreadCounts) {
        ASSERT_EQ(nt_cpu_set_num_threads(n), NT_OK);
        const LogprobsResult got = run_sample_logprobs(cpu_device(), c, 20, mode);
        if (first.tokens.empty()) first = got;
        EXPECT_EQ(got.tokens, first.tokens) << n << " threads, B=" << rows;
        EXPECT_EQ(got.ids, first.ids) << n << " threads, B=" << rows;
        EXPECT_EQ(got.ranks, first.ranks) << n << " threads, B=" << rows;
        EXPECT_EQ(0, std::memcmp(got.values.data(), first.values.data(), got.values.size() * 4))
            << n << " threads, B=" << rows;
      }
    }
  }
}

TEST_F(CpuThreads, LmHeadsIndependentOfThreadCount) {
  const uint64_t seed = 13100;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  DenseCase d;
  d.rows = 5;
  d.vocab = 6007;
  d.hidden = 96;
  d.dtype = NT_BF16;
  d.k = 300;
  d.x.resize(size_t(d.rows * d.hidden));
  d.weight.resize(size_t(d.vocab * d.hidden));
  // Grid values: every sum is exact in fp32, so no split of the work can move an index.
  for (auto& v : d.x) v = float(rng.integer(-32, 32)) / 8;
  for (auto& v : d.weight) v = float(rng.integer(-16, 16)) / 16;
  BinaryCase b;
  b.rows = 5;
  b.vocab = 6007;
  b.hidden = 256;
  b.group = 64;
  b.k = 300;
  b.act_q.resize(size_t(b.rows * b.hidden));
  for (auto& q : b.act_q) q = int8_t(rng.integer(-127, 127));
  b.act_scale.assign(size_t(b.rows), 0.0078125f);
  b.signs.resize(size_t(b.vocab * b.hidden));
  for (auto& s : b.signs) s = rng.coin() ? 1 : -1;
  b.wscale.resize(size_t(b.vocab * 4));
  for (auto& w : b.wscale) w = float(rng.integer(1, 64)) / 64;
  TopK dense_first, binary_first;
  for (int n : kThreadCounts) {
    ASSERT_EQ(nt_cpu_set_num_threads(n), NT_OK);
    const TopK dense = run_dense(cpu_device(), d);
    const TopK binary = run_binary(cpu_device(), b);
    if (n == kThreadCounts[0]) {
      dense_first = dense;
      binary_first = binary;
    }
    EXPECT_EQ(dense.indices, dense_first.indices) << n << " threads";
    EXPECT_EQ(dense.values, dense_first.values) << n << " threads";
    EXPECT_EQ(binary.indices, binary_first.indices) << n << " threads";
    EXPECT_EQ(binary.values, binary_first.values) << n << " threads";
  }
}

// Grammar masks large enough to be split over up to 5 tasks, whose boundaries
// fall inside rows: all rows, and listed rows with duplicates (each row masked
// by one task), against the reference at every thread count.
TEST_F(CpuThreads, MaskIndependentOfThreadCount) {
  const uint64_t seed = 13200;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  MaskCase c;
  c.rows = 40;
  c.vocab = 131101;
  c.logits_stride = c.vocab + 3;
  c.words = (c.vocab + 31) / 32 - 2;
  c.mask_stride = c.words + 1;
  c.logits.resize(size_t(c.rows * c.logits_stride));
  for (auto& x : c.logits) x = float(3.0 * rng.normal());
  c.mask.resize(size_t(c.rows * c.mask_stride));
  for (auto& w : c.mask) w = int32_t(uint32_t(rng.bits()));
  MaskCase listed = c;
  listed.has_indices = true;
  for (int i = 0; i < 45; ++i) listed.indices.push_back(rng.integer(-3, c.rows + 2));
  const std::vector<uint8_t> want_all = reference_apply_mask(c);
  const std::vector<uint8_t> want_listed = reference_apply_mask(listed);
  for (int n : kThreadCounts) {
    ASSERT_EQ(nt_cpu_set_num_threads(n), NT_OK);
    EXPECT_TRUE(run_apply_mask(cpu_device(), c) == want_all) << n << " threads, all rows";
    EXPECT_TRUE(run_apply_mask(cpu_device(), listed) == want_listed) << n << " threads, listed rows";
  }
}

}  // namespace
}  // namespace ntt

namespace ntt {
namespace {

// lm_head_sample_dense and a shard summary (queried again at each thread count,
// as the workspace depends on it): the same bits from 1, 2, 3 and 8 workers.
TEST_F(CpuThreads, LmHeadSampleIndependentOfThreadCount) {
  Rng rng(13100);
  SCOPED_TRACE(seed_trace(rng.seed()));
  const int64_t rows = 7, vocab = 5000, hidden = 40, K = 16;
  std::vector<float> x(size_t(rows * hidden)), w(size_t(vocab * hidden)), t(static_cast<size_t>(rows));
  for (auto& v : x) v = float(rng.normal());
  for (auto& v : w) v = float(rng.normal() * 0.2);
  for (auto& v : t) v = float(rng.uniform(0.5, 1.5));
  auto mat = [](void* data, nt_dtype dtype, int64_t r, int64_t c) {
    nt_tensor m{};
    m.data = data; m.dtype = dtype; m.ndim = 2; m.shape[0] = r; m.shape[1] = c; m.row_stride = c;
    m.device = NT_DEVICE_CPU;
    return m;
  };
  nt_lm_head_sample_dense_args a{};
  a.hidden = mat(x.data(), NT_F32, rows, hidden);
  a.weight = mat(w.data(), NT_F32, vocab, hidden);
  a.sampling.temperature = {t.data(), 0.0f};
  a.sampling.top_p = {nullptr, 0.8f};
  a.sampling.min_p = {nullptr, 0.02f};
  a.sampling.seed = {nullptr, rng.bits()};
  std::vector<int64_t> first_tokens, first_summary, first_lp_summary;
  for (int n : kThreadCounts) {
    ASSERT_EQ(nt_cpu_set_num_threads(n), NT_OK);
    std::vector<int64_t> tokens(size_t(rows), kPoisonI64), summary(size_t(rows * (8 + K)), kPoisonI64);
    a.tokens = mat(tokens.data(), NT_I64, rows, 1);
    a.tokens.ndim = 1;
    size_t bytes = 0;
    ASSERT_EQ(nt_lm_head_sample_dense_workspace_size(&a, &bytes), NT_OK) << nt_last_error();
    std::vector<uint8_t> ws(bytes);
    ASSERT_EQ(nt_lm_head_sample_dense(&a, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
    nt_lm_head_shard shard{};
    shard.vocab_start = 1000;
    shard.vocab_size = 9000;
    shard.summary = mat(summary.data(), NT_I64, rows, 8 + K);
    ASSERT_EQ(nt_lm_head_shard_dense_workspace_size(&a, &shard, &bytes), NT_OK) << nt_last_error();
    ws.assign(bytes, 0);
    ASSERT_EQ(nt_lm_head_shard_dense(&a, &shard, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
    // With a logprobs request (the summary's logprobs words and the scores).
    const int64_t S = 8 + K + NT_LM_HEAD_LOGPROBS_WORDS(5);
    std::vector<int64_t> lp_summary(size_t(rows * S), kPoisonI64);
    std::vector<float> scores(size_t(rows * vocab), 7.0f);
    shard.summary = mat(lp_summary.data(), NT_I64, rows, S);
    shard.num_logprobs = 5;
    shard.logprobs_mode = NT_LOGPROBS_PROCESSED;
    shard.scores = mat(scores.data(), NT_F32, rows, vocab);
    ASSERT_EQ(nt_lm_head_shard_dense_workspace_size(&a, &shard, &bytes), NT_OK) << nt_last_error();
    ws.assign(bytes, 0);
    ASSERT_EQ(nt_lm_head_shard_dense(&a, &shard, ws.data(), bytes, nullptr), NT_OK) << nt_last_error();
    if (first_tokens.empty()) {
      first_tokens = tokens;
      first_summary = summary;
      first_lp_summary = lp_summary;
    }
    EXPECT_EQ(tokens, first_tokens) << n << " threads";
    EXPECT_EQ(summary, first_summary) << n << " threads";
    EXPECT_EQ(lp_summary, first_lp_summary) << n << " threads";
  }
}

}  // namespace
}  // namespace ntt
