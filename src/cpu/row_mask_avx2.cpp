// AVX2 grammar-mask kernel: 8 (f32) or 16 (f16/bf16) tokens per blend. Only
// vectors with a disallowed token are touched: all disallowed are stored
// without a load, the others loaded and blended, so that allowed lanes are
// written back with their own bits. (AVX2's vpmaskmov stores would avoid the
// load but are microcoded and slow on AMD cores; the AVX-512 kernel has real
// masked stores.)
#include "cpu/row_mask.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include "core/half.h"

namespace nt::cpu {
namespace {

// Tokens [t, t + 32) with write mask `off` (bit j: token t + j becomes -inf).
inline void store_word_f32(float* x, uint32_t off) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 neg_inf = _mm256_castsi256_ps(_mm256_set1_epi32(int(NT_F32_NEG_INF)));
  for (int k = 0; k < 4; ++k) {
    const uint32_t byte = (off >> (8 * k)) & 0xFFu;
    if (byte == 0u) continue;
    float* p = x + 8 * k;
    if (byte == 0xFFu) { _mm256_storeu_ps(p, neg_inf); continue; }
    const __m256i bits = _mm256_and_si256(_mm256_set1_epi32(int(byte)), lane_bit);
    const __m256 sel = _mm256_castsi256_ps(_mm256_cmpeq_epi32(bits, lane_bit));
    _mm256_storeu_ps(p, _mm256_blendv_ps(_mm256_loadu_ps(p), neg_inf, sel));
  }
}

inline void store_word_16(uint16_t* x, uint32_t off, __m256i neg_inf) {
  const __m256i lane_bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048,
                                             4096, 8192, 16384, -32768);
  for (int h = 0; h < 2; ++h) {
    const uint32_t half = (off >> (16 * h)) & 0xFFFFu;
    if (half == 0u) continue;
    __m256i* p = reinterpret_cast<__m256i*>(x + 16 * h);
    if (half == 0xFFFFu) { _mm256_storeu_si256(p, neg_inf); continue; }
    const __m256i bits = _mm256_and_si256(_mm256_set1_epi16(short(half)), lane_bit);
    const __m256i sel = _mm256_cmpeq_epi16(bits, lane_bit);
    _mm256_storeu_si256(p, _mm256_blendv_epi8(_mm256_loadu_si256(p), neg_inf, sel));
  }
}

void mask_row_avx2_impl(void* row, nt_dtype dtype, const uint32_t* mask, int64_t words,
                        int64_t t0, int64_t t1) {
  // Whole words; the row's last partial word goes to the portable kernel.
  const int64_t full_end = t0 + (t1 - t0) / 32 * 32;
  const int64_t masked_end = full_end < 32 * words ? full_end : 32 * words;
  // store(t, off): word t / 32's tokens with bits set in `off` become -inf.
  auto words_of = [&](auto&& store) {
    int64_t t = t0;
    for (; t < masked_end; t += 32)
      if (mask[t / 32] != 0xFFFFFFFFu) store(t, ~mask[t / 32]);
    for (; t < full_end; t += 32) store(t, 0xFFFFFFFFu);
  };
  if (dtype == NT_F32) {
    words_of([&](int64_t t, uint32_t off) { store_word_f32(static_cast<float*>(row) + t, off); });
  } else {
    const __m256i neg_inf = _mm256_set1_epi16(short(dtype == NT_F16 ? NT_F16_NEG_INF : NT_BF16_NEG_INF));
    words_of([&](int64_t t, uint32_t off) { store_word_16(static_cast<uint16_t*>(row) + t, off, neg_inf); });
  }
  if (full_end < t1) mask_row_portable(row, dtype, mask, words, full_end, t1);
}

}  // namespace

MaskRowFn mask_row_avx2() { return &mask_row_avx2_impl; }

}  // namespace nt::cpu

#else

namespace nt::cpu {
MaskRowFn mask_row_avx2() { return nullptr; }
}  // namespace nt::cpu

#endif
