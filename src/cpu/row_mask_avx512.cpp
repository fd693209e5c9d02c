// AVX-512 grammar-mask kernel: the complement of a mask word is the write mask
// of a masked store of -inf (two 16-lane stores for f32, one 32-lane store for
// f16/bf16), so allowed logits are neither read nor written and a word with
// every token allowed is never stored to. Needs AVX-512F and BW.
//
// Stores alone do not start the hardware prefetchers the way loads do, so the
// lines kPrefetchTokens ahead are prefetched: only those that will be written
// (their tokens not all allowed), since prefetching every line would read whole
// rows that an all-allowed mask leaves untouched, and the allowed runs of
// blocky masks. The choice is branch-free (a line that needs no prefetch gets
// the mask word just read instead), since a branch on the word ahead is
// unpredictable on masks with ~1% disallowed. The store keeps its branch: it
// skips the all-allowed words, most of the work on permissive masks.
#include "cpu/row_mask.h"

#include <cstdint>

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>

#include "core/half.h"

namespace nt::cpu {
namespace {

// 4 KB of f32, 2 KB of f16/bf16 ahead (chosen out of cache on one core).
constexpr int64_t kPrefetchTokens = 1024;

// Prefetches the lines of tokens [t, t + 32) that write mask `off` writes;
// `cached` (an address in cache) takes the place of the others.
template <class T>
inline void prefetch_word(const T* x, int64_t t, uint32_t off, const void* cached) {
  // Integer arithmetic: the address may lie past the row (prefetches never fault).
  const uintptr_t p = reinterpret_cast<uintptr_t>(x) + uintptr_t(t) * sizeof(T);
  const uintptr_t none = reinterpret_cast<uintptr_t>(cached);
  if (sizeof(T) == 2) {
    _mm_prefetch(reinterpret_cast<const char*>(off != 0u ? p : none), _MM_HINT_T0);
  } else {
    _mm_prefetch(reinterpret_cast<const char*>((off & 0xFFFFu) != 0u ? p : none), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>((off >> 16) != 0u ? p + 64 : none), _MM_HINT_T0);
  }
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
  // While the word kPrefetchTokens ahead has a mask word.
  for (; t + kPrefetchTokens + 32 <= masked_end; t += 32) {
    const uint32_t allowed = mask[t / 32];
    prefetch_word(x, t + kPrefetchTokens, ~mask[(t + kPrefetchTokens) / 32], mask + t / 32);
    if (allowed != 0xFFFFFFFFu) Store(x + t, ~allowed, neg_inf);
  }
  // Then the words ahead lie past the mask (all written) or are the row's last,
  // partial word (prefetched whole too).
  for (; t + 32 <= masked_end; t += 32) {
    const uint32_t allowed = mask[t / 32];
    if (t + kPrefetchTokens < t1) prefetch_word(x, t + kPrefetchTokens, 0xFFFFFFFFu, mask);
    if (allowed != 0xFFFFFFFFu) Store(x + t, ~allowed, neg_inf);
  }
  if (t < masked_end) {  // the row's last, partial word
    Store(x + t, ~mask[t / 32] & ((1u << (masked_end - t)) - 1u), neg_inf);
    return;  // masked_end == t1
  }
  for (; t + 32 <= t1; t += 32) {
    if (t + kPrefetchTokens < t1) prefetch_word(x, t + kPrefetchTokens, 0xFFFFFFFFu, mask);
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
