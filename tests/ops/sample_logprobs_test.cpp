// nt_sample_logprobs on every device: tokens equal to nt_sample's for the same
// arguments (and to the reference's), listed ids and ranks equal to the
// sort-based reference, values within the documented tolerance of its fp64
// log-softmax, in both modes; non-finite and fully masked rows, V = 1, n > V,
// greedy and explicit-draw rows, strided outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "ops/sample_support.h"

namespace ntt {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const nt_dtype kFloatTypes[] = {NT_F32, NT_F16, NT_BF16};
const uint32_t kModes[] = {NT_LOGPROBS_RAW, NT_LOGPROBS_PROCESSED};

class SampleLogprobs : public DeviceTest {};

const char* mode_label(uint32_t mode) { return mode == NT_LOGPROBS_RAW ? "raw" : "processed"; }

// The device's result for c against nt_sample on the same device (tokens bit
// for bit) and the reference of every row.
void expect_logprobs_match(TestDevice& dev, const SampleCase& c, int n, uint32_t mode,
                           int64_t out_gap = 0, bool check_reference_token = true) {
  const LogprobsResult got = run_sample_logprobs(dev, c, n, mode, out_gap);
  const std::vector<int64_t> sampled = run_sample(dev, c);
  const bool processed = mode == NT_LOGPROBS_PROCESSED;
  for (int64_t r = 0; r < c.rows; ++r) {
    const std::string where = "row " + std::to_string(r) + " of " + std::to_string(c.rows) +
                              ", V=" + std::to_string(c.vocab) + " " + dtype_label(c.dtype) +
                              ", n=" + std::to_string(n) + " " + mode_label(mode) + ", " +
                              describe(c.row_params(r));
    EXPECT_EQ(got.tokens[size_t(r)], sampled[size_t(r)]) << where << ": differs from nt_sample";
    const LogprobsReference ref = reference_logprobs(c, r, n, processed);
    if (check_reference_token) {
      const SampleReference sref = reference_sample(c, r);
      ASSERT_FALSE(sref.degenerate) << where << ": test input is degenerate";
      EXPECT_EQ(got.tokens[size_t(r)], ref.ids[0]) << where << ": token differs from the reference";
    }
    if (got.tokens[size_t(r)] != ref.ids[0]) continue;  // the rest is judged for the same token
    EXPECT_EQ(got.ranks[size_t(r)], ref.rank) << where << ": rank";
    for (int64_t col = 0; col <= n; ++col) {
      const size_t at = size_t(r * got.columns + col);
      EXPECT_EQ(got.ids[at], ref.ids[size_t(col)]) << where << ": id of column " << col;
      EXPECT_TRUE(logprob_close(got.values[at], ref.values[size_t(col)]))
          << where << ": value of column " << col << " (id " << got.ids[at] << ") is "
          << got.values[at] << ", reference " << ref.values[size_t(col)];
    }
  }
}

void set_random_params(SampleCase& c, Rng& rng, bool per_row_params) {
  set_configs(c, rng, per_row_params);
  set_seeds(c, rng, per_row_params);
}

// A row's temperature, top-k and top-p.
struct RowFilter {
  float temperature;
  int32_t top_k;
  float top_p;
};

// Per-row filters f(r) for every row r of c, and a per-row seed each.
template <class F>
void set_row_filters(SampleCase& c, Rng& rng, F&& f) {
  std::vector<float> t, p;
  std::vector<int32_t> k;
  std::vector<uint64_t> seeds;
  for (int64_t r = 0; r < c.rows; ++r) {
    const RowFilter row = f(r);
    t.push_back(row.temperature);
    k.push_back(row.top_k);
    p.push_back(row.top_p);
    seeds.push_back(rng.bits());
  }
  c.temperature = per_row(t);
  c.top_k = per_row(k);
  c.top_p = per_row(p);
  c.seed = per_row(seeds);
}

// Random rows of every kind of parameter set, every dtype, n in {0, 1, 5, 20},
// both modes; V not a multiple of 32; strided inputs and outputs.
TEST_P(SampleLogprobs, MatchesReference) {
  uint64_t seed = 7000;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {33, 1000, 4099})
      for (int n : {0, 1, 5, 20}) {
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " V=" + std::to_string(vocab) +
                     " n=" + std::to_string(n));
        SampleCase c;
        c.rows = 6;
        c.vocab = vocab;
        c.dtype = dtype;
        c.row_stride = n == 5 ? vocab + 13 : 0;
        c.token_dtype = n == 1 ? NT_I32 : NT_I64;
        set_random_params(c, rng, n != 0);
        const bool peaked = rng.coin();
        fill_logits(c, rng, peaked);
        redraw_degenerate_rows(c, rng, peaked);
        for (uint32_t mode : kModes) expect_logprobs_match(dev(), c, n, mode, n == 5 ? 3 : 0);
      }
}

// BENCH.md's W3r shape of row (128k vocabulary), the mixed batch, n = 20.
TEST_P(SampleLogprobs, LargeVocabularyMixedBatch) {
  const uint64_t seed = 7100;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 4;
  c.vocab = 128256 - 3;
  c.temperature = per_row<float>({0.0f, 0.8f, 1.0f, 0.7f});
  c.top_k = per_row<int32_t>({50, 0, 50, 2048});
  c.top_p = per_row<float>({0.9f, 0.95f, 0.9f, 1.0f});
  c.min_p = per_row<float>({0.0f, 0.0f, 0.05f, 0.0f});
  c.seed = per_row<uint64_t>({rng.bits(), rng.bits(), rng.bits(), rng.bits()});
  c.offset = per_row<uint64_t>({1, 2, 3, 4});
  fill_logits(c, rng, true);
  redraw_degenerate_rows(c, rng, true);
  for (uint32_t mode : kModes) expect_logprobs_match(dev(), c, 20, mode);
}

// A batch of one chunk a row on GPUs of up to 160 SMs (320 rows), rows of
// three tiles of 4,096 tokens and a few more, half of them with logits that
// climb by 25 a tile, so that a running mass taken on the logits moves its
// reference from tile to tile: top-p alone (the row's mass) and k50+p0.9
// (raw logprobs from the candidates and the chunks' raw mass), T from 0.6 to
// 1.4, both modes, n = 20.
TEST_P(SampleLogprobs, RowMassOverSeveralTiles) {
  const uint64_t seed = 8100;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 320;
  c.vocab = 3 * 4096 + 11;
  set_row_filters(c, rng, [](int64_t r) {
    return RowFilter{0.6f + 0.4f * float(r % 3), r % 2 ? 50 : 0, 0.9f};
  });
  auto refill = [&](float* row) {
    fill_row(rng, true, NT_F32, row, c.vocab);
    if ((row - c.logits.data()) / c.vocab % 4 < 2)
      for (int64_t i = 0; i < c.vocab; ++i) row[i] += 25.0f * float(i / 4096);
  };
  fill_rows(c, refill);
  for (uint32_t mode : kModes) expect_logprobs_match(dev(), c, 20, mode);
}

// Batches whose rows the sampler scans as one chunk, where a GPU answers most
// filtered rows from the sampler's candidates and scans each other row whole
// with the same CTA (the logprobs row kernel): 300 and 600 rows (one chunk a
// row on GPUs of up to 132 and 264 SMs), 264 rows of 8,195 tokens (one chunk a
// row on 132 SMs), 8 rows of 4,096 tokens (one chunk a row at V <= 4,096).
// Flat rows with top-p 0.95 alone (a keep-set of most of the row, past every
// candidate list), flat rows with a top-k 50, peaked rows with k50+p0.9
// (within the candidates), greedy rows; both modes, n = 0 and 7.
TEST_P(SampleLogprobs, RowsTheCandidatesLeaveInFullBatches) {
  uint64_t seed = 8300;
  for (auto [rows, vocab] : {std::pair<int64_t, int64_t>{300, 2053}, {600, 2053}, {264, 8195},
                             {8, 4096}}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " B=" + std::to_string(rows) + " V=" + std::to_string(vocab));
    SampleCase c;
    c.rows = rows;
    c.vocab = vocab;
    set_row_filters(c, rng, [](int64_t r) {
      const int kind = int(r % 4);
      return RowFilter{kind == 3 ? 0.0f : 0.8f, kind == 1 || kind == 2 ? 50 : 0,
                       kind == 0 ? 0.95f : kind == 2 ? 0.9f : 1.0f};
    });
    auto refill = [&](float* row) {
      const int64_t r = (row - c.logits.data()) / c.vocab;
      fill_row(rng, r % 4 == 2, NT_F32, row, c.vocab);
    };
    fill_rows(c, refill);
    for (int n : {0, 7})
      for (uint32_t mode : kModes) expect_logprobs_match(dev(), c, n, mode);
  }
}

// Filtered rows of one chunk (V = 1,000, k50+p0.9), where a GPU may take
// both modes from the candidates, with what raw mode must see apart from the
// scores: NaN and -inf logits; a +inf logit; a finite logit whose score
// overflows at T = 1e-10; a logit of 1e30 (x log2(e) past 2^100, x / T
// finite); two equal largest logits; two adjacent fp32 logits whose scores
// round to one value; ordinary rows.
TEST_P(SampleLogprobs, FilteredRowsOfOneChunkWithSpecialLogits) {
  const uint64_t seed = 8200;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 8;
  c.vocab = 1000;
  const float t_pair = 3.0f;
  c.temperature = per_row<float>({0.8f, 0.8f, 1e-10f, 0.8f, 0.8f, t_pair, 1.0f, 0.7f});
  c.top_k = scalar<int32_t>(50);
  c.top_p = scalar(0.9f);
  std::vector<uint64_t> seeds;
  for (int64_t r = 0; r < c.rows; ++r) seeds.push_back(rng.bits());
  c.seed = per_row(seeds);
  // Two adjacent fp32 logits near 20 whose scores x / 3 are one fp32 value.
  float pair_lo = 20.0f, pair_hi = std::nextafter(pair_lo, 100.0f);
  while (pair_lo / t_pair != pair_hi / t_pair) {
    pair_lo = pair_hi;
    pair_hi = std::nextafter(pair_lo, 100.0f);
  }
  auto any = [&] { return rng.integer(0, c.vocab - 1); };
  auto refill = [&](float* row) {
    const int64_t r = (row - c.logits.data()) / c.vocab;
    fill_row(rng, true, NT_F32, row, c.vocab);
    switch (r) {
      case 0:
        for (int i = 0; i < 30; ++i) row[any()] = i % 2 ? kNaN : -kInf;
        break;
      case 1: row[any()] = kInf; break;
      case 2: row[any()] = 1e30f; break;
      case 3: row[any()] = 1e30f; break;
      case 4: row[any()] = row[any()] = 30.0f; break;
      case 5:
        row[any()] = pair_lo;
        row[any()] = pair_hi;
        break;
      default: break;
    }
  };
  fill_rows(c, refill);
  for (uint32_t mode : kModes) expect_logprobs_match(dev(), c, 5, mode);
}

// NaN, +-inf, several +inf (they share the mass), fully masked rows (token
// -1: ids -1 in column 0, every value -inf, rank 0; columns 1..n still the
// order's first ids), one-token vocabularies and n > V.
TEST_P(SampleLogprobs, NonFiniteAndMaskedRows) {
  uint64_t seed = 7200;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {1, 3, 37, 300})
      for (bool greedy : {false, true}) {
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " V=" + std::to_string(vocab) +
                     (greedy ? " greedy" : ""));
        SampleCase c;
        c.rows = 7;
        c.vocab = vocab;
        c.dtype = dtype;
        auto plant = [&](int64_t r, float* row) {
          auto any = [&] { return rng.integer(0, vocab - 1); };
          switch (r) {
            case 0: row[any()] = kNaN; row[any()] = -kInf; break;
            case 1: row[any()] = kInf; break;
            case 2: row[any()] = kInf; row[any()] = kInf; row[any()] = kNaN; break;
            case 3: for (int64_t i = 0; i < vocab; ++i) row[i] = -kInf; break;
            case 4: for (int64_t i = 0; i < vocab; ++i) row[i] = i % 2 ? kNaN : -kInf; break;
            case 5: row[any()] = -kInf; break;
            default: break;
          }
        };
        fill_logits(c, rng, false);
        for (int64_t r = 0; r < c.rows; ++r) plant(r, &c.logits[size_t(r * vocab)]);
        redraw_degenerate_rows(c, [&](float* row) {
          fill_row(rng, false, dtype, row, vocab);
          plant((row - c.logits.data()) / vocab, row);
        });
        for (uint32_t mode : kModes)
          for (int n : {0, 5, 20}) expect_logprobs_match(dev(), c, n, mode);
        // Fully masked rows, whatever the mode.
        const LogprobsResult got = run_sample_logprobs(dev(), c, 5, NT_LOGPROBS_PROCESSED);
        for (int64_t r : {3, 4}) {
          EXPECT_EQ(got.tokens[size_t(r)], -1);
          EXPECT_EQ(got.ids[size_t(r * 6)], -1);
          EXPECT_EQ(got.ranks[size_t(r)], 0);
          for (int64_t col = 0; col < 6; ++col) EXPECT_EQ(got.values[size_t(r * 6 + col)], -kInf);
          for (int64_t col = 1; col < 6; ++col)
            EXPECT_EQ(got.ids[size_t(r * 6 + col)], col - 1 < vocab ? col - 1 : -1) << "column " << col;
        }
      }
}

// Greedy rows (T = 0, top_k = 1, NaN temperature): processed is one-hot (0 for
// the token, rank 1); raw is the log-softmax of the logits, whose rank counts
// the token's ties.
TEST_P(SampleLogprobs, GreedyRows) {
  uint64_t seed = 7300;
  for (int64_t vocab : {2, 65, 2000}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(vocab));
    SampleCase c;
    c.rows = 4;
    c.vocab = vocab;
    fill_logits(c, rng, true);
    // Row 1 holds its maximum twice: the first is the token, rank 2 in raw mode.
    float* row = &c.logits[size_t(vocab)];
    row[0] = row[vocab - 1] = 30.0f;
    c.temperature = per_row<float>({0.0f, 0.0f, kNaN, 0.7f});
    c.top_k = per_row<int32_t>({0, 0, 0, 1});
    for (uint32_t mode : kModes) expect_logprobs_match(dev(), c, 5, mode);
    const LogprobsResult processed = run_sample_logprobs(dev(), c, 5, NT_LOGPROBS_PROCESSED);
    const LogprobsResult raw = run_sample_logprobs(dev(), c, 5, NT_LOGPROBS_RAW);
    for (int64_t r = 0; r < c.rows; ++r) {
      EXPECT_EQ(processed.values[size_t(r * 6)], 0.0f) << "row " << r;
      EXPECT_EQ(processed.ranks[size_t(r)], 1) << "row " << r;
    }
    EXPECT_EQ(raw.tokens[1], 0);
    EXPECT_EQ(raw.ranks[1], 2);
  }
}

// The explicit draw (uniform[B]): processed values are the keep-set's
// renormalized distribution, which the draw walks.
TEST_P(SampleLogprobs, ExplicitDraw) {
  uint64_t seed = 7400;
  for (int64_t vocab : {100, 5000}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(vocab));
    SampleCase c;
    c.rows = 5;
    c.vocab = vocab;
    set_random_params(c, rng, true);
    for (int64_t r = 0; r < c.rows; ++r) c.uniform.push_back(float(rng.uniform(0.0, 1.0)));
    fill_logits(c, rng, true);
    redraw_degenerate_rows(c, rng, true);
    for (uint32_t mode : kModes) expect_logprobs_match(dev(), c, 20, mode);
  }
}

// Keep-sets of every size on long rows, which GPUs resolve on different paths
// (candidate lists merged per row, keep-sets past the candidates over a
// histogram of the row, the exact fallback over the whole row: flat top-p,
// a top-k past the merge's capacity renormalizing top-p, small min-p, the
// explicit draw, plain rows), for a batch and for one row split over the chip.
TEST_P(SampleLogprobs, KeepSetsOfEverySize) {
  uint64_t seed = 7600;
  for (int64_t rows : {6, 1})
    for (bool peaked : {false, true}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " B=" + std::to_string(rows) + (peaked ? " peaked" : " flat"));
      SampleCase c;
      c.rows = rows;
      c.vocab = 20011;
      const std::vector<float> t = {1.0f, 0.8f, 1.2f, 1.0f, 0.9f, 1.1f};
      const std::vector<int32_t> k = {0, 3000, 0, 0, 40, 0};
      const std::vector<float> p = {0.95f, 0.9f, 1.0f, 0.8f, 0.9f, 1.0f};
      const std::vector<float> m = {0.0f, 0.0f, 0.001f, 0.0f, 0.05f, 0.0f};
      const size_t first = rows == 1 ? size_t(rng.integer(0, 5)) : 0;
      auto take = [&](const auto& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        return std::vector<T>(v.begin() + first, v.begin() + first + size_t(rows));
      };
      c.temperature = per_row(take(t));
      c.top_k = per_row(take(k));
      c.top_p = per_row(take(p));
      c.min_p = per_row(take(m));
      std::vector<uint64_t> seeds;
      for (int64_t r = 0; r < rows; ++r) seeds.push_back(rng.bits());
      c.seed = per_row(seeds);
      c.offset = scalar<uint64_t>(uint64_t(rng.integer(0, 1000)));
      fill_logits(c, rng, peaked);
      redraw_degenerate_rows(c, rng, peaked);
      for (uint32_t mode : kModes) expect_logprobs_match(dev(), c, 20, mode);
      // The same rows with an explicit draw.
      for (int64_t r = 0; r < rows; ++r) c.uniform.push_back(float(rng.uniform(0.0, 1.0)));
      redraw_degenerate_rows(c, rng, peaked);
      expect_logprobs_match(dev(), c, 5, NT_LOGPROBS_PROCESSED);
    }
}

// Integer logits tie by the thousand: a filtered row's chunks cut their
// candidate lists inside a run of equal scores, and the logits' first n and
// the keep-set must still come out exact (a GPU that takes them from the
// candidates must see that a dropped token of the same score could precede
// the n-th; in raw mode, one that could tie the token's logit and count in
// its rank). Rows of several chunks and rows of one (4,001 tokens: the CUDA
// backend takes those from the candidates).
TEST_P(SampleLogprobs, TiedLogitsAtTheCandidatesFloor) {
  uint64_t seed = 7700;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t rows : {6, 1})
      for (int64_t vocab : {20011, 4001}) {
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " B=" + std::to_string(rows) +
                     " V=" + std::to_string(vocab));
        SampleCase c;
        c.rows = rows;
        c.vocab = vocab;
        c.dtype = dtype;
        c.temperature = scalar(0.9f);
        c.top_k = scalar<int32_t>(40);
        c.top_p = scalar(0.93f);
        c.seed = scalar<uint64_t>(rng.bits());
        auto refill = [&](float* row) {
          for (int64_t i = 0; i < c.vocab; ++i) row[i] = float(rng.integer(-8, 0));
        };
        fill_rows(c, refill);
        for (int n : {5, 20})
          for (uint32_t mode : kModes) expect_logprobs_match(dev(), c, n, mode);
      }
}

// c with per-row top_p, each row's cut checked against the reference (keep[r]
// tokens, not degenerate), then its processed logprobs on the device (n = 3).
void expect_top_p_cuts(TestDevice& dev, SampleCase& c, const std::vector<float>& top_p,
                       const std::vector<size_t>& keep) {
  c.top_p = per_row(top_p);
  for (int64_t r = 0; r < c.rows; ++r) {
    const SampleReference ref = reference_sample(c, r);
    ASSERT_FALSE(ref.degenerate) << "row " << r << ": " << ref.why_degenerate;
    ASSERT_EQ(ref.n_top_p, keep[size_t(r)]) << "row " << r;
  }
  expect_logprobs_match(dev, c, 3, NT_LOGPROBS_PROCESSED);
}

// Top-p alone whose cut lies 8e-6 of the prefix's mass from the crossing
// (past the 1e-6 of the row's mass the contract leaves to rounding): three
// planted logits above a noise of the rest of the row, top_p set so that the
// keep-set ends with the first or second of them by that margin either side.
// A backend that sums the row's mass approximately (the CUDA list scan's exp2
// form) finds its error bound straddling the cut and resolves the row exactly.
TEST_P(SampleLogprobs, TopPCutNearTheRowMass) {
  uint64_t seed = 7900;
  for (nt_dtype dtype : {NT_F32, NT_BF16})
    for (int64_t vocab : {32007, 4001, 61}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " V=" + std::to_string(vocab));
      SampleCase c;
      c.rows = 6;
      c.vocab = vocab;
      c.dtype = dtype;
      c.temperature = scalar(0.8f);
      c.seed = scalar<uint64_t>(rng.bits());
      c.logits.resize(size_t(c.rows * vocab));
      std::vector<float> top_p;
      std::vector<size_t> keep;
      for (int64_t r = 0; r < c.rows; ++r) {
        float* row = &c.logits[size_t(r * vocab)];
        for (int64_t i = 0; i < vocab; ++i) row[i] = float(int(rng.uniform(-4.0, 4.0) * 64.0)) / 64.0f;
        const float planted[3] = {10.0f, 9.5f, 9.0f};
        for (int j = 0; j < 3; ++j) row[size_t(j * (vocab / 3) + rng.integer(0, vocab / 3 - 1))] = planted[j];
        // The mass in fp64 of the fp32 scores, as the reference sums it.
        const double s_max = double(planted[0] / 0.8f);
        double z = 0.0;
        for (int64_t i = 0; i < vocab; ++i) z += std::exp(double(row[i] / 0.8f) - s_max);
        const size_t first = size_t(1 + r % 2);  // the cut after the first or the second
        double prefix = 0.0;
        for (size_t j = 0; j < first; ++j) prefix += std::exp(double(planted[j] / 0.8f) - s_max);
        const double margin = r / 2 % 2 ? -8e-6 : 8e-6;  // below: the next one crosses
        top_p.push_back(float(prefix / z * (1.0 - margin)));
        keep.push_back(margin > 0 ? first : first + 1);
      }
      expect_top_p_cuts(dev(), c, top_p, keep);
    }
}

// Top-p alone over scores near 10^4 (logits near 1,000 at T = 0.1), where
// the rounding of each score x / T (up to 2^-11) moves its term by up to 1e-3:
// rows are drawn until the mass of the exact quotients differs from the mass
// of the rounded scores by more than 2e-4, and top_p puts the cut 5e-5 of the
// prefix on the side that difference would cross. A backend that sums the
// mass from the logits (the CUDA list scan's exp2 form) keeps the right set
// only by its error bound.
TEST_P(SampleLogprobs, TopPCutNearTheMassOfLargeScores) {
  uint64_t seed = 8000;
  for (int64_t vocab : {32007, 4001}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(vocab));
    const float t = 0.1f;
    SampleCase c;
    c.rows = 4;
    c.vocab = vocab;
    c.temperature = scalar(t);
    c.seed = scalar<uint64_t>(rng.bits());
    c.logits.resize(size_t(c.rows * vocab));
    std::vector<float> top_p;
    std::vector<size_t> keep;
    for (int64_t r = 0; r < c.rows; ++r) {
      float* row = &c.logits[size_t(r * vocab)];
      for (int64_t i = 0; i < vocab; ++i) row[i] = float(rng.uniform(-4.0, 4.0));
      float x[3];
      double rounded[3], exact[3], z_rounded = 0.0, z_exact = 0.0;
      for (int attempt = 0;; ++attempt) {
        ASSERT_LT(attempt, 100000) << "no row whose two masses differ by 2e-4";
        x[0] = float(rng.uniform(990.0, 1010.0));
        x[1] = x[0] - float(rng.uniform(0.02, 0.1));
        x[2] = x[1] - float(rng.uniform(0.02, 0.1));
        z_rounded = z_exact = 0.0;
        for (int j = 0; j < 3; ++j) {
          rounded[j] = std::exp(double(x[j] / t) - double(x[0] / t));
          exact[j] = std::exp((double(x[j]) - double(x[0])) / double(t));
          z_rounded += rounded[j];
          z_exact += exact[j];
        }
        if (std::fabs(z_exact / z_rounded - 1.0) > 2e-4) break;
      }
      for (int j = 0; j < 3; ++j)
        row[size_t(j * (vocab / 3) + rng.integer(0, vocab / 3 - 1))] = x[j];
      const size_t first = size_t(1 + r % 2);
      double prefix = 0.0;
      for (size_t j = 0; j < first; ++j) prefix += rounded[j];
      const bool over = z_exact > z_rounded;  // the exact mass would push the cut past `first`
      top_p.push_back(float(prefix / z_rounded * (over ? 1.0 - 5e-5 : 1.0 + 5e-5)));
      keep.push_back(over ? first : first + 1);
    }
    expect_top_p_cuts(dev(), c, top_p, keep);
  }
}

// Top-p alone over three equal logits whose score x / T rounds to FLT_MAX
// (x times a rounded 1/T overflows there): the keep-set is the three, so
// processed logprobs give each -log 3, where a row mass that lost their terms
// would keep the first alone (value 0).
TEST_P(SampleLogprobs, TopPNucleusAtTheLargestScore) {
  const uint64_t seed = 7800;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 2;
  c.vocab = 32007;
  c.temperature = scalar(0x1.8fe48ap-2f);
  c.top_p = scalar(0.9f);
  c.seed = scalar<uint64_t>(rng.bits());
  fill_logits(c, rng, true);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t i : {int64_t(5) + r, int64_t(16000), c.vocab - 1 - r})
      c.logits[size_t(r * c.vocab + i)] = 0x1.8fe488p+126f;
  for (int64_t r = 0; r < c.rows; ++r) ASSERT_EQ(reference_sample(c, r).keep.size(), 3u);
  expect_logprobs_match(dev(), c, 3, NT_LOGPROBS_PROCESSED);
  const LogprobsResult got = run_sample_logprobs(dev(), c, 3, NT_LOGPROBS_PROCESSED);
  for (int64_t r = 0; r < c.rows; ++r)
    EXPECT_NEAR(got.values[size_t(r * got.columns)], -std::log(3.0), 1e-6) << "row " << r;
}

// A processed row sums to 1 over its keep-set: with n >= V every token is
// listed, so the listed probabilities of a row account for all of its mass.
TEST_P(SampleLogprobs, SmallRowsListEveryToken) {
  const uint64_t seed = 7500;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  SampleCase c;
  c.rows = 8;
  c.vocab = 19;
  set_random_params(c, rng, true);
  fill_logits(c, rng, false);
  redraw_degenerate_rows(c, rng, false);
  for (uint32_t mode : kModes) {
    expect_logprobs_match(dev(), c, 20, mode);
    const LogprobsResult got = run_sample_logprobs(dev(), c, 20, mode);
    for (int64_t r = 0; r < c.rows; ++r) {
      double total = 0.0;
      for (int64_t col = 1; col <= c.vocab; ++col) total += std::exp(double(got.values[size_t(r * 21 + col)]));
      EXPECT_NEAR(total, 1.0, 1e-5) << "row " << r << " " << mode_label(mode);
      EXPECT_EQ(got.ids[size_t(r * 21 + 20)], -1);  // past V
    }
  }
}

TEST_P(SampleLogprobs, EmptyBatchIsANoOp) {
  SampleCase c;
  c.rows = 0;
  c.vocab = 100;
  for (uint32_t mode : kModes) {
    const LogprobsResult got = run_sample_logprobs(dev(), c, 5, mode);
    EXPECT_TRUE(got.tokens.empty() && got.ids.empty() && got.values.empty() && got.ranks.empty());
  }
}

NTT_INSTANTIATE_ON_DEVICES(SampleLogprobs);

}  // namespace
}  // namespace ntt
