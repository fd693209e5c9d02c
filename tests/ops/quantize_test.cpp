// pack_weights and quantize_activations on every device, against the formulas of
// SEMANTICS.md: bit layout, IEEE division, round-half-even, clamp, zero rows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/ops.h"

namespace ntt {
namespace {

class Quantize : public DeviceTest {};

TEST_P(Quantize, PackWeightsBitLayout) {
  uint64_t seed = 10000;
  for (int64_t cols : {32, 64, 96, 5120})
    for (int64_t rows : {1, 3, 257}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(rows) + " H=" + std::to_string(cols));
      std::vector<int8_t> signs(size_t(rows * cols));
      for (auto& s : signs) s = rng.coin() ? 1 : -1;
      EXPECT_EQ(run_pack(dev(), rows, cols, signs), reference_pack(signs, rows, cols));
    }
  // Bit j of word w is column 32w + j: a single +1 lands on one bit.
  std::vector<int8_t> one(64, -1);
  one[37] = 1;
  EXPECT_EQ(run_pack(dev(), 1, 64, one), (std::vector<int32_t>{0, int32_t(1u << 5)}));
  one.assign(64, 1);
  EXPECT_EQ(run_pack(dev(), 1, 64, one), (std::vector<int32_t>{-1, -1}));
}

void expect_quantized(TestDevice& dev, nt_dtype dtype, int64_t rows, int64_t cols, int64_t stride,
                      const std::vector<float>& x) {
  const Quantized got = run_quantize(dev, dtype, rows, cols, stride, x);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) row[size_t(j)] = round_to(dtype, x[size_t(r * cols + j)]);
    std::vector<int8_t> q(static_cast<size_t>(cols));
    float scale;
    reference_quantize_row(row.data(), cols, q.data(), &scale);
    ASSERT_EQ(f32_bits(got.scale[size_t(r)]), f32_bits(scale))
        << "row " << r << ": scale " << got.scale[size_t(r)] << ", expected " << scale;
    for (int64_t j = 0; j < cols; ++j)
      ASSERT_EQ(int(got.q[size_t(r * cols + j)]), int(q[size_t(j)]))
          << "row " << r << " column " << j << ": x=" << row[size_t(j)] << " scale=" << scale;
  }
}

TEST_P(Quantize, ActivationsMatchTheFormula) {
  uint64_t seed = 10100;
  for (nt_dtype dtype : {NT_F32, NT_F16, NT_BF16})
    for (int64_t cols : {1, 33, 5120})
      for (int64_t gap : {0, 9}) {
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " H=" + std::to_string(cols));
        const int64_t rows = 5;
        std::vector<float> x(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r) {
          const double scale = std::pow(10.0, rng.uniform(-3, 3));
          for (int64_t j = 0; j < cols; ++j) x[size_t(r * cols + j)] = float(scale * rng.normal());
        }
        for (int64_t j = 0; j < cols; ++j) x[size_t(2 * cols + j)] = 0.0f;  // zero row: scale 1
        if (cols > 1) x[size_t(3 * cols + 1)] = std::numeric_limits<float>::quiet_NaN();
        expect_quantized(dev(), dtype, rows, cols, gap ? cols + gap : 0, x);
      }
}

// With max|x| = 127 the scale is exactly 1, so x / scale sits exactly on .5 ties.
// Every value is representable in f16 and bf16 too.
TEST_P(Quantize, RoundsHalfToEven) {
  const std::vector<float> x = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f,
                                -127.0f, 62.5f, -60.5f, 3.5f, 4.5f, 0.0f, -0.0f};
  const std::vector<int8_t> want = {127, 0, 2, 2, 0, -2, -2, -127, 62, -60, 4, 4, 0, 0};
  for (nt_dtype dtype : {NT_F32, NT_F16, NT_BF16}) {
    for (float v : x) ASSERT_EQ(round_to(dtype, v), v);
    const Quantized q = run_quantize(dev(), dtype, 1, int64_t(x.size()), 0, x);
    EXPECT_EQ(q.q, want) << dtype_label(dtype);
    EXPECT_EQ(q.scale[0], 1.0f) << dtype_label(dtype);
  }
}

TEST_P(Quantize, ZeroRowGetsScaleOne) {
  const std::vector<float> x = {0, -0.0f, 0, 0, 1, 2, 3, 4};
  const Quantized q = run_quantize(dev(), NT_F32, 2, 4, 0, x);
  EXPECT_EQ(q.scale[0], 1.0f);
  EXPECT_EQ(std::vector<int8_t>(q.q.begin(), q.q.begin() + 4), std::vector<int8_t>(4, 0));
  expect_quantized(dev(), NT_F32, 2, 4, 0, x);
}

NTT_INSTANTIATE_ON_DEVICES(Quantize);

}  // namespace
}  // namespace ntt
