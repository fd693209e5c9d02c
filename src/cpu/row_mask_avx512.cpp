// AVX-512 grammar-mask kernel: the complement of a mask word is the write mask
// of a masked store of -inf (two 16-lane stores for f32, one 32-lane store for
// f16/bf16), so allowed logits are neither read nor written and a word with
// every token allowed costs one compare. Needs AVX-512F and BW.
//
// Stores alone do not start the hardware prefetchers the way loads do: a row
// out of cache took 1.6x the time of a load-blend-store pass until the lines
// kPrefetchTokens ahead were prefetched. Always: prefetching only where the word
// ahead disallows something (to skip a blocky mask's allowed runs) measured
// slower, hot and cold, than the unbroken stream.
#include "cpu/row_mask.h"

#include <cstdint>

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>

#include "core/half.h"

namespace nt::cpu {
namespace {

// 4 KB of f32, 2 KB of f16/bf16 ahead (the best of 256 to 2048 tokens,
// measured out of cache on one core).
constexpr int64_t kPrefetchTokens = 1024;

template <class T>
inline void prefetch_word(const T* x, int64_t t) {
  // Integer arithmetic: the address may lie past the row (prefetches never fault).
  const uintptr_t p = reinterpret_cast<uintptr_t>(x) + uintptr_t(t) * sizeof(T);
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  if (sizeof(T) * 32 > 64) _mm_prefetch(reinterpret_cast<const char*>(p + 64), _MM_HINT_T0);
}

// Tokens [t, t + 32) with write mask `off` (bit j: token t + j becomes -inf).
inline void store_word_f32(float* p, uint32_t off, __m512 neg_inf) {
  _mm512_mask_storeu_ps(p, __mmask16(off), neg_inf);
  _mm512_mask_storeu_ps(p + 16, __mmask16(off >> 16), neg_inf);
}
inline void store_word_16(uint16_t* p, uint32_t off, __m512i neg_inf) {
  _mm512_mask_storeu_epi16(p, __mmask32(off), neg_inf);
}

template <class T, class V, void (*Store)(T*, uint32_t, V)>
void mask_row(T* x, V neg_inf, const uint32_t* mask, int64_t words, int64_t t0, int64_t t1) {
  // Tokens below masked_end have a mask word; the rest are all disallowed.
  const int64_t masked_end = t1 < 32 * words ? t1 : 32 * words;
  int64_t t = t0;
  for (; t + 32 <= masked_end; t += 32) {
    prefetch_word(x, t + kPrefetchTokens);
    const uint32_t allowed = mask[t / 32];
    if (allowed != 0xFFFFFFFFu) Store(x + t, ~allowed, neg_inf);
  }
  if (t < masked_end) {  // the row's last, partial word
    Store(x + t, ~mask[t / 32] & ((1u << (masked_end - t)) - 1u), neg_inf);
    return;  // masked_end == t1
  }
  for (; t + 32 <= t1; t += 32) {
    prefetch_word(x, t + kPrefetchTokens);
    Store(x + t, 0xFFFFFFFFu, neg_inf);
  }
  if (t < t1) Store(x + t, (1u << (t1 - t)) - 1u, neg_inf);
}

void mask_row_avx512_impl(void* row, nt_dtype dtype, const uint32_t* mask, int64_t words,
                          int64_t t0, int64_t t1) {
  if (dtype == NT_F32) {
    mask_row<float, __m512, &store_word_f32>(
        static_cast<float*>(row), _mm512_castsi512_ps(_mm512_set1_epi32(int(NT_F32_NEG_INF))), mask,
        words, t0, t1);
  } else {
    const uint16_t ninf = dtype == NT_F16 ? NT_F16_NEG_INF : NT_BF16_NEG_INF;
    mask_row<uint16_t, __m512i, &store_word_16>(static_cast<uint16_t*>(row),
                                                _mm512_set1_epi16(short(ninf)), mask, words, t0, t1);
  }
}

}  // namespace

MaskRowFn mask_row_avx512() { return &mask_row_avx512_impl; }

}  // namespace nt::cpu

#else

namespace nt::cpu {
MaskRowFn mask_row_avx512() { return nullptr; }
}  // namespace nt::cpu

#endif
