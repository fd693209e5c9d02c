// nt_sample on every device: tokens equal to the sort-based reference (Gumbel-max
// bit for bit, the explicit draw at chosen u) and to the CPU backend, determinism,
// batch invariance, non-finite logits, empty keep-sets, V = 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/sampling.h"  // nt_token_gumbel: the test plants a draw's winner
#include "ops/sample_support.h"

namespace ntt {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const nt_dtype kFloatTypes[] = {NT_F32, NT_F16, NT_BF16};

class Sample : public DeviceTest {};

TEST_P(Sample, GreedyTakesTheFirstMaximum) {
  uint64_t seed = 1000;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {1, 7, 33, 1000, 4099}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " V=" + std::to_string(vocab));
      SampleCase c;
      c.rows = 5;
      c.vocab = vocab;
      c.dtype = dtype;
      fill_logits(c, rng, true);
      for (int64_t r = 0; r < c.rows; ++r) {  // plant the maximum twice, plus some NaNs
        float* row = &c.logits[size_t(r * vocab)];
        const int64_t a = rng.integer(0, vocab - 1), b = rng.integer(a, vocab - 1);
        row[a] = row[b] = round_to(dtype, 20.0f);
        if (vocab > 2 && r % 2) row[rng.integer(0, vocab - 1)] = kNaN;
      }
      c.temperature = scalar(0.0f);
      expect_tokens_match(dev(), c);
      c.temperature = scalar(0.8f);  // top_k = 1 is greedy too
      c.top_k = scalar<int32_t>(1);
      c.token_dtype = NT_I32;
      expect_tokens_match(dev(), c);
    }
}

// Gumbel-max: the token is bit-exact, so it must equal the reference's on every
// device. Vocabularies are not multiples of 32 or of any power-of-two chunk.
TEST_P(Sample, GumbelDrawMatchesReference) {
  uint64_t seed = 2000;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {33, 1000, 4099, 50021})
      for (int variant = 0; variant < 4; ++variant) {
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " V=" + std::to_string(vocab) +
                     " variant=" + std::to_string(variant));
        SampleCase c;
        c.rows = vocab > 10000 ? 3 : 6;
        c.vocab = vocab;
        c.dtype = dtype;
        c.row_stride = variant == 1 ? vocab + 13 : 0;
        c.flags = variant == 2 ? NT_SAMPLE_TOP_P_JOINT : 0;
        c.token_dtype = variant == 3 ? NT_I32 : NT_I64;
        set_configs(c, rng, variant % 2 == 0);
        set_seeds(c, rng, variant >= 2);
        const bool peaked = rng.coin();
        fill_logits(c, rng, peaked);
        redraw_degenerate_rows(c, rng, peaked);
        expect_tokens_match(dev(), c);
      }
}

// Plain (temperature-only) rows of BENCH.md's logits at a 128k vocabulary with
// one scalar temperature, the case GPUs take by their leanest scan: on peaked
// rows the Gumbel bound rules groups out once a high logit is seen, on flat
// rows hardly any.
TEST_P(Sample, PlainRowsOfBenchLogits) {
  uint64_t seed = 2400;
  for (float temperature : {0.7f, 1.3f})
    for (bool peaked : {true, false}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + (peaked ? " peaked" : " flat") + " T=" + std::to_string(temperature));
      SampleCase c;
      c.rows = 6;
      c.vocab = 128256 - 3;
      c.temperature = scalar(temperature);
      set_seeds(c, rng, false);
      fill_logits(c, rng, peaked);
      redraw_degenerate_rows(c, rng, peaked);
      expect_tokens_match(dev(), c);
    }
}

TEST_P(Sample, LargeVocabularyMixedBatch) {
  const uint64_t seed = 2500;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 4;
  c.vocab = 128256;
  set_configs(c, rng, true);
  c.top_k = per_row<int32_t>({50, 0, 2048, 50});
  c.top_p = per_row<float>({0.9f, 0.95f, 1.0f, 0.9f});
  c.min_p = per_row<float>({0.05f, 0.0f, 0.0f, 0.0f});
  set_seeds(c, rng, true);
  fill_logits(c, rng, true);
  redraw_degenerate_rows(c, rng, true);
  expect_tokens_match(dev(), c);
}

// Long rows are split into chunks (and into tiles within a chunk) on GPUs, and a
// chunk may admit only what its first tile says can still win: every winner
// planted in one short run (at the row's start, middle or end, so in the first,
// some middle or the last chunk and tile), top_k below and above what one warp
// merges, and integer logits that tie across every chunk.
TEST_P(Sample, WinnersPlantedInOneRunOfALongRow) {
  uint64_t seed = 2700;
  // top_k 128 and 129: the largest keep the CUDA list scan takes, and the
  // smallest it leaves to the general filtered scan.
  const RowConfig configs[] = {{0.7f, 50, 0.9f, 0.05f}, {1.0f, 20, 1.0f, 0.0f},
                               {0.8f, 300, 0.95f, 0.0f}, {1.3f, 64, 0.8f, 0.0f},
                               {0.9f, 128, 1.0f, 0.0f},  {1.1f, 129, 1.0f, 0.0f}};
  for (int64_t vocab : {50021, 128256})
    for (int where = 0; where < 3; ++where)
      for (const RowConfig& rc : configs) {
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(vocab) + " where=" +
                     std::to_string(where) + " top_k=" + std::to_string(rc.top_k));
        SampleCase c;
        c.rows = 2;
        c.vocab = vocab;
        c.temperature = scalar(rc.temperature);
        c.top_k = scalar(rc.top_k);
        c.top_p = scalar(rc.top_p);
        c.min_p = scalar(rc.min_p);
        set_seeds(c, rng, true);
        auto plant = [&](int64_t r) {
          float* row = &c.logits[size_t(r * vocab)];
          fill_row(rng, false, c.dtype, row, vocab);
          const int64_t run = 2 * rc.top_k + 40;
          const int64_t at = where == 0 ? 0 : where == 1 ? rng.integer(0, vocab - run) : vocab - run;
          for (int64_t i = at; i < at + run; ++i) row[i] = float(rng.uniform(6, 9));
        };
        c.logits.assign(size_t(c.rows * vocab), 0.0f);
        for (int64_t r = 0; r < c.rows; ++r) {
          plant(r);
          for (int tries = 0; reference_sample(c, r).degenerate; ++tries) {
            ASSERT_LT(tries, 100);
            plant(r);
          }
        }
        expect_tokens_match(dev(), c);
      }
  // Ties everywhere: the top_k boundary falls inside a value shared by every chunk.
  for (int32_t top_k : {37, 200}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " tied top_k=" + std::to_string(top_k));
    SampleCase c;
    c.rows = 2;
    c.vocab = 128256;
    c.logits.resize(size_t(c.rows * c.vocab));
    for (auto& x : c.logits) x = float(rng.integer(-40, 0)) * 0.25f;
    c.top_k = scalar(top_k);
    c.temperature = scalar(0.9f);
    set_seeds(c, rng, false);
    expect_tokens_match(dev(), c);
  }
  // A batch that fills a GPU with one chunk per row: each chunk is several tiles,
  // so candidates are compacted between tiles.
  Rng rng(++seed);
  SCOPED_TRACE(seed_trace(seed) + " one chunk per row");
  SampleCase c;
  c.rows = 300;
  c.vocab = 30011;
  std::vector<float> t, p, m;
  std::vector<int32_t> k;
  for (int64_t r = 0; r < c.rows; ++r) {
    const int32_t ks[] = {20, 50, 300, 1000};
    t.push_back(float(rng.uniform(0.5, 1.5)));
    k.push_back(ks[r % 4]);
    p.push_back(r % 3 ? 0.9f : 1.0f);
    m.push_back(r % 5 ? 0.0f : 0.05f);
  }
  c.temperature = {true, t};
  c.top_k = {true, k};
  c.top_p = {true, p};
  c.min_p = {true, m};
  set_seeds(c, rng, true);
  fill_logits(c, rng, true);
  redraw_degenerate_rows(c, rng, true);
  expect_tokens_match(dev(), c);
}

// Keep-sets of thousands of tokens (top-p over flat rows, top-k or min-p past
// what the candidate lists hold) are cut where a token decides the draw.
// Logits fall in levels of equal values along the index, so the order is the
// index order; the test finds a "record" r (s_r + G_r beats every earlier
// token) and sets top_k or top_p so that the keep-set ends exactly at r (the
// draw must be r) or one token before it (the draw must not be r): an
// off-by-one cut changes the token. Levels of 700 tokens are finer than a
// GPU histogram bin's capacity; levels of 3000 are not (the exact radix
// fallback takes those rows).
TEST_P(Sample, KeepSetEndsAtAPlantedRecord) {
  uint64_t seed = 2800;
  for (int64_t vocab : {50021, 128256})
    for (int64_t level : {700, 3000})
      for (float temperature : {1.0f, 0.8f}) {
        SampleCase c;
        c.rows = 1;
        c.vocab = vocab;
        c.logits.resize(size_t(vocab));
        for (int64_t i = 0; i < vocab; ++i) c.logits[size_t(i)] = -0.03f * float(i / level);
        // A seed with a record far enough in (a keep-set past every candidate list).
        int64_t record = -1;
        std::vector<double> prefix(static_cast<size_t>(vocab));  // running exp(s_i - s_0), s_0 = 0
        for (;;) {
          ++seed;
          float best = -INFINITY;
          double run = 0.0;
          for (int64_t i = 0; i < vocab; ++i) {
            const float s = nt_scaled_score(c.logits[size_t(i)], temperature);
            const float v = nt_perturbed_score(s, nt_token_gumbel(seed, 0, 0, uint32_t(i)), 0);
            if (v > best) {
              best = v;
              if (i >= 3000 && record < 0) record = i;  // the first: its mass step is wide
            }
            run += std::exp(double(s));
            prefix[size_t(i)] = run;
          }
          if (record >= 0) break;
        }
        SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(vocab) + " level=" +
                     std::to_string(level) + " T=" + std::to_string(temperature) +
                     " record=" + std::to_string(record));
        const double z = prefix[size_t(vocab - 1)];
        auto top_p_ending_at = [&](int64_t last) {  // the middle of token last's mass step
          return float((prefix[size_t(last - 1)] + prefix[size_t(last)]) / 2 / z);
        };
        c.temperature = scalar(temperature);
        c.seed = per_row<uint64_t>({seed, seed, seed, seed});
        c.offset = per_row<uint64_t>({0, 0, 0, 0});
        c.rows = 4;
        const std::vector<float> row = c.logits;
        for (int r = 1; r < 4; ++r) c.logits.insert(c.logits.end(), row.begin(), row.end());
        // Rows: top-p ending at the record, top-p one before, top-k the same two.
        c.top_p = per_row<float>({top_p_ending_at(record), top_p_ending_at(record - 1), 1.0f, 1.0f});
        c.top_k = per_row<int32_t>({0, 0, int32_t(record + 1), int32_t(record)});
        for (int64_t r = 0; r < 4; ++r) {
          const SampleReference ref = reference_sample(c, r);
          ASSERT_FALSE(ref.degenerate) << "row " << r << ": " << ref.why_degenerate;
          ASSERT_EQ(ref.token == record, r % 2 == 0) << "row " << r << ": the test's construction";
        }
        expect_tokens_match(dev(), c);
        // The same rows one at a time with scalar parameters (the host then
        // knows every row is filtered and picks that kernel).
        for (int64_t r = 0; r < 4; ++r) {
          SampleCase one;
          one.vocab = vocab;
          one.logits = row;
          one.temperature = scalar(temperature);
          one.seed = per_row<uint64_t>({seed});
          one.offset = per_row<uint64_t>({0});
          one.top_p = scalar(c.top_p.values[size_t(r)]);
          one.top_k = scalar(c.top_k.values[size_t(r)]);
          expect_tokens_match(dev(), one);
        }
      }
}

// Top-p alone (min-p alone) rows whose keep-set ends near the length of the
// GPU scans' candidate lists (64 a chunk for a row without top-k): 700 tokens
// of equal logit
// spread over the row above a low background, so the order among them is by
// index, and a seed whose Gumbel record among them falls at the wanted
// length. The row cut at the record draws the record; cut one shorter, it
// cannot: a keep-set taken one too long or too short changes the token. The
// rows go as one batch, each alone, and (V = 50,021) repeated into a batch
// large enough that a GPU scans each row in one chunk and draws in the scan.
TEST_P(Sample, NucleusAtTheCandidateListsLength) {
  uint64_t seed = 2900;
  constexpr int64_t kPlanted = 700;
  for (int64_t vocab : {50021, 128256, 262147})
    for (float temperature : {1.0f, 0.8f}) {
      std::vector<float> row(size_t(vocab), -12.0f);
      const int64_t stride = vocab / kPlanted;
      for (int64_t i = 0; i < kPlanted; ++i) row[size_t(i * stride + 3)] = 0.0f;
      const float s_bg = nt_scaled_score(-12.0f, temperature);
      const double z = double(kPlanted) + double(vocab - kPlanted) * std::exp(double(s_bg));
      SampleCase c;
      c.vocab = vocab;
      c.temperature = scalar(temperature);
      std::vector<uint64_t> seeds;
      std::vector<float> top_p, min_p;
      std::vector<int64_t> records;
      // Records that end the keep-set within the 64 candidates a chunk keeps
      // without top-k (drawn where the candidates are merged), just past them
      // and further past (the large keep-set path).
      const int64_t windows[][2] = {{56, 64}, {64, 72}, {120, 136}, {200, 400}};
      for (const auto& w : windows) {
        int64_t record = -1;
        while (record < 0) {
          ++seed;
          float best = -INFINITY;
          for (int64_t i = 0; i < w[1]; ++i) {
            const float g = nt_token_gumbel(seed, 0, 0, uint32_t(i * stride + 3));
            if (g > best) {
              best = g;
              record = i >= w[0] ? i : -1;
            }
          }
        }
        // Row A: top-p through the record (the middle of its mass step); row B:
        // one token shorter; row C: min-p alone would keep every planted token
        // (a draw over all 700 by the same seed, checked only against the
        // reference and the CPU).
        for (int variant = 0; variant < 3; ++variant) {
          seeds.push_back(seed);
          const int64_t last = variant == 0 ? record : record - 1;
          top_p.push_back(variant == 2 ? 1.0f : float((double(last) + 0.5) / z));
          min_p.push_back(variant == 2 ? 0.5f : 0.0f);
          records.push_back(variant == 0 ? record : -1);
        }
      }
      c.rows = int64_t(seeds.size());
      for (int64_t r = 0; r < c.rows; ++r) c.logits.insert(c.logits.end(), row.begin(), row.end());
      c.seed = {true, seeds};
      c.offset = {true, std::vector<uint64_t>(seeds.size(), 0)};
      c.top_p = {true, top_p};
      c.min_p = {true, min_p};
      SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(vocab) + " T=" + std::to_string(temperature));
      for (int64_t r = 0; r < c.rows; ++r) {
        const SampleReference ref = reference_sample(c, r);
        ASSERT_FALSE(ref.degenerate) << "row " << r << ": " << ref.why_degenerate;
        if (r % 3 != 2) {
          ASSERT_EQ(ref.token == records[size_t(r)] * stride + 3, r % 3 == 0)
              << "row " << r << ": the test's construction";
        }
      }
      expect_tokens_match(dev(), c);
      // Each row alone with scalar parameters (the host then knows the class).
      for (int64_t r = 0; r < c.rows; ++r) {
        SampleCase one;
        one.vocab = vocab;
        one.logits = row;
        one.temperature = scalar(temperature);
        one.seed = per_row<uint64_t>({seeds[size_t(r)]});
        one.offset = per_row<uint64_t>({0});
        one.top_p = scalar(top_p[size_t(r)]);
        one.min_p = scalar(min_p[size_t(r)]);
        expect_tokens_match(dev(), one);
      }
      if (vocab == 50021) {
        constexpr int kCopies = 40;  // 480 rows: more than two scan CTAs for each SM of a GPU
        SampleCase many = c;
        many.rows = c.rows * kCopies;
        many.logits.clear();
        for (int64_t r = 0; r < many.rows; ++r)
          many.logits.insert(many.logits.end(), row.begin(), row.end());
        auto repeat = [&](const auto& v) {
          std::remove_cv_t<std::remove_reference_t<decltype(v)>> out;
          for (int k = 0; k < kCopies; ++k) out.insert(out.end(), v.begin(), v.end());
          return out;
        };
        many.seed = {true, repeat(seeds)};
        many.offset = {true, std::vector<uint64_t>(size_t(many.rows), 0)};
        many.top_p = {true, repeat(top_p)};
        many.min_p = {true, repeat(min_p)};
        expect_tokens_match(dev(), many);
      }
    }
}

// More rows whose keep-set reaches past their candidates (top-p alone over
// flat logits) than a GPU holds blocks of the kernels that resolve them, so
// each of those blocks takes several rows in turn; every sixth row of another
// class (greedy, top-k, k50+p0.9) in between.
TEST_P(Sample, ManyRowsPastTheirCandidates) {
  const uint64_t seed = 2950;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 700;
  c.vocab = 8192 + 5;
  std::vector<float> t, p;
  std::vector<int32_t> k;
  for (int64_t r = 0; r < c.rows; ++r) {
    const int kind = r % 6 == 5 ? int(r / 6 % 3) : 3;
    t.push_back(kind == 0 ? 0.0f : 1.0f);
    k.push_back(kind == 1 || kind == 2 ? 50 : 0);
    p.push_back(kind == 2 ? 0.9f : kind == 3 ? 0.95f : 1.0f);
  }
  c.temperature = {true, t};
  c.top_k = {true, k};
  c.top_p = {true, p};
  set_seeds(c, rng, true);
  fill_logits(c, rng, false);
  redraw_degenerate_rows(c, rng, false);
  expect_tokens_match(dev(), c);
}

// Top-p alone over flat scores at temperatures whose logits lie near the ends
// of the float range: T = 1e-30 and 1e30 (1/T normal: GPU scans bound scores
// by x * (1/T), and the large keep-set path tests raw logits against its cut
// bin's window) and 3e38 (1/T subnormal: every logit takes the exact test).
// Logits T * u, u uniform in [-1, 1): scores in [-1, 1], a keep-set past every
// candidate list.
TEST_P(Sample, LargeKeepSetAtExtremeTemperatures) {
  uint64_t seed = 2970;
  for (double temperature : {1e-30, 1e30, 3e38}) {
    Rng rng(++seed);
    char trace[32];
    std::snprintf(trace, sizeof trace, " T=%g", temperature);
    SCOPED_TRACE(seed_trace(seed) + trace);
    SampleCase c;
    c.rows = 3;
    c.vocab = 50021;
    c.temperature = scalar(float(temperature));
    c.top_p = scalar(0.9f);
    set_seeds(c, rng, false);
    fill_rows(c, [&](float* row) {
      for (int64_t i = 0; i < c.vocab; ++i) row[i] = float(temperature * rng.uniform(-1.0, 1.0));
    });
    expect_tokens_match(dev(), c);
  }
}

// Rows the large keep-set path resolves and rows it hands on to the exact
// fallback in one call of per-row parameters (140 of the latter at B = 420,
// more than a GPU has multiprocessors). Of every six rows: top-p alone
// over flat logits and a top-k past the candidates (the large path settles
// both); a top-p renormalized on such a top-k, and top-p alone over logits of
// two values, whose cut falls among thousands of tied scores (both listed
// for the large path, which leaves them to the fallback); greedy; k50+p0.9.
// Then the same rows with explicit draws. B = 6 also runs on sm_90 as one
// cluster a row that resolves its flagged row in the scan kernel.
TEST_P(Sample, LargeKeepSetAndFallbackRowsInOneCall) {
  uint64_t seed = 2960;
  for (const std::array<int64_t, 2> shape : {std::array<int64_t, 2>{420, 8192 + 5}, {6, 128256}}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " B=" + std::to_string(shape[0]) + " V=" + std::to_string(shape[1]));
    SampleCase c;
    c.rows = shape[0];
    c.vocab = shape[1];
    std::vector<float> t, p;
    std::vector<int32_t> k;
    for (int64_t r = 0; r < c.rows; ++r) {
      const int kind = int(r % 6);
      t.push_back(kind == 4 ? 0.0f : 1.0f);
      k.push_back(kind == 1 ? 2000 : kind == 2 ? 3000 : kind == 5 ? 50 : 0);
      p.push_back(kind == 0 ? 0.95f : kind == 2 ? 0.9f : kind == 3 ? 0.3f : kind == 5 ? 0.9f : 1.0f);
    }
    c.temperature = {true, t};
    c.top_k = {true, k};
    c.top_p = {true, p};
    set_seeds(c, rng, true);
    auto refill = [&](float* row) {
      if ((row - c.logits.data()) / c.vocab % 6 == 3) {
        for (int64_t i = 0; i < c.vocab; ++i) row[i] = rng.coin() ? 0.0f : -1.0f;
      } else {
        fill_row(rng, false, c.dtype, row, c.vocab);
      }
    };
    c.logits.assign(size_t(c.rows * c.vocab), 0.0f);
    for (int64_t r = 0; r < c.rows; ++r) refill(&c.logits[size_t(r * c.vocab)]);
    redraw_degenerate_rows(c, refill);
    expect_tokens_match(dev(), c);
    // The same rows with explicit draws, which the large path does not take:
    // nothing listed, the flagged rows straight to the fallback.
    c.uniform.resize(size_t(c.rows));
    for (float& u : c.uniform) u = float(rng.uniform());
    for (int64_t r = 0; r < c.rows; ++r)
      if (reference_sample(c, r).degenerate) c.uniform[size_t(r)] = 0.0f;
    expect_tokens_match(dev(), c);
  }
}

// Top-p alone on a row whose peaks lie far (37) above every logit a sampling
// pass would look at first, and whose top-p target lies 1.1e-6 Z past the
// first peak's mass: Z must hold fp32 accuracy, not the rounding of scores
// measured from a low reference, or the keep-set loses its second token.
// The explicit draw at u = 1 takes the keep-set's last token.
TEST_P(Sample, TopPAloneWithPeaksFarAboveTheRest) {
  SampleCase c;
  c.vocab = 65536;
  c.logits.assign(size_t(c.vocab), -30.0f);
  for (int64_t i = 63; i < c.vocab; i += 64) c.logits[size_t(i)] = -20.0f;
  const float top = 40.0f + 3.0f * std::ldexp(1.0f, -18);
  c.logits[0] = top;
  c.logits[1] = top - 0.6875f;
  c.logits[127] = 3.0f + 9.0f * std::ldexp(1.0f, -22);
  double z = 0.0;
  for (float x : c.logits) z += std::exp(double(x) - double(top));
  c.top_p = scalar(float(1.0 / z + 1.1e-6));
  c.uniform = {1.0f};
  const SampleReference ref = reference_sample(c, 0);
  ASSERT_FALSE(ref.degenerate) << ref.why_degenerate;
  ASSERT_EQ(ref.token, 1) << "the test's construction";
  expect_tokens_match(dev(), c);
}

// A batch of copies of one row, each drawing with its own explicit u: u at the
// middle of chosen keep-set members' CDF intervals pins the keep-set and the
// masses; u = 0, >= 1, < 0 and NaN check the edge rules.
SampleCase explicit_draw_case(const SampleCase& one_row, const SampleReference& ref, Rng& rng) {
  std::vector<float> us = {0.0f, 1.0f, 1.5f, -0.3f, kNaN};
  const size_t n = ref.keep_by_index.size();
  std::vector<size_t> members;
  if (n > 0) members = {0, n - 1};
  for (int i = 0; i < 20 && n > 2; ++i) members.push_back(size_t(rng.integer(1, int64_t(n) - 2)));
  for (size_t j : members) {
    const double lo = j ? ref.cdf[j - 1] : 0.0, hi = ref.cdf[j];
    if (hi - lo > 1e-4) us.push_back(float((lo + hi) / 2));
  }
  for (int i = 0; i < 8; ++i) us.push_back(float(rng.uniform()));
  SampleCase c = one_row;
  c.rows = int64_t(us.size());
  c.logits.clear();
  for (int64_t r = 0; r < c.rows; ++r)
    c.logits.insert(c.logits.end(), one_row.logits.begin(), one_row.logits.end());
  c.uniform = us;
  // Random u may land near a CDF boundary: replace those by u = 0.
  for (int64_t r = 0; r < c.rows; ++r)
    if (reference_sample(c, r).degenerate) c.uniform[size_t(r)] = 0.0f;
  return c;
}

TEST_P(Sample, ExplicitDrawMatchesInverseCdf) {
  uint64_t seed = 3000;
  const RowConfig configs[] = {
      {0.8f, 0, 1.0f, 0.0f},  {1.0f, 40, 1.0f, 0.0f},  {0.7f, 0, 0.9f, 0.0f},
      {1.2f, 0, 1.0f, 0.1f},  {1.0f, 50, 0.9f, 0.05f}, {0.9f, 300, 0.8f, 0.0f},
      {1.0f, 2047, 0.95f, 0.0f}};
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {1000, 4099})
      for (const RowConfig& rc : configs)
        for (bool joint : {false, true}) {
          Rng rng(++seed);
          SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " V=" + std::to_string(vocab));
          SampleCase one;
          one.vocab = vocab;
          one.dtype = dtype;
          one.temperature = scalar(rc.temperature);
          one.top_k = scalar(rc.top_k);
          one.top_p = scalar(rc.top_p);
          one.min_p = scalar(rc.min_p);
          one.flags = joint ? NT_SAMPLE_TOP_P_JOINT : 0;
          one.uniform = {0.5f};
          const bool peaked = rng.coin();
          fill_logits(one, rng, peaked);
          redraw_degenerate_rows(one, rng, peaked);
          expect_tokens_match(dev(), explicit_draw_case(one, reference_sample(one, 0), rng));
        }
}

// Top-k cuts ties by index: integer logits tie massively, and -0 ties with +0.
TEST_P(Sample, TopKBoundaryTiesGoToTheLowerIndex) {
  const uint64_t seed = 3500;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase one;
  one.vocab = 777;
  one.logits.resize(777);
  for (auto& x : one.logits) x = float(rng.integer(-6, 0));
  for (auto& x : one.logits)
    if (x == 0.0f && rng.coin()) x = -0.0f;
  one.top_k = scalar<int32_t>(37);
  one.uniform = {0.5f};
  for (nt_dtype dtype : kFloatTypes) {
    one.dtype = dtype;
    const SampleReference ref = reference_sample(one, 0);
    ASSERT_EQ(ref.keep.size(), 37u);
    expect_tokens_match(dev(), explicit_draw_case(one, ref, rng));
  }
}

TEST_P(Sample, RepeatedCallsAreBitwiseEqual) {
  const uint64_t seed = 4000;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 64;
  c.vocab = 5003;
  set_configs(c, rng, true);
  set_seeds(c, rng, true);
  fill_logits(c, rng, false);
  const auto first = run_sample(dev(), c);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run_sample(dev(), c), first) << "repeat " << i;
}

// Per-row seeds: a row's token depends on its own data and parameters only.
TEST_P(Sample, PerRowSeedsMakeTokensBatchInvariant) {
  const uint64_t seed = 5000;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  const int64_t vocab = 3001;
  SampleCase big;
  big.rows = 13;
  big.vocab = vocab;
  set_configs(big, rng, true);
  set_seeds(big, rng, true);
  fill_logits(big, rng, true);
  // Promised on non-degenerate inputs: a backend may split a row differently
  // for different batch sizes, which moves fp32 masses in the last bits.
  redraw_degenerate_rows(big, rng, true);
  const auto big_tokens = run_sample(dev(), big);

  auto pick = [&](const std::vector<int64_t>& rows) {
    SampleCase c = big;
    c.rows = int64_t(rows.size());
    c.logits.clear();
    auto take = [&](auto& param) {
      auto all = param.values;
      param.values.clear();
      for (int64_t r : rows) param.values.push_back(all[size_t(r)]);
    };
    take(c.temperature); take(c.top_k); take(c.top_p); take(c.min_p); take(c.seed); take(c.offset);
    for (int64_t r : rows)
      c.logits.insert(c.logits.end(), big.logits.begin() + r * vocab, big.logits.begin() + (r + 1) * vocab);
    return c;
  };
  const std::vector<int64_t> subsets[] = {{12, 3, 7, 0}, {5}, {9, 9, 1, 2, 11, 4, 6, 8, 10, 3}};
  for (const auto& rows : subsets) {
    const auto tokens = run_sample(dev(), pick(rows));
    for (size_t j = 0; j < rows.size(); ++j)
      EXPECT_EQ(tokens[j], big_tokens[size_t(rows[j])])
          << "row " << rows[j] << " moved to position " << j << " of " << rows.size();
  }
}

// Top-p alone sums the row's mass over every token: masked (-inf) and NaN
// logits add nothing, at temperatures from 0.3 (scores up to about 50) to 1.5,
// on rows whose length leaves part of the last tile past the row, peaked and
// flat (a nucleus past every candidate list: the GPUs' large keep-set passes
// meet the masked and NaN logits in their histograms); in f32, row 2
// holds three equal logits whose score x / T rounds to FLT_MAX, where x times
// a rounded 1/T overflows (the nucleus: the three; their score plus any Gumbel
// value rounds to FLT_MAX, so the draw takes the first, and the keep-set is
// checked by SampleLogprobs.TopPNucleusAtTheLargestScore).
TEST_P(Sample, TopPMassOverMaskedAndNaNLogits) {
  uint64_t seed = 6100;
  for (bool peaked : {true, false})
    for (nt_dtype dtype : {NT_F32, NT_BF16}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + (peaked ? " peaked" : " flat"));
      SampleCase c;
      c.rows = 8;
      c.vocab = 32007;
      c.dtype = dtype;
      c.temperature = per_row<float>({0.7f, 0.8f, 0x1.8fe48ap-2f, 1.2f, 1.5f, 0.3f, 1.0f, 0.5f});
      c.top_p = scalar(0.9f);
      std::vector<uint64_t> seeds;
      for (int64_t r = 0; r < c.rows; ++r) seeds.push_back(rng.bits());
      c.seed = per_row(seeds);
      auto make_row = [&](float* row) {
        fill_row(rng, peaked, dtype, row, c.vocab);
        for (int64_t i = 0; i < c.vocab / 5; ++i) row[rng.integer(0, c.vocab - 1)] = -kInf;
        for (int64_t i = 0; i < c.vocab / 100; ++i) row[rng.integer(0, c.vocab - 1)] = kNaN;
      };
      fill_rows(c, make_row);
      if (dtype == NT_F32)
        for (int64_t i : {int64_t(5), int64_t(16000), c.vocab - 1})
          c.logits[size_t(2 * c.vocab + i)] = 0x1.8fe488p+126f;
      expect_tokens_match(dev(), c);
    }
}

TEST_P(Sample, NonFiniteLogits) {
  uint64_t seed = 6000;
  for (nt_dtype dtype : kFloatTypes) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype));
    SampleCase c;
    c.rows = 8;
    c.vocab = 1500;
    c.dtype = dtype;
    c.logits.resize(size_t(c.rows * c.vocab));
    set_configs(c, rng, true);
    set_seeds(c, rng, rng.coin());
    auto row = [&](int64_t r) { return &c.logits[size_t(r * c.vocab)]; };
    // Rows 0-3: NaN and -inf sprinkled over peaked logits; row 7: NaN only.
    auto make_row = [&](int64_t r) {
      fill_row(rng, true, dtype, row(r), c.vocab);
      if (r < 4)
        for (int i = 0; i < 150; ++i) row(r)[rng.integer(0, c.vocab - 1)] = rng.coin() ? kNaN : -kInf;
      if (r == 7)
        for (int i = 0; i < 40; ++i) row(r)[rng.integer(0, c.vocab - 1)] = kNaN;
    };
    for (int64_t r = 0; r < c.rows; ++r) make_row(r);
    row(4)[1234] = kInf;  // one +inf: always that token
    for (int i = 0; i < 5; ++i) row(5)[rng.integer(0, c.vocab - 1)] = kInf;  // several: uniform
    row(5)[3] = kNaN;
    row(6)[77] = kInf;
    row(6)[900] = kInf;
    row(6)[5] = -kInf;
    for (int64_t r : {0, 1, 2, 3, 7})
      for (int tries = 0; reference_sample(c, r).degenerate; ++tries) {
        ASSERT_LT(tries, 100);
        make_row(r);
      }
    expect_tokens_match(dev(), c);
    c.temperature = scalar(0.0f);
    expect_tokens_match(dev(), c);
    // The explicit draw over several +inf tokens is uniform among them.
    SampleCase one;
    one.vocab = c.vocab;
    one.dtype = dtype;
    one.logits.assign(row(5), row(5) + c.vocab);
    one.uniform = {0.5f};
    expect_tokens_match(dev(), explicit_draw_case(one, reference_sample(one, 0), rng));
  }
}

// Several +inf scores make the keep-set whatever the cuts say: rows whose
// top_p, top_k or min_p alone would keep one token still draw among them.
TEST_P(Sample, PositiveInfinityRuleComesBeforeTheCuts) {
  const uint64_t seed = 6500;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 6;
  c.vocab = 3000;
  fill_logits(c, rng, true);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int i = 0; i < 4; ++i) c.logits[size_t(r * c.vocab + rng.integer(0, c.vocab - 1))] = kInf;
  c.top_p = per_row<float>({0.0f, -0.25f, 1.0f, 0.5f, 1.0f, 0.9f});
  c.top_k = per_row<int32_t>({0, 0, 2, 0, 0, 3});
  c.min_p = per_row<float>({0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.5f});
  c.temperature = per_row<float>({1.0f, 0.7f, 1.3f, 1.0f, 0.5f, 2.0f});
  set_seeds(c, rng, true);
  expect_tokens_match(dev(), c);
  c.uniform = {0.1f, 0.6f, 0.99f, 0.3f, 0.0f, 0.8f};
  expect_tokens_match(dev(), c);
}

TEST_P(Sample, FullyMaskedRowsGiveMinusOne) {
  uint64_t seed = 7000;
  for (nt_dtype dtype : kFloatTypes)
    for (nt_dtype token_dtype : {NT_I64, NT_I32}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype));
      SampleCase c;
      c.rows = 6;
      c.vocab = 2049;
      c.dtype = dtype;
      c.token_dtype = token_dtype;
      fill_logits(c, rng, false);
      for (int64_t r : {0, 2, 3, 5})
        for (int64_t i = 0; i < c.vocab; ++i)
          c.logits[size_t(r * c.vocab + i)] = r == 0 ? -kInf : r == 2 ? kNaN : rng.coin() ? kNaN : -kInf;
      c.temperature = per_row<float>({1.0f, 0.7f, 0.0f, 1.0f, 0.5f, 1.3f});
      c.top_k = per_row<int32_t>({0, 50, 0, 1, 0, 5});
      c.top_p = per_row<float>({1.0f, 0.9f, 1.0f, 1.0f, 0.0f, 0.5f});
      c.min_p = per_row<float>({0.0f, 0.05f, 0.0f, 0.0f, 0.0f, 0.2f});
      set_seeds(c, rng, false);
      redraw_degenerate_rows(c, rng, false);
      expect_tokens_match(dev(), c);
      const auto tokens = run_sample(dev(), c);
      for (int64_t r : {0, 2, 3, 5}) EXPECT_EQ(tokens[size_t(r)], -1) << "row " << r;
      c.uniform = {0.3f, 0.9f, 0.0f, 1.0f, 0.5f, 0.99f};
      redraw_degenerate_rows(c, rng, false);
      expect_tokens_match(dev(), c);
    }
}

// Top-p alone on a row whose nucleus ends just inside or just past the CPU
// scan's candidate list (at V = 128,256: the tokens at or above the 10th
// largest of every 250th logit): 2000 tokens of distinct, falling logits,
// every 50th of them on a sampled position (250 s + 249), the others past
// those, so the list ends at nucleus token 450. A
// seed puts a Gumbel record (a token beating every one before it in the
// order) inside or past that end; the row cut at the record draws it, cut
// one token shorter it cannot, so a keep-set resolved from a list that does
// not hold the nucleus (or cut anywhere else) changes the token.
TEST_P(Sample, NucleusAroundTheScanCandidates) {
  constexpr int64_t kVocab = 128256, kNucleus = 2000;
  uint64_t seed = 3100;
  for (float temperature : {1.0f, 0.8f})
    for (const std::array<int64_t, 2> window : {std::array<int64_t, 2>{400, 450}, {451, 510}}) {
      Rng rng(++seed);
      std::vector<float> row(static_cast<size_t>(kVocab));
      for (float& x : row) x = float(rng.uniform(-14.0, -12.0));
      std::vector<int64_t> position(static_cast<size_t>(kNucleus));  // nucleus token j, in the order
      for (int64_t j = 0; j < kNucleus; ++j) {
        position[size_t(j)] = j % 50 == 0 ? 250 * (j / 50) + 249 : 10250 + 50 * j + rng.integer(0, 48);
        row[size_t(position[size_t(j)])] = -0.002f * float(j) - float(rng.uniform(0.0, 0.001));
      }
      // A seed with a record inside the window.
      int64_t record = -1;
      while (record < 0) {
        ++seed;
        float best = -INFINITY;
        for (int64_t j = 0; j < kNucleus; ++j) {
          const int64_t i = position[size_t(j)];
          const float v = nt_perturbed_score(nt_scaled_score(row[size_t(i)], temperature),
                                             nt_token_gumbel(seed, 0, 0, uint32_t(i)), 0);
          if (v <= best) continue;
          best = v;
          if (j >= window[0] && j <= window[1]) record = j;
        }
      }
      auto mass = [&](int64_t j) {
        return std::exp(double(nt_scaled_score(row[size_t(position[size_t(j)])], temperature)));
      };
      double z = 0.0, before = 0.0;  // before: the mass ranked before the record
      for (float x : row) z += std::exp(double(nt_scaled_score(x, temperature)));
      for (int64_t j = 0; j < record; ++j) before += mass(j);
      SCOPED_TRACE(seed_trace(seed) + " T=" + std::to_string(temperature) + " record=" +
                   std::to_string(record));
      SampleCase c;
      c.rows = 2;
      c.vocab = kVocab;
      c.logits = row;
      c.logits.insert(c.logits.end(), row.begin(), row.end());
      c.temperature = scalar(temperature);
      c.seed = per_row<uint64_t>({seed, seed});
      c.offset = per_row<uint64_t>({0, 0});
      // The middle of the record's mass step, and of the step before it.
      c.top_p = per_row<float>({float((before + mass(record) / 2) / z),
                                float((before - mass(record - 1) / 2) / z)});
      for (int64_t r = 0; r < 2; ++r) {
        const SampleReference ref = reference_sample(c, r);
        ASSERT_FALSE(ref.degenerate) << "row " << r << ": " << ref.why_degenerate;
        ASSERT_EQ(ref.token == position[size_t(record)], r == 0) << "row " << r << ": the construction";
      }
      expect_tokens_match(dev(), c);
    }
}

TEST_P(Sample, SingleTokenVocabulary) {
  SampleCase c;
  c.rows = 5;
  c.vocab = 1;
  c.logits = {0.25f, -kInf, kNaN, kInf, -3.0f};
  c.temperature = per_row<float>({1.0f, 1.0f, 0.7f, 0.5f, 0.0f});
  c.top_p = per_row<float>({0.5f, 1.0f, 0.9f, 0.1f, 1.0f});
  c.top_k = per_row<int32_t>({0, 5, 1, 0, 0});
  for (nt_dtype dtype : kFloatTypes) {
    c.dtype = dtype;
    c.uniform.clear();
    const std::vector<int64_t> want = {0, -1, -1, 0, 0};
    EXPECT_EQ(run_sample(dev(), c), want) << dtype_label(dtype);
    c.uniform = {0.5f, 0.5f, 0.0f, 0.999f, 0.1f};
    EXPECT_EQ(run_sample(dev(), c), want) << dtype_label(dtype) << " explicit draw";
  }
}

TEST_P(Sample, EmptyBatchIsANoOp) {
  SampleCase c;
  c.rows = 0;
  c.vocab = 100;
  EXPECT_TRUE(run_sample(dev(), c).empty());
}

NTT_INSTANTIATE_ON_DEVICES(Sample);

}  // namespace
}  // namespace ntt
