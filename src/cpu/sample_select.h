// Selection of a prefix of the sampling order (key descending, index
// ascending) by weight, without sorting: radix refinement over 8-bit digits
// of the 32-bit keys, keeping only the items of the digit where the running
// weight crosses the target.
#pragma once

#include <cstdint>

namespace nt::cpu::sampling {

// The last item of a prefix: every item with key > key, or key == key and
// index <= index, belongs to it.
struct PrefixEnd {
  uint32_t key;
  int32_t index;
};

// Items i < n (n >= 1) in index order (index[] ascending), weight[i] >= 0
// (nullptr: 1 each), ranked after items of total weight `before`. Returns the
// end of the shortest prefix (at least one item) whose weight, `before` plus
// fp64 sums, reaches target; the end of the whole order when the total stays
// short. scratch_key / scratch_index / scratch_weight hold n items each.
PrefixEnd select_prefix(const uint32_t* key, const int32_t* index, const float* weight, int64_t n,
                        double before, double target, uint32_t* scratch_key,
                        int32_t* scratch_index, float* scratch_weight);

// True when (key, index) belongs to the prefix ending at end.
inline bool in_prefix(uint32_t key, int32_t index, PrefixEnd end) {
  return key > end.key || (key == end.key && index <= end.index);
}

// The shorter of two prefixes of the same order.
inline PrefixEnd shorter(PrefixEnd a, PrefixEnd b) {
  return (a.key > b.key || (a.key == b.key && a.index < b.index)) ? a : b;
}

}  // namespace nt::cpu::sampling
