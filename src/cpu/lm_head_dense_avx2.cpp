// AVX2 + FMA + F16C inner loops of the dense LM head (built with those flags,
// chosen at run time). They compute exactly what the portable loops in
// lm_head_topk_dense.cpp compute: the same fma per lane in the same order
// (16-bit to f32 widening is exact either way).
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>

#include "core/half.h"
#include "nexttok/nexttok.h"

namespace nt::cpu::dense_avx2 {
namespace {

struct F32 {
  static __m256 load(const void* p, int64_t h) {
    return _mm256_loadu_ps(static_cast<const float*>(p) + h);
  }
  // Rows end at n: reading further could leave the tensor.
  static __m256 load_tail(const void* p, int64_t h, int64_t live) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(live)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(static_cast<const float*>(p) + h, mask);
  }
};

template <bool kBf16>
struct Half {
  static __m256 widen(__m128i v) {
    if (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    return _mm256_cvtph_ps(v);
  }
  static __m256 load(const void* p, int64_t h) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + h)));
  }
  static __m256 load_tail(const void* p, int64_t h, int64_t live) {
    alignas(16) uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < live; ++i) buf[i] = static_cast<const uint16_t*>(p)[h + i];
    return widen(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
  }
};

// R weight rows against C hidden rows. The C hidden vectors and R*C
// accumulators live in registers (R=4, C=3: 12 + 3 + 1 of the 16), so each
// step issues 7 loads for 12 fmas.
template <class W, int R, int C>
void block(const void* const* w, const float* x, int64_t x_stride, int64_t n, float* acc,
           int64_t acc_row_stride) {
  __m256 a[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) a[r][c] = _mm256_loadu_ps(acc + r * acc_row_stride + c * 8);
  const int64_t full = n & ~int64_t(7);
  for (int64_t h = 0; h < full; h += 8) {
    __m256 xv[C];
    for (int c = 0; c < C; ++c) xv[c] = _mm256_loadu_ps(x + c * x_stride + h);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = W::load(w[r], h);
      for (int c = 0; c < C; ++c) a[r][c] = _mm256_fmadd_ps(xv[c], wv, a[r][c]);
    }
  }
  if (full < n) {
    // The hidden copy is zero-padded, so the dead lanes add fma(0, 0, acc).
    __m256 xv[C];
    for (int c = 0; c < C; ++c) xv[c] = _mm256_loadu_ps(x + c * x_stride + full);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = W::load_tail(w[r], full, n - full);
      for (int c = 0; c < C; ++c) a[r][c] = _mm256_fmadd_ps(xv[c], wv, a[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc + r * acc_row_stride + c * 8, a[r][c]);
}

template <class W, int R>
void rows_against_hidden(const void* const* w, const float* x, int64_t x_stride, int64_t m_count,
                         int64_t n, float* acc) {
  const int64_t acc_row_stride = m_count * 8;
  // Blocks of 3 rows; a remainder of 1 becomes 2 + 2 when it can (a lone row
  // has too few independent fma chains to keep the units busy).
  const int64_t pairs = m_count % 3 == 2 ? 1 : (m_count % 3 == 1 && m_count >= 4 ? 2 : 0);
  const int64_t triples = (m_count - 2 * pairs) / 3;
  int64_t m = 0;
  for (int64_t i = 0; i < triples; ++i, m += 3)
    block<W, R, 3>(w, x + m * x_stride, x_stride, n, acc + m * 8, acc_row_stride);
  for (int64_t i = 0; i < pairs; ++i, m += 2)
    block<W, R, 2>(w, x + m * x_stride, x_stride, n, acc + m * 8, acc_row_stride);
  if (m < m_count) block<W, R, 1>(w, x + m * x_stride, x_stride, n, acc + m * 8, acc_row_stride);
}

template <class W>
void accumulate_as(const void* const* w, int rows, const float* x, int64_t x_stride,
                   int64_t m_count, int64_t n, float* acc) {
  if (rows == 4) {
    rows_against_hidden<W, 4>(w, x, x_stride, m_count, n, acc);
    return;
  }
  for (int r = 0; r < rows; ++r)
    rows_against_hidden<W, 1>(w + r, x, x_stride, m_count, n, acc + r * m_count * 8);
}

}  // namespace

// acc[r][m][8] += lane-wise fma of weight row r (w[r][0, n), of dtype) with
// hidden row m (x + m * x_stride, f32, zero-padded to a multiple of 8).
void accumulate(const void* const* w, nt_dtype dtype, int rows, const float* x, int64_t x_stride,
                int64_t m_count, int64_t n, float* acc) {
  switch (dtype) {
    case NT_BF16: accumulate_as<Half<true>>(w, rows, x, x_stride, m_count, n, acc); break;
    case NT_F16: accumulate_as<Half<false>>(w, rows, x, x_stride, m_count, n, acc); break;
    default: accumulate_as<F32>(w, rows, x, x_stride, m_count, n, acc); break;
  }
}

// dst[0, round8(n)) = widened src[0, n), zero-padded.
void widen(const uint16_t* src, nt_dtype dtype, int64_t n, float* dst) {
  const int64_t full = n & ~int64_t(7);
  for (int64_t i = 0; i < full; i += 8)
    _mm256_storeu_ps(dst + i, dtype == NT_BF16 ? Half<true>::load(src, i) : Half<false>::load(src, i));
  if (full < n) {
    for (int64_t i = full; i < full + 8; ++i)
      dst[i] = i < n ? (dtype == NT_BF16 ? nt_bf16_to_f32(src[i]) : nt_f16_to_f32(src[i])) : 0.0f;
  }
}

}  // namespace nt::cpu::dense_avx2

#endif
