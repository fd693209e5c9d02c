// AVX2 grammar-mask kernel: 8 (f32) or 16 (f16/bf16) tokens per blend. Only
// blocks with a 0 bit are loaded and stored; a blend writes back the allowed
// lanes' own bits, so they stay bit-for-bit unchanged.
#include "cpu/row_mask.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include "core/half.h"

namespace nt::cpu {
namespace {

void mask_row_avx2_impl(void* row, nt_dtype dtype, const uint32_t* mask, int64_t words,
                        int64_t t0, int64_t t1) {
  const int64_t full_end = t0 + (t1 - t0) / 32 * 32;
  if (dtype == NT_F32) {
    float* x = static_cast<float*>(row);
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 neg_inf = _mm256_castsi256_ps(_mm256_set1_epi32(int(NT_F32_NEG_INF)));
    for (int64_t t = t0; t < full_end; t += 32) {
      const int64_t w = t / 32;
      const uint32_t allowed = w < words ? mask[w] : 0u;
      if (allowed == 0xFFFFFFFFu) continue;
      for (int k = 0; k < 4; ++k) {
        const uint32_t byte = (allowed >> (8 * k)) & 0xFFu;
        if (byte == 0xFFu) continue;
        float* p = x + t + 8 * k;
        if (byte == 0u) { _mm256_storeu_ps(p, neg_inf); continue; }
        const __m256i bits = _mm256_and_si256(_mm256_set1_epi32(int(byte)), lane_bit);
        const __m256 off = _mm256_castsi256_ps(_mm256_cmpeq_epi32(bits, _mm256_setzero_si256()));
        _mm256_storeu_ps(p, _mm256_blendv_ps(_mm256_loadu_ps(p), neg_inf, off));
      }
    }
  } else {
    uint16_t* x = static_cast<uint16_t*>(row);
    const __m256i lane_bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048,
                                               4096, 8192, 16384, -32768);
    const __m256i neg_inf = _mm256_set1_epi16(short(dtype == NT_F16 ? NT_F16_NEG_INF : NT_BF16_NEG_INF));
    for (int64_t t = t0; t < full_end; t += 32) {
      const int64_t w = t / 32;
      const uint32_t allowed = w < words ? mask[w] : 0u;
      if (allowed == 0xFFFFFFFFu) continue;
      for (int h = 0; h < 2; ++h) {
        const uint32_t half = (allowed >> (16 * h)) & 0xFFFFu;
        if (half == 0xFFFFu) continue;
        __m256i* p = reinterpret_cast<__m256i*>(x + t + 16 * h);
        if (half == 0u) { _mm256_storeu_si256(p, neg_inf); continue; }
        const __m256i bits = _mm256_and_si256(_mm256_set1_epi16(short(half)), lane_bit);
        const __m256i off = _mm256_cmpeq_epi16(bits, _mm256_setzero_si256());
        _mm256_storeu_si256(p, _mm256_blendv_epi8(_mm256_loadu_si256(p), neg_inf, off));
      }
    }
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
