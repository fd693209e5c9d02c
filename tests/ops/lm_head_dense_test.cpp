// lm_head_topk_dense on every device against the materialised double logits and a
// stable sort. "Grid" inputs (small multiples of powers of two) make every product
// and partial sum exact in fp32 whatever the summation order, so indices and
// values must match exactly, ties included; continuous inputs are held to 1e-5
// of the row's largest |logit|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "harness/ops.h"

namespace ntt {
namespace {

const nt_dtype kFloatTypes[] = {NT_F32, NT_F16, NT_BF16};

class LmHeadDense : public DeviceTest {};

// hidden = i/8 (|i| <= 32), weight = j/16 (|j| <= 16), bias = b/4 (|b| <= 32): every
// value has <= 6 significant bits (exact in bf16), products are multiples of 2^-7,
// and |logit| <= 4H + 8 stays far below 2^24 * 2^-7 for H <= 4096.
DenseCase grid_case(Rng& rng, nt_dtype dtype, int64_t rows, int64_t vocab, int64_t hidden,
                    int32_t k, bool bias, nt_dtype bias_dtype) {
  DenseCase c;
  c.rows = rows;
  c.vocab = vocab;
  c.hidden = hidden;
  c.dtype = dtype;
  c.k = k;
  c.x.resize(size_t(rows * hidden));
  for (auto& v : c.x) v = float(rng.integer(-32, 32)) / 8;
  c.weight.resize(size_t(vocab * hidden));
  for (auto& v : c.weight) v = float(rng.integer(-16, 16)) / 16;
  if (bias) {
    c.bias.resize(size_t(vocab));
    for (auto& v : c.bias) v = float(rng.integer(-32, 32)) / 4;
    c.bias_dtype = bias_dtype;
  }
  return c;
}

DenseCase continuous_case(Rng& rng, nt_dtype dtype, int64_t rows, int64_t vocab, int64_t hidden,
                          int32_t k, bool bias) {
  DenseCase c;
  c.rows = rows;
  c.vocab = vocab;
  c.hidden = hidden;
  c.dtype = dtype;
  c.k = k;
  c.x.resize(size_t(rows * hidden));
  for (auto& v : c.x) v = round_to(dtype, float(rng.normal()));
  c.weight.resize(size_t(vocab * hidden));
  for (auto& v : c.weight) v = round_to(dtype, float(rng.normal() / std::sqrt(double(hidden))));
  if (bias) {
    c.bias.resize(size_t(vocab));
    for (auto& v : c.bias) v = float(0.5 * rng.normal());
  }
  return c;
}

void expect_topk(TestDevice& dev, const DenseCase& c, double tol) {
  const TopK got = run_dense(dev, c);
  const std::vector<double> logits = reference_dense_logits(c);
  for (int64_t m = 0; m < c.rows; ++m) {
    const std::string err =
        compare_topk_row(&logits[size_t(m * c.vocab)], c.vocab, c.k, &got.values[size_t(m * c.k)],
                         &got.indices[size_t(m * c.k)], tol);
    EXPECT_EQ(err, "") << "row " << m << " of M=" << c.rows << ", V=" << c.vocab << " H=" << c.hidden
                       << " k=" << c.k << " " << dtype_label(c.dtype)
                       << (c.bias.empty() ? " no bias" : " bias");
  }
  if (dev.type() != NT_DEVICE_CPU && tol == 0) {
    const TopK cpu = run_dense(cpu_device(), c);
    EXPECT_EQ(got.indices, cpu.indices) << "indices differ from the cpu backend";
  }
}

TEST_P(LmHeadDense, GridInputsExactWithTies) {
  uint64_t seed = 11000;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {1, 33, 1000, 4099})
      for (int32_t k : {1, 5, 50, 2048}) {
        if (k > vocab) continue;
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed));
        const bool bias = seed % 2 == 0;
        DenseCase c = grid_case(rng, dtype, 3, vocab, 64, k, bias, kFloatTypes[seed % 3]);
        if (seed % 3 == 0) {  // strided rows everywhere
          c.x_stride = c.hidden + 5;
          c.weight_stride = c.hidden + 3;
          c.out_stride = k + 2;
        }
        expect_topk(dev(), c, 0.0);
      }
}

// Every pass width the CUDA kernels plan for (n-tiles of 8 token rows: M up to
// 8, 16, 32 and 64, and 65 and 70 for a second pass), H = 200 (a ragged last
// block for kernels that step 64 columns at a time), on exact grid inputs, f16
// at odd M and bf16 at even. Hidden rows 8 elements apart beyond H are 16-byte
// aligned: the bulk-copy kernel (dense_staged_kernel) on sm_90,
// dense_mma_kernel (weights straight to registers) on older GPUs (M = 8, 9,
// 16, 20, 31, 33, 64, 65). Rows 4 or 2 apart (8- or 4-byte aligned) are rows a
// bulk copy cannot take: dense_mma_kernel everywhere, its hidden rows staged
// in 8- or 4-byte pieces (M = 2, 3, 12, 15, 17, 18, 40, 41, 70).
TEST_P(LmHeadDense, EveryPassWidthWithRaggedColumns) {
  struct Shape {
    int64_t rows, stride_pad;
  };
  uint64_t seed = 11700;
  for (const Shape& s : {Shape{8, 8}, Shape{9, 8}, Shape{16, 8}, Shape{20, 8}, Shape{31, 8}, Shape{33, 8},
                         Shape{64, 8}, Shape{65, 8}, Shape{2, 4}, Shape{3, 4}, Shape{12, 2}, Shape{15, 2},
                         Shape{17, 4}, Shape{18, 2}, Shape{40, 4}, Shape{41, 4}, Shape{70, 2}}) {
    Rng rng(++seed);
    const nt_dtype dtype = s.rows % 2 ? NT_F16 : NT_BF16;
    DenseCase c = grid_case(rng, dtype, s.rows, 3001, 200, 20, s.rows % 3 == 0, NT_F32);
    c.x_stride = c.hidden + s.stride_pad;
    SCOPED_TRACE(seed_trace(seed) + " M=" + std::to_string(s.rows) + " hidden stride " +
                 std::to_string(c.x_stride));
    expect_topk(dev(), c, 0.0);
  }
}

// Weight rows that start inside their allocation, 12 bf16 elements (24 bytes)
// in, H = 200 apart (400 bytes: a multiple of 16, not of 32), so every row is
// 8-byte aligned and none may be read 16 bytes at a time. On CUDA the kernel
// choice reads that alignment off the base and the stride (row_alignment):
// these rows take the generic kernel, where rows read as 16-byte aligned
// would take the tensor-core kernels and their misaligned 16-byte loads. One
// row (no stride to read) and many, f16 and bf16.
TEST_P(LmHeadDense, WeightRowsOffsetInsideTheirAllocation) {
  uint64_t seed = 11800;
  for (int64_t vocab : {1, 3001})
    for (nt_dtype dtype : {NT_F16, NT_BF16}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(vocab) + " " + dtype_label(dtype));
      DenseCase c = grid_case(rng, dtype, 3, vocab, 200, std::min<int32_t>(20, int32_t(vocab)), true, NT_F32);
      c.weight_offset = 12;
      expect_topk(dev(), c, 0.0);
    }
}

TEST_P(LmHeadDense, KEqualsVocabulary) {
  uint64_t seed = 11100;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {1, 2, 37, 1000, 2048}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed));
      expect_topk(dev(), grid_case(rng, dtype, 2, vocab, 32, int32_t(vocab), true, dtype), 0.0);
    }
}

// Duplicated weight rows give equal logits: the lower index comes first. On grid
// inputs the sums are exact, so the duplicates tie exactly whatever the backend's
// summation order; on continuous inputs only the order of equal values is checked.
TEST_P(LmHeadDense, EqualLogitsResolveToTheLowerIndex) {
  const uint64_t seed = 11200;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  auto duplicate_rows = [&](DenseCase& c, int copies, int64_t sources) {
    for (int copy = 0; copy < copies; ++copy) {
      const int64_t from = rng.integer(0, sources - 1), to = rng.integer(sources, c.vocab - 1);
      std::copy(c.weight.begin() + from * c.hidden, c.weight.begin() + (from + 1) * c.hidden,
                c.weight.begin() + to * c.hidden);
    }
  };
  for (nt_dtype dtype : kFloatTypes) {
    DenseCase grid = grid_case(rng, dtype, 2, 3001, 96, 64, false, NT_F32);
    duplicate_rows(grid, 300, 10);
    expect_topk(dev(), grid, 0.0);

    DenseCase c = continuous_case(rng, dtype, 2, 3001, 96, 64, false);
    duplicate_rows(c, 200, 5);
    const TopK got = run_dense(dev(), c);
    for (int64_t m = 0; m < c.rows; ++m)
      for (int64_t j = 1; j < c.k; ++j) {
        const size_t at = size_t(m * c.k + j);
        if (got.values[at - 1] == got.values[at]) {
          EXPECT_LT(got.indices[at - 1], got.indices[at]) << "equal values out of index order";
        }
      }
    expect_topk(dev(), c, 1e-5);
  }
}

// Every weight row the same: every logit ties, so the top k are tokens 0..k-1.
// Every list of a GPU's scoring CTAs then reaches the bound of its merge, so
// the merge takes the most candidates it can be handed (at V = 100,003, more
// than its sorting warps hold).
TEST_P(LmHeadDense, EveryLogitTiedGivesTheLowestIndices) {
  uint64_t seed = 11250;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {3001, 100003})
      for (int32_t k : {1, 50, 64}) {
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(vocab) + " k=" + std::to_string(k));
        DenseCase c = grid_case(rng, dtype, 2, vocab, 32, k, false, NT_F32);
        for (int64_t v = 1; v < vocab; ++v)
          std::copy(c.weight.begin(), c.weight.begin() + c.hidden, c.weight.begin() + v * c.hidden);
        const TopK got = run_dense(dev(), c);
        for (int64_t m = 0; m < c.rows; ++m)
          for (int64_t j = 0; j < k; ++j) EXPECT_EQ(got.indices[size_t(m * k + j)], j) << "row " << m;
        expect_topk(dev(), c, 0.0);
      }
}

// All winners inside one contiguous range of vocabulary rows (one chunk of any
// backend's tiling), at the start, the middle, and against a ragged last chunk.
TEST_P(LmHeadDense, WinnersPlantedInOneChunk) {
  uint64_t seed = 11300;
  const int64_t vocab = 10007;
  for (int32_t k : {50, 2048})
    for (int64_t start : {int64_t(0), int64_t(4000), vocab - k - 3, vocab - k}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " k=" + std::to_string(k) + " start=" + std::to_string(start));
      DenseCase c = grid_case(rng, NT_BF16, 1, vocab, 64, k, seed % 2 == 0, NT_F32);
      for (int64_t v = start; v < start + k; ++v)
        for (int64_t h = 0; h < c.hidden; ++h) {
          // Aligned with the hidden state: a logit far above every unplanted one.
          const float x = c.x[size_t(h)];
          c.weight[size_t(v * c.hidden + h)] = (x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f) *
                                               float(rng.integer(12, 16)) / 16;
        }
      const std::vector<double> logits = reference_dense_logits(c);
      const std::vector<int64_t> top = reference_topk(logits.data(), vocab, k);
      for (int64_t i : top) ASSERT_TRUE(i >= start && i < start + k) << "plant failed";
      expect_topk(dev(), c, 0.0);
    }
}

// A bias rising with the token index puts each chunk's whole list above the
// maxima of the chunks before it, so the k best lie over many chunks and
// thousands of candidates pass the CUDA few-winners merge's bound (the
// smallest of its 32 warps' ceil(k / 32)-th largest list maxima: about half
// the ~130 lists whole, over 3,000 entries): its fallback for more than the
// 2,048 it sorts at once.
TEST_P(LmHeadDense, WinnersSpreadOverManyChunks) {
  uint64_t seed = 11350;
  const int64_t vocab = 70001;
  for (int32_t k : {50, 64}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " k=" + std::to_string(k));
    DenseCase c = grid_case(rng, NT_BF16, 3, vocab, 64, k, true, NT_F32);
    for (int64_t v = 0; v < vocab; ++v) c.bias[size_t(v)] += float(v / 64);
    expect_topk(dev(), c, 0.0);
  }
}

TEST_P(LmHeadDense, ContinuousInputsWithinTolerance) {
  uint64_t seed = 11400;
  for (nt_dtype dtype : kFloatTypes)
    for (int32_t k : {1, 50, 2048}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed));
      DenseCase c = continuous_case(rng, dtype, 4, 4099, 256, k, seed % 2 == 1);
      c.bias_dtype = kFloatTypes[seed % 3];
      for (auto& b : c.bias) b = round_to(c.bias_dtype, b);
      expect_topk(dev(), c, 1e-5);
    }
}

// k = 1 is the argmax (first occurrence), so it must agree with it exactly.
TEST_P(LmHeadDense, KOneIsTheArgmax) {
  const uint64_t seed = 11500;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  DenseCase c = grid_case(rng, NT_F32, 8, 5003, 48, 1, true, NT_F16);
  const TopK got = run_dense(dev(), c);
  const std::vector<double> logits = reference_dense_logits(c);
  for (int64_t m = 0; m < c.rows; ++m) {
    const double* row = &logits[size_t(m * c.vocab)];
    const int64_t argmax = std::max_element(row, row + c.vocab) - row;  // first maximum
    EXPECT_EQ(got.indices[size_t(m)], argmax) << "row " << m;
    EXPECT_EQ(double(got.values[size_t(m)]), row[argmax]) << "row " << m;
  }
}

// NaN scores rank as -inf and are reported as NaN.
TEST_P(LmHeadDense, NanScoresComeLast) {
  const uint64_t seed = 11600;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  DenseCase c = grid_case(rng, NT_F32, 2, 40, 32, 40, false, NT_F32);
  c.weight[size_t(3 * c.hidden + 7)] = std::numeric_limits<float>::quiet_NaN();
  c.weight[size_t(17 * c.hidden)] = std::numeric_limits<float>::quiet_NaN();
  expect_topk(dev(), c, 0.0);
  c.k = 10;  // and never among the winners
  expect_topk(dev(), c, 0.0);
}

TEST_P(LmHeadDense, RepeatedCallsAreBitwiseEqual) {
  Rng rng(11650);
  for (nt_dtype dtype : kFloatTypes) {
    const DenseCase c = continuous_case(rng, dtype, 4, 4099, 200, 100, true);
    const TopK first = run_dense(dev(), c);
    for (int i = 0; i < 2; ++i) {
      const TopK again = run_dense(dev(), c);
      EXPECT_EQ(again.indices, first.indices) << dtype_label(dtype);
      for (size_t j = 0; j < first.values.size(); ++j)
        ASSERT_EQ(f32_bits(again.values[j]), f32_bits(first.values[j])) << dtype_label(dtype) << " position " << j;
    }
  }
}

TEST_P(LmHeadDense, EmptyBatchIsANoOp) {
  Rng rng(11700);
  const TopK got = run_dense(dev(), grid_case(rng, NT_F32, 0, 100, 32, 10, false, NT_F32));
  EXPECT_TRUE(got.indices.empty());
}

NTT_INSTANTIATE_ON_DEVICES(LmHeadDense);

}  // namespace
}  // namespace ntt
