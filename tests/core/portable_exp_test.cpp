// nt_portable_exp: error below 1 ulp of the true exp (double exp rounded only once
// in the comparison, subnormal results included), the edge cases sampling meets,
// and bit-for-bit agreement with the CPU backend's exp_list kernels, portable and
// AVX2 (the AVX2 one repeats the core definition lane for lane; the OpenCL backend
// compiles the core definition itself).
#include <gtest/gtest.h>

#include <cfloat>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/portable_exp.h"
#include "cpu/row_io.h"
#include "cpu/sample_kernels.h"

namespace {

// Error of got in units of the last place of the exact result y > 0 (fp32
// subnormals have the fixed ulp 2^-149).
double ulp_error(float got, double y) {
  int e;
  std::frexp(y, &e);  // y in [2^(e-1), 2^e): one fp32 ulp there is 2^(e-24)
  return std::fabs(double(got) - y) / std::ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
}

constexpr uint32_t kMinArgBits = 0xC2DC0000u;  // -110.0f

TEST(PortableExp, MinArgBits) { EXPECT_EQ(nt_as_u32(NT_EXP_MIN_ARG), kMinArgBits); }

// Every 17th float from -0 (bits 0x80000000) down to NT_EXP_MIN_ARG: about 66
// million inputs (an exhaustive sweep gives 0.94 ulp at most).
TEST(PortableExp, WithinOneUlpOnGrid) {
  double max_ulp = 0;
  uint32_t worst = 0;
  for (uint64_t b = 0x80000000u; b <= kMinArgBits; b += 17) {
    const float d = nt_as_f32(uint32_t(b));
    const double err = ulp_error(nt_portable_exp(d), std::exp(double(d)));
    if (!(err <= max_ulp)) {  // also catches NaN
      max_ulp = std::isnan(err) ? INFINITY : err;
      worst = uint32_t(b);
    }
  }
  EXPECT_LT(max_ulp, 1.0) << "worst input bits 0x" << std::hex << worst << " (d=" << nt_as_f32(worst)
                          << ")";
}

TEST(PortableExp, EdgeCases) {
  EXPECT_EQ(nt_as_u32(nt_portable_exp(0.0f)), nt_as_u32(1.0f));
  EXPECT_EQ(nt_as_u32(nt_portable_exp(-0.0f)), nt_as_u32(1.0f));
  EXPECT_EQ(nt_as_u32(nt_portable_exp(-1e-30f)), nt_as_u32(1.0f));
  EXPECT_EQ(nt_as_u32(nt_portable_exp(-nt_as_f32(1u))), nt_as_u32(1.0f));  // -2^-149
  EXPECT_EQ(nt_portable_exp(-3e-8f), std::nextafter(1.0f, 0.0f));
  EXPECT_EQ(nt_portable_exp(-1.0f), float(std::exp(-1.0)));
  EXPECT_EQ(nt_as_u32(nt_portable_exp(-INFINITY)), 0u);
  EXPECT_EQ(nt_as_u32(nt_portable_exp(NAN)), 0u);
  EXPECT_EQ(nt_as_u32(nt_portable_exp(-NAN)), 0u);
  EXPECT_EQ(nt_as_u32(nt_portable_exp(NT_EXP_MIN_ARG)), 0u);
  EXPECT_EQ(nt_as_u32(nt_portable_exp(std::nextafter(NT_EXP_MIN_ARG, -INFINITY))), 0u);
  EXPECT_EQ(nt_as_u32(nt_portable_exp(-1e30f)), 0u);
  EXPECT_EQ(nt_as_u32(nt_portable_exp(-FLT_MAX)), 0u);
  // The subnormal range rounds once: the smallest positive result and the
  // boundary with the normal range.
  EXPECT_EQ(nt_as_u32(nt_portable_exp(-103.9f)), 1u);
  EXPECT_LE(ulp_error(nt_portable_exp(-87.5f), std::exp(-87.5)), 1.0);
  for (float d = -110.0f; d <= 0.0f; d += 0.25f) {
    const float p = nt_portable_exp(d);
    EXPECT_TRUE(p >= 0.0f && p <= 1.0f) << "d=" << d << " p=" << p;
  }
}

// The inputs of the kernel checks: a grid over [-112, 0], the edges (within
// groups of eight and again at the end), random scores and random negative
// float bits (-inf and NaNs included).
std::vector<float> kernel_inputs() {
  std::vector<float> s;
  for (uint64_t b = 0x80000000u; b <= 0xC2E00000u; b += 257) s.push_back(nt_as_f32(uint32_t(b)));
  const float edges[] = {0.0f, -0.0f, -1e-30f, -nt_as_f32(1u), -nt_as_f32(0x00800000u), -3e-8f,
                         -0.5f, -1.0f, -87.0f, -87.5f, -88.0f, -103.9f, -103.97f, -104.0f,
                         NT_EXP_MIN_ARG, std::nextafter(NT_EXP_MIN_ARG, 0.0f),
                         std::nextafter(NT_EXP_MIN_ARG, -INFINITY), -1e30f, -FLT_MAX, -INFINITY,
                         NAN, -NAN};
  for (float e : edges) s.push_back(e);
  const uint64_t seed = 0xe4b;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-120.0f, 0.0f), narrow(-2.0f, 0.0f);
  for (int i = 0; i < 1000000; ++i) s.push_back(i % 2 ? wide(rng) : narrow(rng));
  for (int i = 0; i < 1000000; ++i) {  // any negative float bits, NaNs and -inf included
    s.push_back(nt_as_f32(0x80000000u | uint32_t(rng())));
  }
  for (float e : edges) s.push_back(e);  // and in the tail
  return s;
}

// exp_list(s, n, s_max) must equal nt_portable_exp(s[i] - s_max) bit for bit.
void expect_kernel_matches_core(const nt::cpu::sampling::Kernels& k) {
  const std::vector<float> s = kernel_inputs();
  // s <= 0 <= s_max keeps d = s - s_max in the kernels' domain d <= 0; the
  // lengths differ by 3, so the AVX2 kernel's masked last group is exercised.
  const struct { float s_max; int64_t drop; } runs[] = {{0.0f, 0}, {1.0f, 3}, {17.25f, 6}};
  for (const auto& run : runs) {
    const int64_t n = int64_t(s.size()) - run.drop;
    std::vector<float> p(s.size(), 42.0f);
    k.exp_list(s.data(), n, run.s_max, p.data());
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = nt_portable_exp(s[i] - run.s_max);
      if (nt_as_u32(p[i]) != nt_as_u32(want) && mismatches++ < 5) {
        ADD_FAILURE() << "s=" << s[i] << " (bits 0x" << std::hex << nt_as_u32(s[i]) << std::dec
                      << ") s_max=" << run.s_max << ": kernel " << p[i] << " (0x" << std::hex
                      << nt_as_u32(p[i]) << "), core " << want << " (0x" << nt_as_u32(want) << ")";
      }
    }
    EXPECT_EQ(mismatches, 0) << "s_max=" << run.s_max << " n=" << n;
    for (size_t i = size_t(n); i < p.size(); ++i) ASSERT_EQ(p[i], 42.0f) << "wrote past n";
  }
}

TEST(PortableExp, PortableKernelMatchesCore) {
  expect_kernel_matches_core(nt::cpu::sampling::portable_kernels());
}

TEST(PortableExp, Avx2KernelMatchesCore) {
  const nt::cpu::sampling::Kernels* k = nt::cpu::sampling::avx2_kernels();
  if (k == nullptr) GTEST_SKIP() << "AVX2 kernels not compiled in";
  if (!nt::cpu::use_avx2()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  expect_kernel_matches_core(*k);
}

}  // namespace

namespace {

// scan_mass: the portable and AVX2 kernels agree bit for bit (found tokens,
// largest key, mass), and the mass is the defined sum: exp(s - ref) over the
// scores above -inf of the tokens not listed (key below lo), token i in lane
// i % 8, the lanes combined ((0+4)+(2+6))+((1+5)+(3+7)). Rows hold -inf, NaN,
// +inf and scores far above ref (all listed); lengths leave a partial last
// group.
TEST(PortableExp, ScanMassKernelsAgree) {
  namespace s = nt::cpu::sampling;
  const s::Kernels* avx2 = s::avx2_kernels();
  const bool have_avx2 = avx2 != nullptr && nt::cpu::use_avx2();
  std::mt19937_64 rng(0x5ca7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t n : {1, 7, 8, 61, 8192, 8195})
    for (float temperature : {1.0f, 0.7f})
      for (bool specials : {false, true}) {
        std::vector<float> x(static_cast<size_t>(n));
        for (float& v : x) v = normal(rng);
        if (specials)
          for (int64_t i = 0; i < n; i += 5) {
            const float pick[] = {-INFINITY, NAN, INFINITY, 300.0f, -300.0f};
            x[size_t(i)] = pick[rng() % 5];
          }
        const float ref = 2.5f;
        const s::Row row{x.data(), NT_F32};
        double lane[8] = {};
        const uint32_t lo = nt_order_key(1.0f), hi = nt_order_key(5.0f);
        for (int64_t i = 0; i < n; ++i) {
          const float sc = nt_scaled_score(x[size_t(i)], temperature);
          if (sc == -INFINITY || nt_order_key(x[size_t(i)]) >= lo) continue;
          lane[i & 7] += double(nt_portable_exp(sc - ref));
        }
        const double want =
            ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
        std::vector<int32_t> out_p(static_cast<size_t>(n)), out_a(static_cast<size_t>(n));
        s::ScanStats st_p{}, st_a{};
        double mass_p = -1.0, mass_a = -1.0;
        const int64_t found_p = s::portable_kernels().scan_mass(row, 0, n, lo, hi, temperature, ref,
                                                                out_p.data(), &st_p, &mass_p);
        SCOPED_TRACE("n=" + std::to_string(n) + " T=" + std::to_string(temperature) +
                     (specials ? " with specials" : ""));
        EXPECT_EQ(mass_p, want);
        // The listed tokens (keys in [lo, hi], in index order) and the first largest key.
        std::vector<int32_t> listed;
        int64_t top = 0;
        for (int64_t i = 0; i < n; ++i) {
          const uint32_t key = nt_order_key(x[size_t(i)]);
          if (key >= lo && key <= hi) listed.push_back(int32_t(i));
          if (key > nt_order_key(x[size_t(top)])) top = i;
        }
        ASSERT_EQ(found_p, int64_t(listed.size()));
        EXPECT_TRUE(std::equal(listed.begin(), listed.end(), out_p.begin()));
        EXPECT_EQ(st_p.max_index, top);
        EXPECT_EQ(st_p.max_key, nt_order_key(x[size_t(top)]));
        EXPECT_TRUE(std::isfinite(mass_p));
        if (!have_avx2) continue;
        const int64_t found_a =
            avx2->scan_mass(row, 0, n, lo, hi, temperature, ref, out_a.data(), &st_a, &mass_a);
        EXPECT_EQ(std::memcmp(&mass_a, &mass_p, sizeof(double)), 0) << mass_a << " vs " << mass_p;
        ASSERT_EQ(found_a, found_p);
        for (int64_t i = 0; i < found_p; ++i) EXPECT_EQ(out_a[size_t(i)], out_p[size_t(i)]);
        EXPECT_EQ(st_a.max_key, st_p.max_key);
        EXPECT_EQ(st_a.max_index, st_p.max_index);
      }
}

}  // namespace
