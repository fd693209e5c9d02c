#include "cpu/sample_select.h"

#include <cstring>

namespace nt::cpu::sampling {
namespace {

// kWeighted = false: every item weighs 1 (top-k), and only counts are kept.
template <bool kWeighted>
PrefixEnd select(const uint32_t* key, const int32_t* index, const float* weight, int64_t n,
                 double before, double target, uint32_t* scratch_key, int32_t* scratch_index,
                 float* scratch_weight) {
  double done = before;  // weight of the items ranked before the current digit's items
  const uint32_t* k = key;
  const int32_t* ix = index;
  const float* w = weight;
  for (int shift = 24; shift >= 0; shift -= 8) {
    double mass[kWeighted ? 256 : 1];
    uint32_t count[256];
    if (kWeighted) std::memset(mass, 0, sizeof mass);
    std::memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t d = (k[i] >> shift) & 0xFFu;
      if (kWeighted) mass[d] += double(w[i]);
      ++count[d];
    }
    // Digits from the top: the first whose weight takes the running sum to the
    // target, or the lowest one when none does.
    int chosen = -1;
    double before_chosen = done;
    for (int d = 255; d >= 0; --d) {
      if (count[d] == 0) continue;
      const double m = kWeighted ? mass[d] : double(count[d]);
      chosen = d;
      before_chosen = done;
      if (done + m >= target) break;
      done += m;
    }
    done = before_chosen;
    int64_t m = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (int((k[i] >> shift) & 0xFFu) != chosen) continue;
      scratch_key[m] = k[i];
      scratch_index[m] = ix[i];
      if (kWeighted) scratch_weight[m] = w[i];
      ++m;
    }
    n = m;
    k = scratch_key;
    ix = scratch_index;
    w = scratch_weight;
  }
  // Every remaining item has the same key; ties go in index order.
  for (int64_t i = 0; i < n; ++i) {
    done += kWeighted ? double(w[i]) : 1.0;
    if (done >= target) return PrefixEnd{k[i], ix[i]};
  }
  return PrefixEnd{k[n - 1], ix[n - 1]};
}

}  // namespace

PrefixEnd select_prefix(const uint32_t* key, const int32_t* index, const float* weight, int64_t n,
                        double before, double target, uint32_t* scratch_key,
                        int32_t* scratch_index, float* scratch_weight) {
  if (weight == nullptr)
    return select<false>(key, index, nullptr, n, before, target, scratch_key, scratch_index,
                         nullptr);
  return select<true>(key, index, weight, n, before, target, scratch_key, scratch_index,
                      scratch_weight);
}

}  // namespace nt::cpu::sampling
