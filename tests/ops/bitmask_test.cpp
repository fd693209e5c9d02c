// Grammar masks on every device: apply_token_bitmask (all rows or listed rows,
// out-of-range and duplicate indices, padded vocabularies, strided rows, rows
// long enough to be split into blocks and over threads, more rows than the CPU
// backend marks in one pass over the indices, allowed logits bit-for-bit
// unchanged) and bitmask_from_allowed (round trip).
#include <gtest/gtest.h>

#include <cstdint>

#include "harness/ops.h"

namespace ntt {
namespace {

const nt_dtype kFloatTypes[] = {NT_F32, NT_F16, NT_BF16};

class Bitmask : public DeviceTest {};

void expect_masked(TestDevice& dev, const MaskCase& c) {
  const std::vector<uint8_t> got = run_apply_mask(dev, c);
  const std::vector<uint8_t> want = reference_apply_mask(c);
  const size_t n = want.size() / dtype_bytes(c.dtype);
  int reported = 0;
  for (size_t i = 0; i < n && reported < 5; ++i) {
    const uint32_t g = raw_bits(c.dtype, got, i), w = raw_bits(c.dtype, want, i);
    if (g != w) {
      ADD_FAILURE() << "row " << i / size_t(c.stride()) << " column " << i % size_t(c.stride())
                    << " (V=" << c.vocab << ", W'=" << c.words << "): bits 0x" << std::hex << g
                    << ", expected 0x" << w << " (input 0x"
                    << raw_bits(c.dtype, encode(c.dtype, c.logits), i) << ")";
      ++reported;
    }
  }
}

TEST_P(Bitmask, AllRows) {
  uint64_t seed = 9000;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {1, 31, 32, 33, 1000, 4099})
      for (int64_t gap : {0, 7}) {
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " V=" + std::to_string(vocab));
        expect_masked(dev(), random_mask_case(rng, dtype, 5, vocab, (vocab + 31) / 32, gap, gap ? 3 : 0));
      }
}

TEST_P(Bitmask, ListedRowsWithOutOfRangeAndDuplicateIndices) {
  uint64_t seed = 9100;
  for (nt_dtype dtype : kFloatTypes)
    for (nt_dtype index_dtype : {NT_I32, NT_I64}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " " + dtype_label(index_dtype));
      MaskCase c = random_mask_case(rng, dtype, 9, 1111, 35, 5, 0);
      c.has_indices = true;
      c.index_dtype = index_dtype;
      c.indices = {7, -1, 2, 9, 2, 40, 0, index_dtype == NT_I64 ? int64_t(1) << 40 : INT32_MIN,
                   index_dtype == NT_I64 ? INT64_MIN : INT32_MAX};
      expect_masked(dev(), c);
      c.indices = {};  // an empty list masks nothing
      expect_masked(dev(), c);
      c.indices = {-5, 9, 100};  // nothing in range
      expect_masked(dev(), c);
    }
}

// W' < ceil(V/32): tokens at or past 32 W' are disallowed. W' > ceil(V/32): the
// extra words are ignored (they hold random bits here).
TEST_P(Bitmask, PaddedVocabularies) {
  uint64_t seed = 9200;
  for (nt_dtype dtype : kFloatTypes)
    for (int64_t vocab : {100, 1000, 4099})
      for (int64_t words : {int64_t(1), (vocab + 31) / 32 - 1, (vocab + 31) / 32 + 1, (vocab + 31) / 32 + 9}) {
        Rng rng(++seed);
        SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype) + " V=" + std::to_string(vocab) +
                     " W'=" + std::to_string(words));
        expect_masked(dev(), random_mask_case(rng, dtype, 4, vocab, words, 3, 2));
      }
}

// Rows of a large vocabulary (not a multiple of 32, strided, W' one word short):
// the CPU backend splits them into blocks of tokens, and f32 rows over its
// threads; all rows, then listed rows with duplicates in no particular order.
TEST_P(Bitmask, LongRows) {
  uint64_t seed = 9250;
  for (nt_dtype dtype : kFloatTypes) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype));
    const int64_t vocab = 131101, words = (vocab + 31) / 32 - 1;
    MaskCase c = random_mask_case(rng, dtype, 20, vocab, words, 5, 2);
    expect_masked(dev(), c);
    c.has_indices = true;
    c.indices = {17, 3, 19, 3, 0, 11, 17, 20, -2, 8, 5, 12, 0, 1, 14};
    expect_masked(dev(), c);
  }
}

// Many listed rows: shuffled, most of them repeated, some out of range.
TEST_P(Bitmask, ManyListedRowsWithDuplicates) {
  uint64_t seed = 9260;
  for (nt_dtype dtype : kFloatTypes) {
    Rng rng(++seed);
    SCOPED_TRACE(seed_trace(seed) + " " + dtype_label(dtype));
    MaskCase c = random_mask_case(rng, dtype, 300, 999, 32, 3, 1);
    c.has_indices = true;
    c.index_dtype = rng.coin() ? NT_I64 : NT_I32;
    for (int i = 0; i < 700; ++i) c.indices.push_back(rng.integer(-20, 319));
    expect_masked(dev(), c);
  }
}

// More rows than the CPU backend marks in one pass (65,536): listed rows on
// both sides of the boundary, duplicated, beside rows out of range.
TEST_P(Bitmask, ListedRowsPastOneMarkingPass) {
  Rng rng(9270);
  SCOPED_TRACE(seed_trace(9270));
  const int64_t rows = 65536 + 77;
  MaskCase c = random_mask_case(rng, NT_BF16, rows, 37, 2, 0, 0);
  c.has_indices = true;
  c.index_dtype = NT_I64;
  c.indices = {65536, 65535, 0, rows - 1, 65536, rows, -1, 65535, 70000, 1, rows - 1, 65537};
  for (int i = 0; i < 200; ++i) c.indices.push_back(rng.integer(0, rows + 10));
  expect_masked(dev(), c);
}

TEST_P(Bitmask, EmptyBatchIsANoOp) {
  Rng rng(9300);
  expect_masked(dev(), random_mask_case(rng, NT_F32, 0, 100, 4, 0, 0));
}

TEST_P(Bitmask, FromAllowedRoundTrip) {
  uint64_t seed = 9400;
  for (int64_t vocab : {1, 31, 32, 33, 1000, 4099})
    for (int64_t gap : {0, 5}) {
      Rng rng(++seed);
      SCOPED_TRACE(seed_trace(seed) + " V=" + std::to_string(vocab));
      const int64_t rows = 4, stride = vocab + gap;
      const double density = rng.uniform(0.01, 0.99);
      std::vector<uint8_t> allowed(size_t(rows * stride));
      for (auto& a : allowed) a = rng.coin(density) ? 1 : 0;
      const std::vector<int32_t> mask = run_bitmask_from_allowed(dev(), rows, vocab, stride, allowed);
      EXPECT_EQ(mask, reference_bitmask_from_allowed(rows, vocab, stride, allowed));  // padding bits 0
      // The mask applied to logits disallows exactly the tokens not allowed.
      MaskCase c = random_mask_case(rng, NT_F32, rows, vocab, (vocab + 31) / 32, 0, 0);
      c.mask = mask;
      const std::vector<uint8_t> got = run_apply_mask(dev(), c);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = 0; t < vocab; ++t) {
          const bool ok = allowed[size_t(r * stride + t)]
                              ? raw_bits(NT_F32, got, size_t(r * vocab + t)) == f32_bits(c.logits[size_t(r * vocab + t)])
                              : raw_bits(NT_F32, got, size_t(r * vocab + t)) == 0xff800000u;
          ASSERT_TRUE(ok) << "row " << r << " token " << t;
        }
    }
}

NTT_INSTANTIATE_ON_DEVICES(Bitmask);

}  // namespace
}  // namespace ntt
