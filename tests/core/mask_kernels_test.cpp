// The CPU backend's grammar-mask row kernels (cpu/row_mask.h), each against a
// scalar reference, bit for bit: portable, AVX2 and AVX-512 (the op runs only
// the best one the CPU has, so the others are exercised here). Every call masks
// tokens [t0, t1) of a row inside a buffer of random bits with guard elements
// on both sides, and the whole buffer is compared: disallowed tokens -inf,
// everything else (allowed tokens, guards) exactly as before.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/row_io.h"
#include "cpu/row_mask.h"

namespace {

using nt::cpu::MaskRowFn;

constexpr int64_t kGuard = 80;  // elements before and after the row

uint32_t neg_inf_bits(nt_dtype dtype) {
  return dtype == NT_F32 ? 0xFF800000u : dtype == NT_F16 ? 0xFC00u : 0xFF80u;
}

// Random element bits, never 0 and never -inf, so that a write of either shows.
uint32_t random_element(std::mt19937_64& rng, nt_dtype dtype) {
  for (;;) {
    const uint32_t v = dtype == NT_F32 ? uint32_t(rng()) : uint32_t(rng() & 0xFFFFu);
    if (v != 0 && v != neg_inf_bits(dtype)) return v;
  }
}

// Mask words of one of several kinds: random bits at a random density, all
// allowed, none allowed, runs, a single bit.
std::vector<uint32_t> random_mask(std::mt19937_64& rng, int64_t n) {
  std::vector<uint32_t> m(static_cast<size_t>(n));
  const double density = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  for (auto& w : m) {
    switch (rng() % 8) {
      case 0: w = 0u; break;
      case 1: w = 0xFFFFFFFFu; break;
      case 2: w = uint32_t(1) << (rng() % 32); break;
      case 3: w = ~(uint32_t(1) << (rng() % 32)); break;
      default: {
        w = 0;
        for (int j = 0; j < 32; ++j)
          if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < density) w |= 1u << j;
      }
    }
  }
  return m;
}

struct Buffer {
  nt_dtype dtype;
  std::vector<uint8_t> bytes;
  size_t width() const { return dtype == NT_F32 ? 4 : 2; }
  uint32_t get(int64_t i) const {
    uint32_t v = 0;
    std::memcpy(&v, &bytes[size_t(i) * width()], width());
    return v;
  }
  void set(int64_t i, uint32_t v) { std::memcpy(&bytes[size_t(i) * width()], &v, width()); }
};

// One call of `kernel` on a random row, compared with the reference. `misalign`
// shifts the row by a few elements off any vector alignment.
void check_call(MaskRowFn kernel, std::mt19937_64& rng, nt_dtype dtype, int64_t vocab, int64_t words,
                int64_t t0, int64_t t1, int64_t misalign) {
  SCOPED_TRACE(std::string(nt::dtype_name(dtype)) + " V=" + std::to_string(vocab) +
               " W'=" + std::to_string(words) + " [" + std::to_string(t0) + ", " +
               std::to_string(t1) + ") misalign=" + std::to_string(misalign));
  const int64_t n = kGuard + misalign + vocab + kGuard;
  Buffer got{dtype, std::vector<uint8_t>(size_t(n) * (dtype == NT_F32 ? 4 : 2))};
  for (int64_t i = 0; i < n; ++i) got.set(i, random_element(rng, dtype));
  // Extra mask words past W' hold random bits the kernel must not read as allowed.
  const std::vector<uint32_t> mask = random_mask(rng, words + 3);
  Buffer want = got;
  const int64_t row = kGuard + misalign;
  for (int64_t t = t0; t < t1; ++t) {
    const bool allowed = t < 32 * words && ((mask[size_t(t / 32)] >> (t % 32)) & 1u);
    if (!allowed) want.set(row + t, neg_inf_bits(dtype));
  }
  kernel(&got.bytes[size_t(row) * got.width()], dtype, mask.data(), words, t0, t1);
  int reported = 0;
  for (int64_t i = 0; i < n && reported < 5; ++i) {
    if (got.get(i) != want.get(i)) {
      ADD_FAILURE() << "element " << i - row << " of the row: bits 0x" << std::hex << got.get(i)
                    << ", expected 0x" << want.get(i);
      ++reported;
    }
  }
}

void check_kernel(MaskRowFn kernel, uint64_t seed) {
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (nt_dtype dtype : {NT_F32, NT_F16, NT_BF16}) {
    // Whole rows: V not a multiple of 32, W' short of, equal to and past ceil(V/32).
    for (int64_t vocab : {1, 5, 31, 32, 33, 63, 64, 65, 100, 1000, 1025, 4099, 16411, 40001}) {
      const int64_t need = (vocab + 31) / 32;
      for (int64_t words : {int64_t(1), need > 1 ? need - 1 : 1, need / 2 + 1, need, need + 2}) {
        check_call(kernel, rng, dtype, vocab, words, 0, vocab, int64_t(rng() % 17));
      }
    }
    // Blocks of a row as the op hands them out: t0 a multiple of 32, t1 anywhere past it.
    for (int i = 0; i < 200; ++i) {
      const int64_t vocab = 1 + int64_t(rng() % 9000);
      const int64_t need = (vocab + 31) / 32;
      const int64_t words = 1 + int64_t(rng() % uint64_t(need + 2));
      const int64_t t0 = 32 * int64_t(rng() % uint64_t(need));
      const int64_t t1 = t0 + 1 + int64_t(rng() % uint64_t(vocab - t0));
      check_call(kernel, rng, dtype, vocab, words, t0, t1, int64_t(rng() % 17));
    }
  }
}

TEST(MaskKernels, PortableMatchesReference) { check_kernel(&nt::cpu::mask_row_portable, 31000); }

TEST(MaskKernels, Avx2MatchesReference) {
  if (nt::cpu::mask_row_avx2() == nullptr) GTEST_SKIP() << "AVX2 kernels not compiled in";
  if (!nt::cpu::use_avx2()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  check_kernel(nt::cpu::mask_row_avx2(), 31100);
}

TEST(MaskKernels, Avx512MatchesReference) {
  if (nt::cpu::mask_row_avx512() == nullptr) GTEST_SKIP() << "AVX-512 kernels not compiled in";
  if (!nt::cpu::use_avx512()) GTEST_SKIP() << "this CPU lacks AVX-512F, BW or VL";
  check_kernel(nt::cpu::mask_row_avx512(), 31200);
}

// The op runs the best kernel this CPU has.
TEST(MaskKernels, ChoiceFollowsTheCpu) {
  const MaskRowFn want = nt::cpu::use_avx512() && nt::cpu::mask_row_avx512()
                             ? nt::cpu::mask_row_avx512()
                         : nt::cpu::use_avx2() && nt::cpu::mask_row_avx2() ? nt::cpu::mask_row_avx2()
                                                                           : &nt::cpu::mask_row_portable;
  EXPECT_EQ(nt::cpu::mask_row_kernel(), want);
}

}  // namespace
