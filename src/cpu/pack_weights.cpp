// pack_weights: int8 signs [V, H] -> int32 [V, H/32], bit j of word w set iff
// signs[v, 32w + j] > 0 (lowest bit = lowest column, as the binary head reads it).
#include <cstdint>
#include <cstring>

#include "cpu/ops.h"
#include "cpu/thread_pool.h"

namespace nt::cpu {
namespace {

// Bit i of the result is (byte i of s[0, 8) > 0), eight bytes per step in one
// 64-bit word rather than one byte at a time.
uint32_t positive_bits8(const int8_t* s) {
  uint64_t x;
  std::memcpy(&x, s, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap64(x);  // byte i of memory at bits [8i, 8i+8)
#endif
  const uint64_t high = 0x8080808080808080ull;
  // Bit 7 of a byte: its low 7 bits are nonzero (they carry into bit 7; no
  // carry leaves the byte) or its own bit 7 is set, i.e. the byte is nonzero.
  const uint64_t nonzero = (((x & ~high) + ~high) | x) & high;
  const uint64_t positive = (nonzero & ~x) >> 7;  // bit 8i: byte i > 0
  // Multiplying moves bit 8i to bit 56 + i; no two partial products collide.
  return uint32_t((positive * 0x0102040810204080ull) >> 56);
}

}  // namespace

void CpuBackend::pack_weights(const nt_pack_weights_args& a, void*) {
  const int64_t words = a.signs.shape[1] / 32;
  parallel_for(a.signs.shape[0], 256, [&](int64_t begin, int64_t end, int) {
    for (int64_t v = begin; v < end; ++v) {
      const int8_t* s = static_cast<const int8_t*>(a.signs.data) + v * a.signs.row_stride;
      int32_t* out = static_cast<int32_t*>(a.wq.data) + v * a.wq.row_stride;
      for (int64_t w = 0; w < words; ++w) {
        const int8_t* sw = s + 32 * w;
        out[w] = int32_t(positive_bits8(sw) | positive_bits8(sw + 8) << 8 |
                         positive_bits8(sw + 16) << 16 | positive_bits8(sw + 24) << 24);
      }
    }
  });
}

}  // namespace nt::cpu
