// Portable sampler passes: the definition the AVX2 kernels must match bit for bit.
#include "cpu/sample_kernels.h"

#include <climits>
#include <cmath>

namespace nt::cpu::sampling {
namespace {

inline uint32_t x_key(Row row, int64_t i) { return nt_order_key(row.at(i)); }

inline bool member(uint32_t key, int64_t i, const DrawSet& set) {
  return key <= set.hi && (key >= set.b || (key >= set.a && i <= set.cut));
}

inline float draw_score(Row row, int64_t i, const DrawSet& set) {
  return set.pos_inf ? 0.0f : nt_scaled_score(row.at(i), set.temperature);
}

int64_t scan(Row row, int64_t begin, int64_t end, uint32_t lo, uint32_t hi, int32_t* out,
             ScanStats* stats) {
  ScanStats st{0u, -1};
  int64_t n = 0;
  for (int64_t i = begin; i < end; ++i) {
    const uint32_t key = x_key(row, i);
    if (key > st.max_key || st.max_index < 0) { st.max_key = key; st.max_index = int32_t(i); }
    if (key >= lo && key <= hi) out[n++] = int32_t(i);
  }
  *stats = st;
  return n;
}

// Eight lanes' sums combined as the AVX2 kernels combine their halves.
inline double fold8(const double (&lane)[8]) {
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

int64_t scan_mass(Row row, int64_t begin, int64_t end, uint32_t lo, uint32_t hi, float temperature,
                  float ref, int32_t* out, ScanStats* stats, double* mass) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = begin; i < end; ++i) {
    const float x = row.at(i);
    const float s = nt_scaled_score(x, temperature);
    if (s == -INFINITY || nt_order_key(x) >= lo) continue;
    lane[i & 7] += double(nt_portable_exp(s - ref));
  }
  *mass = fold8(lane);
  return scan(row, begin, end, lo, hi, out, stats);
}

double mass_histogram(Row row, int64_t begin, int64_t end, float temperature, float s_max,
                      int n_binned, double* mass, uint32_t* count) {
  double rest[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = begin; i < end; ++i) {
    const float s = nt_scaled_score(row.at(i), temperature);
    if (s == -INFINITY) continue;
    const int bin = mass_bin(s, s_max);
    const double p = double(nt_portable_exp(s - s_max));
    if (bin < n_binned) {
      mass[bin] += p;
      ++count[bin];
    } else {
      rest[i & 7] += p;
    }
  }
  return fold8(rest);
}

void exp_list(const float* s, int64_t n, float s_max, float* p) {
  for (int64_t i = 0; i < n; ++i) p[i] = nt_portable_exp(s[i] - s_max);
}

void gumbel_list(const int32_t* index, int64_t n, uint64_t seed, uint64_t offset, uint32_t tag,
                 float* gumbel) {
  for (int64_t i = 0; i < n; ++i)
    gumbel[i] = nt_token_gumbel(seed, offset, tag, uint32_t(index[i]));
}

void gumbel_scan(Row row, int64_t begin, int64_t end, const DrawSet& set, Best* best) {
  Best b = *best;
  for (int64_t i = begin; i < end; ++i) {
    if (!member(x_key(row, i), i, set)) continue;
    const float s = draw_score(row, i, set);
    if (s + NT_GUMBEL_MAX < b.value) continue;  // cannot reach the best even with the largest G
    const float v = s + nt_token_gumbel(set.seed, set.offset, set.tag, uint32_t(i));
    if (v > b.value || (v == b.value && i < b.index)) b = Best{v, int32_t(i)};
  }
  *best = b;
}

Cumulative cumulative(Row row, int64_t begin, int64_t end, const DrawSet& set, double prefix,
                      double target) {
  Cumulative c{0.0, -1, -1};
  for (int64_t i = begin; i < end; ++i) {
    if (!member(x_key(row, i), i, set)) continue;
    const float p = set.pos_inf ? 1.0f : nt_portable_exp(draw_score(row, i, set) - set.s_max);
    c.total += double(p);
    c.last = int32_t(i);
    if (c.hit < 0 && prefix + c.total > target) c.hit = int32_t(i);
  }
  return c;
}

constexpr Kernels kPortable{&scan, &scan_mass, &mass_histogram, &exp_list, &gumbel_list,
                            &gumbel_scan, &cumulative};

}  // namespace

const Kernels& portable_kernels() { return kPortable; }

const Kernels& kernels() {
  static const Kernels& chosen = use_avx2() && avx2_kernels() ? *avx2_kernels() : kPortable;
  return chosen;
}

}  // namespace nt::cpu::sampling
