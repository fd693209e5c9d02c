// apply_penalties and apply_logit_bias on every device, against the dense
// brute-force references (harness/reference_penalties.cpp): the whole logits
// buffer, row gaps included, must equal the reference bit for bit, so tokens the
// op must not touch are checked too. Inputs: random CSR lists with repeats, ids
// shared between prompt and output, out-of-range ids, empty rows, absent lists,
// scalar and per-row parameters (odd per-row values included), f32/f16/bf16,
// strided rows, V = 1 and V not a multiple of 32, NaN (with payloads) / inf / -0
// logits, rows longer than an on-chip table holds, offsets that are not a valid
// CSR, B = 0; and the argument checks, which leave the logits untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "harness/ops.h"
#include "nexttok/nexttok.hpp"

namespace ntt {
namespace {

const nt_dtype kFloatTypes[] = {NT_F32, NT_F16, NT_BF16};
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

class Penalties : public DeviceTest {};
class LogitBias : public DeviceTest {};

// rows x stride logits in dtype: N(0, 3) with ~4% specials (NaNs with payloads,
// signalling ones included, +-inf, +-0); the row gaps hold random values too.
std::vector<uint8_t> random_logits(Rng& rng, nt_dtype dtype, int64_t rows, int64_t stride) {
  std::vector<float> x(size_t(rows * stride));
  for (auto& v : x) {
    const double u = rng.uniform();
    v = u < 0.01 ? -kInf : u < 0.02 ? kInf : u < 0.04 ? (rng.coin() ? 0.0f : -0.0f)
                                               : float(3.0 * rng.normal());
  }
  std::vector<uint8_t> bytes = encode(dtype, x);
  const uint32_t payloads_f32[] = {0x7fc00000u, 0xffc01234u, 0x7fa00001u /* signalling */};
  const uint16_t payloads_f16[] = {0x7e00u, 0xfe11u, 0x7d01u};
  const uint16_t payloads_bf16[] = {0x7fc0u, 0xffc3u, 0x7f81u};
  for (size_t i = 0; i < x.size(); ++i) {
    if (!rng.coin(0.015)) continue;
    const int k = int(rng.integer(0, 2));
    if (dtype == NT_F32) std::memcpy(&bytes[i * 4], &payloads_f32[k], 4);
    else std::memcpy(&bytes[i * 2], dtype == NT_F16 ? &payloads_f16[k] : &payloads_bf16[k], 2);
  }
  return bytes;
}

// Offsets of rows with the given lengths (0 = empty row).
std::vector<int64_t> offsets_of(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> off{0};
  for (int64_t n : lengths) off.push_back(off.back() + n);
  return off;
}

int32_t out_of_range_id(Rng& rng, int64_t vocab) {
  const int32_t odd[] = {-1, int32_t(vocab), int32_t(vocab + 7), INT32_MIN, INT32_MAX, -1000};
  return odd[rng.integer(0, 5)];
}

// Ids of one row: a few hot ids repeated, the rest uniform over [0, V), about
// 3% out of range; `shared` ids (another list's) are drawn from too.
std::vector<int32_t> random_row_ids(Rng& rng, int64_t vocab, int64_t n,
                                    const std::vector<int32_t>& shared) {
  std::vector<int32_t> hot(4);
  for (auto& h : hot) h = int32_t(rng.integer(0, vocab - 1));
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    const double u = rng.uniform();
    if (u < 0.03) ids.push_back(out_of_range_id(rng, vocab));
    else if (u < 0.3) ids.push_back(hot[size_t(rng.integer(0, 3))]);
    else if (u < 0.5 && !shared.empty()) ids.push_back(shared[size_t(rng.integer(0, int64_t(shared.size()) - 1))]);
    else ids.push_back(int32_t(rng.integer(0, vocab - 1)));
  }
  return ids;
}

// Lengths: mostly around `mean`, some rows empty.
std::vector<int64_t> random_lengths(Rng& rng, int64_t rows, int64_t mean) {
  std::vector<int64_t> n(static_cast<size_t>(rows));
  for (auto& v : n) v = rng.coin(0.2) ? 0 : rng.integer(0, 2 * mean);
  return n;
}

// Prompt and output lists of `rows` rows; the output shares ids with the prompt.
void random_lists(Rng& rng, int64_t rows, int64_t vocab, int64_t prompt_mean, int64_t output_mean,
                  CsrIds* prompt, CsrIds* output) {
  const auto pl = random_lengths(rng, rows, prompt_mean), ol = random_lengths(rng, rows, output_mean);
  prompt->present = output->present = true;
  prompt->offsets = offsets_of(pl);
  output->offsets = offsets_of(ol);
  prompt->ids.clear();
  output->ids.clear();
  for (int64_t b = 0; b < rows; ++b) {
    const auto p = random_row_ids(rng, vocab, pl[size_t(b)], {});
    const auto o = random_row_ids(rng, vocab, ol[size_t(b)], p);
    prompt->ids.insert(prompt->ids.end(), p.begin(), p.end());
    output->ids.insert(output->ids.end(), o.begin(), o.end());
  }
}

// A parameter: scalar, or per row with neutral rows and (if `odd`) values the
// documentation gives a meaning to (NaN, inf, <= 0 repetition).
Param<float> random_param(Rng& rng, int64_t rows, bool per_row_values, bool repetition) {
  auto draw = [&] {
    return repetition ? float(rng.uniform(0.5, 2.0)) : float(rng.uniform(-2.0, 2.0));
  };
  if (!per_row_values) return scalar(draw());
  std::vector<float> v(static_cast<size_t>(rows));
  for (auto& x : v) {
    const double u = rng.uniform();
    x = u < 0.15 ? (repetition ? 1.0f : 0.0f)
        : u < 0.2 ? kNaN
        : u < 0.25 ? (rng.coin() ? kInf : -kInf)
        : u < 0.3 && repetition ? (rng.coin() ? 0.0f : -1.5f)
                                : draw();
  }
  return per_row(v);
}

std::string describe(nt_dtype dtype, int64_t rows, int64_t vocab, int64_t stride) {
  return std::string(dtype_label(dtype)) + " B=" + std::to_string(rows) + " V=" +
         std::to_string(vocab) + " stride=" + std::to_string(stride);
}

// The whole buffer, bit for bit; reports the first few differences.
void expect_same_bits(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                      const std::vector<uint8_t>& input, nt_dtype dtype, int64_t stride) {
  ASSERT_EQ(got.size(), want.size());
  const size_t n = want.size() / dtype_bytes(dtype);
  int reported = 0;
  for (size_t i = 0; i < n && reported < 6; ++i) {
    const uint32_t g = raw_bits(dtype, got, i), w = raw_bits(dtype, want, i);
    if (g != w) {
      ADD_FAILURE() << "row " << i / size_t(stride) << " column " << i % size_t(stride) << ": bits 0x"
                    << std::hex << g << ", expected 0x" << w << " (input 0x"
                    << raw_bits(dtype, input, i) << ")";
      ++reported;
    }
  }
}

void expect_penalties(TestDevice& dev, const PenaltyCase& c) {
  expect_same_bits(run_apply_penalties(dev, c), reference_penalties(c), c.logits, c.dtype, c.stride());
}

void expect_bias(TestDevice& dev, const BiasCase& c) {
  expect_same_bits(run_apply_logit_bias(dev, c), reference_logit_bias(c), c.logits, c.dtype, c.stride());
}

PenaltyCase penalty_case(Rng& rng, nt_dtype dtype, int64_t rows, int64_t vocab, int64_t gap) {
  PenaltyCase c;
  c.rows = rows;
  c.vocab = vocab;
  c.dtype = dtype;
  c.logits_stride = vocab + gap;
  c.logits = random_logits(rng, dtype, rows, c.stride());
  return c;
}

// ---- penalties -------------------------------------------------------------------

TEST_P(Penalties, RandomBatches) {
  uint64_t seed = 37000;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {1, 7, 1000, 4099})
      for (int per_row_params = 0; per_row_params < 2; ++per_row_params) {
        Rng rng(++seed);
        const int64_t gap = rng.coin() ? 5 : 0;
        PenaltyCase c = penalty_case(rng, dtype, 6, vocab, gap);
        SCOPED_TRACE(seed_trace(seed) + " " + describe(dtype, c.rows, vocab, c.stride()) +
                     (per_row_params ? " per-row" : " scalar"));
        random_lists(rng, c.rows, vocab, 40, 20, &c.prompt, &c.output);
        c.offsets_dtype = rng.coin() ? NT_I64 : NT_I32;
        c.repetition = random_param(rng, c.rows, per_row_params, true);
        c.presence = random_param(rng, c.rows, per_row_params, false);
        c.frequency = random_param(rng, c.rows, per_row_params, false);
        expect_penalties(dev(), c);
      }
}

// Each parameter alone, and the prompt's ids only mattering to the repetition penalty.
TEST_P(Penalties, EachParameterAlone) {
  uint64_t seed = 37100;
  for (nt_dtype dtype : kFloatTypes)
    for (int which = 0; which < 3; ++which) {
      Rng rng(++seed);
      PenaltyCase c = penalty_case(rng, dtype, 5, 777, 0);
      SCOPED_TRACE(seed_trace(seed) + " " + describe(dtype, c.rows, c.vocab, c.stride()) +
                   " parameter " + std::to_string(which));
      random_lists(rng, c.rows, c.vocab, 60, 30, &c.prompt, &c.output);
      if (which == 0) c.repetition = scalar(1.3f);
      if (which == 1) c.presence = scalar(0.7f);
      if (which == 2) c.frequency = scalar(-0.45f);
      expect_penalties(dev(), c);
    }
}

TEST_P(Penalties, AbsentLists) {
  uint64_t seed = 37200;
  for (nt_dtype dtype : kFloatTypes)
    for (int absent = 0; absent < 3; ++absent) {  // prompt, output, both
      Rng rng(++seed);
      PenaltyCase c = penalty_case(rng, dtype, 4, 513, 3);
      SCOPED_TRACE(seed_trace(seed) + " " + describe(dtype, c.rows, c.vocab, c.stride()) +
                   " absent " + std::to_string(absent));
      random_lists(rng, c.rows, c.vocab, 30, 30, &c.prompt, &c.output);
      if (absent != 1) c.prompt = CsrIds{};
      if (absent != 0) c.output = CsrIds{};
      c.repetition = scalar(1.25f);
      c.presence = scalar(0.5f);
      c.frequency = scalar(0.25f);
      expect_penalties(dev(), c);
      if (absent == 2) {
        EXPECT_EQ(run_apply_penalties(dev(), c), c.logits) << "no lists must be a no-op";
      }
    }
}

// r = 1, f = 0, p = 0 (scalar or every row) leave every bit, NaN payloads included.
TEST_P(Penalties, NeutralParametersLeaveTheBits) {
  uint64_t seed = 37300;
  for (nt_dtype dtype : kFloatTypes)
    for (int per_row_params = 0; per_row_params < 2; ++per_row_params) {
      Rng rng(++seed);
      PenaltyCase c = penalty_case(rng, dtype, 5, 300, 2);
      SCOPED_TRACE(seed_trace(seed) + " " + describe(dtype, c.rows, c.vocab, c.stride()));
      random_lists(rng, c.rows, c.vocab, 50, 50, &c.prompt, &c.output);
      if (per_row_params) {
        c.repetition = per_row(std::vector<float>(size_t(c.rows), 1.0f));
        c.presence = per_row(std::vector<float>(size_t(c.rows), 0.0f));
        c.frequency = per_row(std::vector<float>{0.0f, -0.0f, kNaN, kInf, 0.0f});
      }
      EXPECT_EQ(run_apply_penalties(dev(), c), c.logits);
    }
}

// A token repeated in the prompt and the output: repetition applied once, the
// count is the number of output occurrences; bf16 makes a second application
// or a wrong count visible in the bits.
TEST_P(Penalties, RepeatsApplyOnce) {
  for (nt_dtype dtype : kFloatTypes) {
    SCOPED_TRACE(dtype_label(dtype));
    PenaltyCase c;
    c.rows = 2;
    c.vocab = 40;
    c.dtype = dtype;
    std::vector<float> x(80);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 9) - 4) * 1.75f;
    c.logits = encode(dtype, x);
    c.prompt = {true, {0, 6, 8}, {3, 3, 3, 5, 5, 7, 1, 1}};
    c.output = {true, {0, 5, 9}, {3, 3, 3, 9, 9, 1, 1, 1, 30}};
    c.repetition = scalar(1.5f);
    c.presence = scalar(0.25f);
    c.frequency = scalar(0.125f);
    expect_penalties(dev(), c);
  }
}

// Rows with more ids than an on-chip table holds (CUDA: shared memory sized
// from the mean row, so the long rows take the table in the workspace), beside
// short rows, and a batch of long rows only.
TEST_P(Penalties, RowsLongerThanTheOnChipTable) {
  uint64_t seed = 37400;
  for (nt_dtype dtype : {NT_F32, NT_BF16})
    for (int all_long = 0; all_long < 2; ++all_long) {
      Rng rng(++seed);
      PenaltyCase c = penalty_case(rng, dtype, 8, 30000, 0);
      SCOPED_TRACE(seed_trace(seed) + " " + describe(dtype, c.rows, c.vocab, c.stride()));
      std::vector<int64_t> pl(size_t(c.rows), 3), ol(size_t(c.rows), 2);
      pl[2] = 9000;
      ol[2] = 4000;
      ol[5] = 12000;
      if (all_long)
        for (int64_t b = 0; b < c.rows; ++b) pl[size_t(b)] = 6000 + 100 * b;
      c.prompt = {true, offsets_of(pl), {}};
      c.output = {true, offsets_of(ol), {}};
      for (int64_t b = 0; b < c.rows; ++b) {
        const auto p = random_row_ids(rng, c.vocab, pl[size_t(b)], {});
        const auto o = random_row_ids(rng, c.vocab, ol[size_t(b)], p);
        c.prompt.ids.insert(c.prompt.ids.end(), p.begin(), p.end());
        c.output.ids.insert(c.output.ids.end(), o.begin(), o.end());
      }
      c.repetition = random_param(rng, c.rows, true, true);
      c.presence = scalar(0.3f);
      c.frequency = random_param(rng, c.rows, true, false);
      expect_penalties(dev(), c);
    }
}

// Offsets are device data: negative, decreasing and past-N offsets (i32 and
// i64, short and long rows) take the clamped meaning and never read outside
// the lists (the lists are exactly N long).
TEST_P(Penalties, OffsetsThatAreNotACsr) {
  uint64_t seed = 37500;
  for (nt_dtype offsets_dtype : {NT_I32, NT_I64}) {
    Rng rng(++seed);
    PenaltyCase c = penalty_case(rng, NT_F16, 7, 20000, 1);
    SCOPED_TRACE(seed_trace(seed) + " offsets " + dtype_label(offsets_dtype));
    c.offsets_dtype = offsets_dtype;
    const int64_t np = 9000, no = 5000;
    c.prompt = {true, {-5, 10, 4, 8900, 9000, 200, 3, offsets_dtype == NT_I64 ? (int64_t(1) << 40) : 99999}, {}};
    c.output = {true, {2, 1, 4000, 100, 4999, 6000, -7, 5000}, {}};
    c.prompt.ids = random_row_ids(rng, c.vocab, np, {});
    c.output.ids = random_row_ids(rng, c.vocab, no, c.prompt.ids);
    c.repetition = scalar(0.8f);
    c.presence = scalar(-0.5f);
    c.frequency = scalar(0.2f);
    expect_penalties(dev(), c);
  }
}

// B = 0 with ids in the lists: the size query and the call succeed (a failing
// status throws OpError), and there is nothing to change.
TEST_P(Penalties, EmptyBatchIsANoOp) {
  Rng rng(37600);
  PenaltyCase c = penalty_case(rng, NT_F32, 0, 100, 0);
  c.prompt = {true, {0}, {1, 2, 3}};
  c.output = {true, {0}, {}};
  c.repetition = scalar(2.0f);
  std::vector<uint8_t> after;
  EXPECT_NO_THROW(after = run_apply_penalties(dev(), c));
  EXPECT_TRUE(after.empty());
}

// ---- logit bias ------------------------------------------------------------------

BiasCase bias_case(Rng& rng, nt_dtype dtype, int64_t rows, int64_t vocab, int64_t gap) {
  BiasCase c;
  c.rows = rows;
  c.vocab = vocab;
  c.dtype = dtype;
  c.logits_stride = vocab + gap;
  c.logits = random_logits(rng, dtype, rows, c.stride());
  return c;
}

// Values of mixed magnitude, some non-finite: with repeats the order of the
// adds (and the rounding after each) shows in the bits.
std::vector<float> random_values(Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (auto& x : v) {
    const double u = rng.uniform();
    x = u < 0.01 ? kNaN : u < 0.02 ? (rng.coin() ? kInf : -kInf)
        : u < 0.5 ? float(rng.uniform(-0.1, 0.1)) : float(rng.normal() * 20.0);
  }
  return v;
}

TEST_P(LogitBias, RandomBatches) {
  uint64_t seed = 38000;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {1, 7, 1000, 4099}) {
      Rng rng(++seed);
      BiasCase c = bias_case(rng, dtype, 7, vocab, rng.coin() ? 3 : 0);
      SCOPED_TRACE(seed_trace(seed) + " " + describe(dtype, c.rows, vocab, c.stride()));
      const auto lengths = random_lengths(rng, c.rows, 30);
      c.tokens = {true, offsets_of(lengths), {}};
      for (int64_t n : lengths) {
        const auto ids = random_row_ids(rng, vocab, n, {});
        c.tokens.ids.insert(c.tokens.ids.end(), ids.begin(), ids.end());
      }
      c.offsets_dtype = rng.coin() ? NT_I64 : NT_I32;
      c.values = random_values(rng, c.tokens.ids.size());
      expect_bias(dev(), c);
    }
}

// One token biased many times in a shuffled order of values of mixed
// magnitude: any other order of the adds, or one rounding at the end, gives
// other bits (f16 and bf16).
TEST_P(LogitBias, RepeatsAddInEntryOrder) {
  uint64_t seed = 38100;
  for (nt_dtype dtype : kFloatTypes) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype));
    BiasCase c = bias_case(rng, dtype, 3, 64, 0);
    c.tokens = {true, {0, 200, 200, 260}, {}};
    for (int i = 0; i < 200; ++i) c.tokens.ids.push_back(i % 3 == 0 ? 17 : int32_t(rng.integer(40, 42)));
    for (int i = 0; i < 60; ++i) c.tokens.ids.push_back(5);
    for (size_t i = 0; i < c.tokens.ids.size(); ++i)
      c.values.push_back(i % 2 ? float(rng.uniform(-0.02, 0.02)) : float(rng.uniform(-300, 300)));
    expect_bias(dev(), c);
  }
}

TEST_P(LogitBias, RowsLongerThanTheOnChipTable) {
  uint64_t seed = 38200;
  for (int all_long = 0; all_long < 2; ++all_long) {
    Rng rng(++seed);
    BiasCase c = bias_case(rng, NT_BF16, 6, 50000, 1);
    SCOPED_TRACE(seed_trace(seed));
    std::vector<int64_t> lengths(size_t(c.rows), 4);
    lengths[1] = 9000;
    if (all_long)
      for (auto& n : lengths) n = 5000;
    c.tokens = {true, offsets_of(lengths), {}};
    for (int64_t n : lengths) {
      const auto ids = random_row_ids(rng, c.vocab, n, {});
      c.tokens.ids.insert(c.tokens.ids.end(), ids.begin(), ids.end());
    }
    c.values = random_values(rng, c.tokens.ids.size());
    expect_bias(dev(), c);
  }
}

TEST_P(LogitBias, EmptyBatchIsANoOp) {
  Rng rng(38400);
  BiasCase c = bias_case(rng, NT_F32, 0, 100, 0);
  c.tokens = {true, {0}, {1, 2, 3}};
  c.values = {1.0f, 2.0f, 3.0f};
  std::vector<uint8_t> after;
  EXPECT_NO_THROW(after = run_apply_logit_bias(dev(), c));
  EXPECT_TRUE(after.empty());
}

TEST_P(LogitBias, OffsetsThatAreNotACsr) {
  uint64_t seed = 38300;
  for (nt_dtype offsets_dtype : {NT_I32, NT_I64}) {
    Rng rng(++seed);
    BiasCase c = bias_case(rng, NT_F32, 6, 30000, 0);
    SCOPED_TRACE(seed_trace(seed) + " offsets " + dtype_label(offsets_dtype));
    c.offsets_dtype = offsets_dtype;
    c.tokens = {true, {-3, 5000, 100, 9000, 9001, offsets_dtype == NT_I64 ? -(int64_t(1) << 40) : -1, 12000}, {}};
    c.tokens.ids = random_row_ids(rng, c.vocab, 9001, {});
    c.values = random_values(rng, c.tokens.ids.size());
    expect_bias(dev(), c);
  }
}

// ---- argument checks: the named argument, and the logits untouched -----------------

struct ErrorCase {
  std::string what, arg;
};

class PenaltiesErrors : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    if (IsSkipped()) return;
    Rng rng(39000);
    logits_host = random_logits(rng, NT_F32, rows, vocab);
    logits = to_device(dev(), logits_host);
    offsets = to_device(dev(), std::vector<int32_t>{0, 2, 2, 5});
    offsets64 = to_device(dev(), std::vector<int64_t>{0, 2, 2, 5});
    ids = to_device(dev(), std::vector<int32_t>{1, 2, 3, 4, 5});
    values = to_device(dev(), std::vector<float>{1, 2, 3, 4, 5});
    per_row_values = to_device(dev(), std::vector<float>{1.5f, 1.5f, 1.5f});
  }

  nt_token_lists lists(bool wide = false) const {
    nt_token_lists l{};
    l.offsets = (wide ? offsets64 : offsets)->vector(wide ? NT_I64 : NT_I32, rows + 1);
    l.ids = ids->vector(NT_I32, 5);
    return l;
  }

  nt_apply_penalties_args penalties() const {
    nt_apply_penalties_args a{};
    a.logits = logits->matrix(NT_F32, rows, vocab);
    a.prompt = lists();
    a.output = lists(true);
    a.repetition = {nullptr, 1.2f};
    a.presence = {nullptr, 0.5f};
    a.frequency = {per_row_values->handle(), 0.0f};
    return a;
  }

  nt_apply_logit_bias_args bias() const {
    nt_apply_logit_bias_args a{};
    a.logits = logits->matrix(NT_F32, rows, vocab);
    a.tokens = lists();
    a.values = values->vector(NT_F32, 5);
    return a;
  }

  // Runs a call that must fail naming `arg`, then checks the logits are untouched.
  template <class Call>
  void expect_rejected(const std::string& what, const std::string& arg, nt_status want, Call call) {
    const nt_status status = call();
    dev().sync();
    const std::string message = nt_last_error();
    EXPECT_EQ(status, want) << what << ": \"" << message << "\"";
    EXPECT_NE(message.find("'" + arg + "'"), std::string::npos)
        << what << ": \"" << message << "\" does not name '" << arg << "'";
    EXPECT_EQ(from_device<uint8_t>(*logits, logits_host.size()), logits_host)
        << what << ": the logits changed";
  }

  const int64_t rows = 3, vocab = 50;
  std::vector<uint8_t> logits_host;
  std::unique_ptr<Buffer> logits, offsets, offsets64, ids, values, per_row_values;
};

TEST_P(PenaltiesErrors, ApplyPenalties) {
  using A = nt_apply_penalties_args;
  std::vector<std::pair<ErrorCase, std::function<void(A&)>>> cases = {
      {{"logits dtype", "logits"}, [](A& a) { a.logits.dtype = NT_I32; }},
      {{"logits 1-D", "logits"}, [](A& a) { a.logits.ndim = 1; }},
      {{"logits null", "logits"}, [](A& a) { a.logits.data = nullptr; }},
      {{"V = 0", "logits"}, [](A& a) { a.logits.shape[1] = 0; }},
      {{"offsets length", "prompt.offsets"}, [](A& a) { a.prompt.offsets.shape[0] = 3; }},
      {{"offsets length B+2", "output.offsets"}, [](A& a) { a.output.offsets.shape[0] = 5; }},
      {{"offsets dtype", "output.offsets"}, [](A& a) { a.output.offsets.dtype = NT_F32; }},
      {{"offsets 2-D", "prompt.offsets"}, [](A& a) { a.prompt.offsets.ndim = 2; }},
      {{"offsets device", "prompt.offsets"}, [](A& a) { a.prompt.offsets.device_id += 1; }},
      {{"ids dtype i64", "prompt.ids"}, [](A& a) { a.prompt.ids.dtype = NT_I64; }},
      {{"ids 2-D", "output.ids"}, [](A& a) { a.output.ids.ndim = 2; }},
      {{"ids null", "output.ids"}, [](A& a) { a.output.ids.data = nullptr; }},
      {{"ids without offsets", "prompt.offsets"}, [](A& a) { a.prompt.offsets.data = nullptr; }},
      {{"ids device", "output.ids"}, [](A& a) { a.output.ids.device_id += 1; }},
      {{"ids too many", "output.ids"}, [](A& a) { a.output.ids.shape[0] = int64_t(1) << 30; }},
      {{"repetition 0", "repetition"}, [](A& a) { a.repetition.scalar = 0.0f; }},
      {{"repetition -1", "repetition"}, [](A& a) { a.repetition.scalar = -1.0f; }},
      {{"repetition NaN", "repetition"}, [](A& a) { a.repetition.scalar = kNaN; }},
      {{"repetition inf", "repetition"}, [](A& a) { a.repetition.scalar = kInf; }},
      {{"presence NaN", "presence"}, [](A& a) { a.presence.scalar = kNaN; }},
      {{"presence -inf", "presence"}, [](A& a) { a.presence.scalar = -kInf; }},
      {{"frequency inf", "frequency"}, [&](A& a) { a.frequency = {nullptr, kInf}; }},
  };
  for (auto& [c, mutate] : cases) {
    A a = penalties();
    mutate(a);
    expect_rejected(c.what, c.arg, NT_ERROR_INVALID_ARGUMENT, [&] {
      size_t bytes = 0;
      const nt_status sized = nt_apply_penalties_workspace_size(&a, &bytes);
      EXPECT_EQ(sized, NT_ERROR_INVALID_ARGUMENT) << c.what << ": the size query accepted it";
      return nt_apply_penalties(&a, nullptr, 0, dev().stream());
    });
  }
  // The valid call works, and a short workspace is refused before anything runs.
  A a = penalties();
  size_t bytes = 0;
  ASSERT_EQ(nt_apply_penalties_workspace_size(&a, &bytes), NT_OK) << nt_last_error();
  if (bytes > 0) {
    expect_rejected("workspace too small", "workspace_bytes", NT_ERROR_WORKSPACE, [&] {
      auto ws = std::make_unique<Buffer>(dev(), bytes);
      return nt_apply_penalties(&a, ws->handle(), bytes - 1, dev().stream());
    });
    expect_rejected("workspace null", "workspace", NT_ERROR_WORKSPACE,
                    [&] { return nt_apply_penalties(&a, nullptr, bytes, dev().stream()); });
  }
  auto ws = std::make_unique<Buffer>(dev(), bytes ? bytes : 16);
  EXPECT_EQ(nt_apply_penalties(&a, ws->handle(), bytes, dev().stream()), NT_OK) << nt_last_error();
  dev().sync();
  EXPECT_EQ(nt_apply_penalties(nullptr, nullptr, 0, dev().stream()), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nt_apply_penalties_workspace_size(&a, nullptr), NT_ERROR_INVALID_ARGUMENT);
  // CUDA: a per-row array in host memory is refused (it would fault on the device).
  if (dev().type() == NT_DEVICE_CUDA) {
    logits_host = from_device<uint8_t>(*logits, logits_host.size());  // after the call above
    static const float host_values[3] = {1.0f, 1.0f, 1.0f};
    A h = penalties();
    h.repetition = {host_values, 1.0f};
    expect_rejected("per-row repetition in host memory", "repetition", NT_ERROR_INVALID_ARGUMENT,
                    [&] { return nt_apply_penalties(&h, ws->handle(), bytes, dev().stream()); });
  }
}

TEST_P(PenaltiesErrors, ApplyLogitBias) {
  using A = nt_apply_logit_bias_args;
  std::vector<std::pair<ErrorCase, std::function<void(A&)>>> cases = {
      {{"logits dtype", "logits"}, [](A& a) { a.logits.dtype = NT_I8; }},
      {{"logits row_stride", "logits"}, [](A& a) { a.logits.row_stride = 10; }},
      {{"tokens absent", "tokens.offsets"}, [](A& a) { a.tokens = nt_token_lists{}; }},
      {{"offsets length", "tokens.offsets"}, [](A& a) { a.tokens.offsets.shape[0] = 2; }},
      {{"offsets dtype", "tokens.offsets"}, [](A& a) { a.tokens.offsets.dtype = NT_U64; }},
      {{"offsets device", "tokens.offsets"}, [](A& a) { a.tokens.offsets.device_id += 1; }},
      {{"ids dtype", "tokens.ids"}, [](A& a) { a.tokens.ids.dtype = NT_F32; }},
      {{"ids null", "tokens.ids"}, [](A& a) { a.tokens.ids.data = nullptr; }},
      {{"values length", "values"}, [](A& a) { a.values.shape[0] = 4; }},
      {{"values dtype", "values"}, [](A& a) { a.values.dtype = NT_F16; }},
      {{"values null", "values"}, [](A& a) { a.values.data = nullptr; }},
      {{"values device", "values"}, [](A& a) { a.values.device_id += 1; }},
  };
  for (auto& [c, mutate] : cases) {
    A a = bias();
    mutate(a);
    expect_rejected(c.what, c.arg, NT_ERROR_INVALID_ARGUMENT, [&] {
      size_t bytes = 0;
      EXPECT_EQ(nt_apply_logit_bias_workspace_size(&a, &bytes), NT_ERROR_INVALID_ARGUMENT) << c.what;
      return nt_apply_logit_bias(&a, nullptr, 0, dev().stream());
    });
  }
  // The valid call works, and a short workspace is refused before anything runs.
  A a = bias();
  size_t bytes = 0;
  ASSERT_EQ(nt_apply_logit_bias_workspace_size(&a, &bytes), NT_OK) << nt_last_error();
  if (bytes > 0) {
    expect_rejected("workspace too small", "workspace_bytes", NT_ERROR_WORKSPACE, [&] {
      auto ws = std::make_unique<Buffer>(dev(), bytes);
      return nt_apply_logit_bias(&a, ws->handle(), bytes - 1, dev().stream());
    });
    expect_rejected("workspace null", "workspace", NT_ERROR_WORKSPACE,
                    [&] { return nt_apply_logit_bias(&a, nullptr, bytes, dev().stream()); });
  }
  auto ws = std::make_unique<Buffer>(dev(), bytes ? bytes : 16);
  EXPECT_EQ(nt_apply_logit_bias(&a, ws->handle(), bytes, dev().stream()), NT_OK) << nt_last_error();
  dev().sync();
  EXPECT_EQ(nt_apply_logit_bias(nullptr, nullptr, 0, dev().stream()), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nt_apply_logit_bias_workspace_size(&a, nullptr), NT_ERROR_INVALID_ARGUMENT);
}

NTT_INSTANTIATE_ON_DEVICES(Penalties);
NTT_INSTANTIATE_ON_DEVICES(LogitBias);
NTT_INSTANTIATE_ON_DEVICES(PenaltiesErrors);

// ---- the C++ layer (nexttok.hpp) ---------------------------------------------------

TEST(PenaltiesCpp, HelpersRunAndThrowNamingTheArgument) {
  const int64_t rows = 2, vocab = 8;
  std::vector<float> logits = {1, -2, 3, -4, 5, -6, 7, -8, 0.5f, 1.5f, -2.5f, 3.5f, 4, 5, 6, 7};
  const std::vector<int32_t> offsets = {0, 3, 4}, ids = {2, 2, 1, 7};
  const std::vector<float> values = {1.0f, 0.5f, -1.0f, 2.0f};
  const auto l = nexttok::matrix(logits.data(), rows, vocab);
  const auto lists = nexttok::token_lists(nexttok::vector(offsets.data(), rows + 1),
                                          nexttok::vector(ids.data(), int64_t(ids.size())));
  nexttok::apply_logit_bias(nexttok::logit_bias_args(l, lists, nexttok::vector(values.data(), 4)));
  EXPECT_EQ(logits[2], 3.0f + 1.0f + 0.5f);
  EXPECT_EQ(logits[1], -2.0f - 1.0f);
  EXPECT_EQ(logits[8 + 7], 7.0f + 2.0f);
  nexttok::PenaltyParams p;
  p.repetition.scalar = 2.0f;
  p.frequency.scalar = 0.5f;
  nexttok::apply_penalties(nexttok::penalties_args(l, nexttok::no_tokens(), lists, p));
  EXPECT_EQ(logits[2], 4.5f / 2.0f - 0.5f * 2.0f);  // twice in row 0's output
  EXPECT_EQ(logits[1], -3.0f * 2.0f - 0.5f);
  p.repetition.scalar = 0.0f;
  expect_invalid_argument(
      [&] { nexttok::apply_penalties(nexttok::penalties_args(l, lists, nexttok::no_tokens(), p)); },
      "repetition");
}

}  // namespace
}  // namespace ntt
