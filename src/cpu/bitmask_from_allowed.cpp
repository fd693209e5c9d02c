// bool [B, V] -> int32 [B, ceil(V/32)]: eight flags are gathered into a byte
// with one multiply (each flag byte reduced to its bit 0 first, so any
// non-zero byte counts as true), four bytes make a word.
#include <algorithm>
#include <cstring>

#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/thread_pool.h"

namespace nt::cpu {
namespace {

// Bit 0 of each byte of the result = (byte != 0); other bits 0.
inline uint64_t nonzero_bytes(uint64_t v) {
  v |= (v >> 4) & 0x0F0F0F0F0F0F0F0Full;
  v |= (v >> 2) & 0x0303030303030303ull;
  v |= (v >> 1) & 0x0101010101010101ull;
  return v & 0x0101010101010101ull;
}

// Eight flags (byte j = token j) -> bits 0..7. The multiply moves byte j's bit 0
// to bit 56 + j; no two partial products collide below bit 64.
inline uint32_t pack8(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return uint32_t((nonzero_bytes(v) * 0x0102040810204080ull) >> 56);
}

void pack_row(const unsigned char* allowed, int64_t vocab, uint32_t* out, int64_t w0, int64_t w1) {
  for (int64_t w = w0; w < w1; ++w) {
    const int64_t t = w * 32;
    uint32_t word = 0;
    if (t + 32 <= vocab) {
      for (int b = 0; b < 4; ++b) word |= pack8(allowed + t + 8 * b) << (8 * b);
    } else {
      for (int64_t j = 0; t + j < vocab; ++j) word |= uint32_t(allowed[t + j] != 0) << j;
    }
    out[w] = word;
  }
}

}  // namespace

void CpuBackend::bitmask_from_allowed(const nt_bitmask_from_allowed_args& a, void*) {
  const int64_t rows = a.allowed.shape[0], vocab = a.allowed.shape[1];
  const int64_t words = (vocab + 31) / 32;
  if (rows == 0 || words == 0) return;
  constexpr int64_t kBlockWords = 4096;  // 128K flags per task item
  const int64_t blocks = (words + kBlockWords - 1) / kBlockWords;
  parallel_for(rows * blocks, std::max<int64_t>(1, 2048 / std::min(words, kBlockWords)),
               [&](int64_t begin, int64_t end, int) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / blocks;
      const int64_t w0 = (item % blocks) * kBlockWords, w1 = std::min(words, w0 + kBlockWords);
      pack_row(reinterpret_cast<const unsigned char*>(row_address(a.allowed, r)), vocab,
               reinterpret_cast<uint32_t*>(row_address(a.bitmask, r)), w0, w1);
    }
  });
}

}  // namespace nt::cpu
