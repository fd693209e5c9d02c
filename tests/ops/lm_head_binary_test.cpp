// lm_head_topk_binary on every device against the dequantised double reference
// (logit = act_scale * sum_g wscale * D + bias, D the exact integer group dot).
// "Grid" inputs make every fp32 step exact: act_scale a power of two, wscale a
// multiple of 2^-6, bias a multiple of 2^-2; |sum_g wscale D| <= 127 H, so with
// H <= 2048 and act_scale = 2^-7 every value is a multiple of 2^-13 of at most
// 2^11 in magnitude: 24 significant bits. Those must match exactly, ties
// included; realistic inputs are held to 1e-4 of the row's largest |logit|
// (SPEC.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/ops.h"

namespace ntt {
namespace {

class LmHeadBinary : public DeviceTest {};

BinaryCase grid_case(Rng& rng, int64_t rows, int64_t vocab, int64_t hidden, int32_t group,
                     int32_t k, bool bias, nt_dtype bias_dtype) {
  BinaryCase c;
  c.rows = rows;
  c.vocab = vocab;
  c.hidden = hidden;
  c.group = group;
  c.k = k;
  c.act_q.resize(size_t(rows * hidden));
  for (auto& q : c.act_q) q = int8_t(rng.integer(-127, 127));
  c.act_scale.assign(size_t(rows), 1.0f / 128);
  c.signs = random_signs(rng, size_t(vocab * hidden));
  c.wscale.resize(size_t(vocab * (hidden / group)));
  for (auto& w : c.wscale) w = float(rng.integer(1, 64)) / 64;
  if (bias) {
    c.bias.resize(size_t(vocab));
    for (auto& b : c.bias) b = float(rng.integer(-64, 64)) / 4;
    c.bias_dtype = bias_dtype;
  }
  return c;
}

// Activations quantised from N(0,1) hidden states, f16 scales of a trained head.
BinaryCase realistic_case(Rng& rng, int64_t rows, int64_t vocab, int64_t hidden, int32_t group,
                          int32_t k, bool bias) {
  BinaryCase c = grid_case(rng, rows, vocab, hidden, group, k, false, NT_F32);
  for (int64_t m = 0; m < rows; ++m) {
    std::vector<float> x(static_cast<size_t>(hidden));
    for (auto& v : x) v = float(rng.normal());
    reference_quantize_row(x.data(), hidden, &c.act_q[size_t(m * hidden)], &c.act_scale[size_t(m)]);
  }
  for (auto& w : c.wscale) w = round_to(NT_F16, float(rng.uniform(0.002, 0.05)));
  if (bias) {
    c.bias.resize(size_t(vocab));
    for (auto& b : c.bias) b = float(rng.normal());
  }
  return c;
}

void expect_topk(TestDevice& dev, const BinaryCase& c, double tol) {
  const TopK got = run_binary(dev, c);
  const std::vector<double> logits = reference_binary_logits(c);
  for (int64_t m = 0; m < c.rows; ++m) {
    const std::string err =
        compare_topk_row(&logits[size_t(m * c.vocab)], c.vocab, c.k, &got.values[size_t(m * c.k)],
                         &got.indices[size_t(m * c.k)], tol);
    EXPECT_EQ(err, "") << "row " << m << " of M=" << c.rows << ", V=" << c.vocab << " H=" << c.hidden
                       << " G=" << c.group << " k=" << c.k << (c.bias.empty() ? " no bias" : " bias");
  }
  if (dev.type() != NT_DEVICE_CPU && tol == 0) {
    const TopK cpu = run_binary(cpu_device(), c);
    EXPECT_EQ(got.indices, cpu.indices) << "indices differ from the cpu backend";
  }
}

TEST_P(LmHeadBinary, GridInputsExactWithTies) {
  uint64_t seed = 12000;
  const nt_dtype bias_types[] = {NT_F32, NT_F16, NT_BF16};
  for (int32_t group : {32, 64, 128, 256})
    for (int64_t vocab : {1, 33, 2500})
      for (int32_t k : {1, 50, 2048}) {
        if (k > vocab) continue;
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " G=" + std::to_string(group));
        const int64_t hidden = group == 256 ? 512 : 4 * group;
        BinaryCase c = grid_case(rng, 3, vocab, hidden, group, k, seed % 2 == 0, bias_types[seed % 3]);
        if (seed % 3 == 0) {  // strided rows everywhere
          c.act_stride = hidden + 7;
          c.wq_stride = hidden / 32 + 1;
          c.wscale_stride = hidden / group + 2;
          c.out_stride = k + 3;
        }
        expect_topk(dev(), c, 0.0);
      }
}

TEST_P(LmHeadBinary, KEqualsVocabulary) {
  uint64_t seed = 12100;
  for (int64_t vocab : {1, 7, 999}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed));
    expect_topk(dev(), grid_case(rng, 2, vocab, 128, 64, int32_t(vocab), true, NT_BF16), 0.0);
  }
}

TEST_P(LmHeadBinary, WinnersPlantedInOneChunk) {
  uint64_t seed = 12200;
  const int64_t vocab = 10007, hidden = 256;
  for (int32_t k : {50, 2048})
    for (int64_t start : {int64_t(0), int64_t(5000), vocab - k - 1, vocab - k}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " k=" + std::to_string(k) + " start=" + std::to_string(start));
      BinaryCase c = grid_case(rng, 1, vocab, hidden, 128, k, seed % 2 == 1, NT_F32);
      for (int64_t v = start; v < start + k; ++v) {
        for (int64_t h = 0; h < hidden; ++h)  // signs agreeing with the activations
          c.signs[size_t(v * hidden + h)] = c.act_q[size_t(h)] >= 0 ? 1 : -1;
        for (int g = 0; g < 2; ++g) c.wscale[size_t(v * 2 + g)] = float(rng.integer(48, 64)) / 64;
      }
      const std::vector<double> logits = reference_binary_logits(c);
      for (int64_t i : reference_topk(logits.data(), vocab, k))
        ASSERT_TRUE(i >= start && i < start + k) << "plant failed";
      expect_topk(dev(), c, 0.0);
    }
}

// Calls of 1 or 2 rows on CUDA take the bit-plane kernel (G = 128 or 256),
// whose warps keep their own top-k lists. G = 256 takes two MMA steps per
// group, and the last CTA's range is ragged. At H = 512 the scale rows (8 or 4
// bytes) go in cp.async pieces; at 8 groups (16 bytes) on sm_90 a tile's rows
// land by bulk copies (one for a tile's signs, one for its scales), also from
// rows padded to 16-byte strides. H = 1,536 puts a partial 1,024-column box
// after a whole one (12 groups at G = 128, 6 at G = 256; scale rows of 24 and
// 12 bytes, so in cp.async pieces), at k = 40 only: the case is slow on the
// CPU backend.
TEST_P(LmHeadBinary, DecodeRowsEveryLayout) {
  uint64_t seed = 12350;
  for (int64_t rows : {1, 2})
    for (int32_t group : {128, 256})
      for (int64_t hidden : {int64_t(512), int64_t(8 * group), int64_t(1536)})
        for (int32_t k : {5, 40}) {
          if (hidden == 1536 && k != 40) continue;
          Rng rng(++seed);
          SCOPED_TRACE(seed_trace(seed) + " M=" + std::to_string(rows) + " G=" + std::to_string(group) +
                       " H=" + std::to_string(hidden) + " k=" + std::to_string(k));
          BinaryCase c = grid_case(rng, rows, 70001, hidden, group, k, (seed / 4) % 2 == 0, NT_BF16);
          if (hidden > 512 && k == 40) {  // padded strides, with and without a bias
            c.wq_stride = hidden / 32 + 4;
            c.wscale_stride = hidden / group + 8;
          }
          expect_topk(dev(), c, 0.0);
        }
}

// The bit-plane kernel's warp lists hold up to max(4k + 32, 512) entries and
// are cut back to k when the next tile might not fit. V = 640,000 gives each
// CTA of a 132-SM GPU 4,864 rows, 608 for each of its 8 warps, so every
// warp's list fills and is cut once per token row (over 2,000 cuts at M = 2)
// before the CTA selects its k best over its warps' lists. H = 256 at G = 128
// keeps the case small (cp.async pieces: 4-byte scale rows); both token-row
// counts.
TEST_P(LmHeadBinary, DecodeRowsOverWarpListCuts) {
  const uint64_t seed = 12380;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  BinaryCase c = grid_case(rng, 2, 640000, 256, 128, 5, true, NT_F32);
  expect_topk(dev(), c, 0.0);
  c.rows = 1;
  c.act_q.resize(size_t(c.hidden));
  c.act_scale.resize(1);
  expect_topk(dev(), c, 0.0);
}

TEST_P(LmHeadBinary, RealisticInputsWithinTolerance) {
  uint64_t seed = 12300;
  for (int32_t group : {32, 128})
    for (int32_t k : {1, 50, 2048}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed));
      expect_topk(dev(), realistic_case(rng, 4, 3001, 1024, group, k, seed % 2 == 0), 1e-4);
    }
  // Full W1 hidden size (H = 5120, G = 128), a smaller vocabulary.
  Rng rng(12399);
  expect_topk(dev(), realistic_case(rng, 2, 1500, 5120, 128, 50, true), 1e-4);
}

// quantize_activations feeding the head, all on the device.
TEST_P(LmHeadBinary, QuantizedActivationsEndToEnd) {
  const uint64_t seed = 12400;
  Rng rng(seed);
  SCOPED_TRACE(seed_trace(seed));
  const int64_t rows = 3, hidden = 512;
  std::vector<float> x(size_t(rows * hidden));
  for (auto& v : x) v = round_to(NT_BF16, float(rng.normal()));
  const Quantized q = run_quantize(dev(), NT_BF16, rows, hidden, 0, x);
  BinaryCase c = realistic_case(rng, rows, 2000, hidden, 64, 50, true);
  c.act_q = q.q;
  c.act_scale = q.scale;
  expect_topk(dev(), c, 1e-4);
}

// Calls of more than 2 rows go in passes of up to 64 (M = 66 and 70: a second
// pass of 2 and 6 rows), one pass kernel instantiated for 8, 16, 32 or 64
// token rows (n-tiles 1, 2, 4, 8). On sm_90 the shapes with whole 512-column
// chunks and 16-byte scale rows (8 or more groups, 16-byte strides: H = 1,024
// at G = 128, 2,048 at G = 256) take the bulk-copy warpgroup-MMA kernel: two
// groups in flight at G = 128 up to 32 rows (M = 5, 12, 24), each group's MMAs
// in halves at 64 (M = 64, 70), one group at a time at G = 256 (M = 6, 10,
// 20, 40). Every other shape takes the warp-MMA kernel: H not a multiple of 512
// (H = 640 at G = 128, 768 at G = 256: a chunk of one group after full ones),
// scale rows of fewer than 8 groups, or scale rows padded to a stride that is
// not 16-byte aligned (M = 12 with a pad of 2 halves), and G = 32 or 64
// (lanes walking different classes). V = 34,000 gives each of up to 132 CTAs
// two 256-row tiles, the second ragged; k = 300 and 2,048 take the sorting
// merge.
TEST_P(LmHeadBinary, PassesOfManyRowsExact) {
  struct Shape {
    int64_t rows, hidden, vocab;
    int32_t group, k;
    int64_t scale_pad;  // halves between scale rows beyond H / G
  };
  uint64_t seed = 12400;
  for (const Shape& s : {Shape{66, 640, 34000, 128, 50, 0}, Shape{29, 768, 9001, 256, 300, 0},
                         Shape{16, 512, 9001, 128, 1, 0}, Shape{9, 512, 9001, 256, 2048, 0},
                         Shape{40, 512, 9001, 64, 50, 0}, Shape{16, 256, 9001, 32, 10, 0},
                         Shape{24, 512, 9001, 64, 100, 0}, Shape{12, 1024, 9001, 128, 50, 2},
                         Shape{12, 1024, 34000, 128, 50, 0}, Shape{5, 1024, 34000, 128, 50, 0},
                         Shape{24, 1024, 9001, 128, 40, 0}, Shape{64, 1024, 9001, 128, 64, 0},
                         Shape{70, 1024, 9001, 128, 300, 0}, Shape{6, 2048, 9001, 256, 30, 0},
                         Shape{10, 2048, 9001, 256, 50, 0}, Shape{20, 2048, 9001, 256, 100, 0},
                         Shape{40, 2048, 9001, 256, 20, 0}}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " M=" + std::to_string(s.rows) + " H=" + std::to_string(s.hidden) +
                 " G=" + std::to_string(s.group));
    BinaryCase c = grid_case(rng, s.rows, s.vocab, s.hidden, s.group, s.k, seed % 2 == 0, NT_F16);
    if (s.scale_pad != 0) c.wscale_stride = s.hidden / s.group + s.scale_pad;
    expect_topk(dev(), c, 0.0);
  }
}

// Scale rows of an odd number of groups, 2-byte aligned: no tensor-core kernel
// takes them, so on CUDA the generic kernel scores every pass, at M = 1 and in
// passes of 64 and 6.
TEST_P(LmHeadBinary, OddGroupCountsTakeTheGenericKernel) {
  uint64_t seed = 12440;
  for (int64_t rows : {1, 3, 70}) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " M=" + std::to_string(rows));
    expect_topk(dev(), grid_case(rng, rows, 2500, 384, 128, 50, rows == 3, NT_F32), 0.0);
  }
}

TEST_P(LmHeadBinary, RepeatedCallsAreBitwiseEqual) {
  Rng rng(12450);
  const BinaryCase c = realistic_case(rng, 4, 4099, 512, 128, 100, true);
  const TopK first = run_binary(dev(), c);
  for (int i = 0; i < 2; ++i) {
    const TopK again = run_binary(dev(), c);
    EXPECT_EQ(again.indices, first.indices);
    for (size_t j = 0; j < first.values.size(); ++j)
      ASSERT_EQ(f32_bits(again.values[j]), f32_bits(first.values[j])) << "position " << j;
  }
}

TEST_P(LmHeadBinary, EmptyBatchIsANoOp) {
  Rng rng(12500);
  const TopK got = run_binary(dev(), grid_case(rng, 0, 100, 64, 32, 10, false, NT_F32));
  EXPECT_TRUE(got.indices.empty());
}

NTT_INSTANTIATE_ON_DEVICES(LmHeadBinary);

}  // namespace
}  // namespace ntt
