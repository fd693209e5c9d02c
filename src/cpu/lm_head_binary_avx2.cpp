// AVX2 + FMA + F16C inner loops of the binary LM head (built with those flags,
// chosen at run time), with an AVX-VNNI variant of the integer dot for CPUs
// that have it. Same integers and the same fma sequence as the portable loops
// in lm_head_topk_binary.cpp, hence the same scores bit for bit.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>

#include "core/half.h"

namespace nt::cpu::binary_avx2 {
namespace {

// Eight int32x8 vectors -> one vector of their eight horizontal sums, in order.
inline __m256i sum8(const __m256i* d) {
  const __m256i a01 = _mm256_hadd_epi32(d[0], d[1]), a23 = _mm256_hadd_epi32(d[2], d[3]);
  const __m256i a45 = _mm256_hadd_epi32(d[4], d[5]), a67 = _mm256_hadd_epi32(d[6], d[7]);
  const __m256i b0 = _mm256_hadd_epi32(a01, a23), b1 = _mm256_hadd_epi32(a45, a67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20),
                          _mm256_permute2x128_si256(b0, b1, 0x31));
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Where one tile's operands live: TV weight rows (0/1 sign bytes, f32 scales
// zero-padded to whole blocks of 8 groups) against RB hidden rows (int8
// activations and their per-group sums). Output lanes[t][r][8].
struct TileArgs {
  const uint8_t* mask; int64_t mask_stride;
  const float* scale; int64_t scale_stride;
  const int8_t* act; int64_t act_stride;
  const int32_t* sums; int64_t sums_stride;
  int64_t groups;
  float* lanes; int64_t lanes_stride;  // between weight rows
};

// plus[t][r][j] = int32 partial sums of the activations of hidden row r at
// the set bits of weight row t in group g0+j (zero for padded groups). Folds
// them into the lanes: D = 2 * plus - group sum, then lane j += scale * D as
// one fma.
template <int TV, int RB>
inline void fold_groups(const TileArgs& a, const __m256i (*plus)[RB][8], int64_t g0,
                        __m256 (*lanes)[RB]) {
  for (int t = 0; t < TV; ++t) {
    const __m256 sc = _mm256_loadu_ps(a.scale + t * a.scale_stride + g0);
    for (int r = 0; r < RB; ++r) {
      const __m256i dot = _mm256_sub_epi32(_mm256_slli_epi32(sum8(plus[t][r]), 1),
                                           load(a.sums + r * a.sums_stride + g0));
      lanes[t][r] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(dot), lanes[t][r]);
    }
  }
}

template <int TV, int RB>
inline void store_lanes(const TileArgs& a, const __m256 (*lanes)[RB]) {
  for (int t = 0; t < TV; ++t)
    for (int r = 0; r < RB; ++r) _mm256_storeu_ps(a.lanes + t * a.lanes_stride + r * 8, lanes[t][r]);
}

// TV weight rows x RB hidden rows, groups of WPG sign words: each mask vector
// serves RB rows and each activation vector TV rows (TV=4, RB=2: 8
// accumulators, 6 loads per 8 products). maddubs(mask, act) sums the selected
// activations in pairs: |pair| <= 256 and at most 8 words, so int16 is exact.
template <int WPG, int TV, int RB>
void tile_block(const TileArgs& a) {
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256 lanes[TV][RB];
  for (int t = 0; t < TV; ++t)
    for (int r = 0; r < RB; ++r) lanes[t][r] = _mm256_setzero_ps();
  for (int64_t g0 = 0; g0 < a.groups; g0 += 8) {
    __m256i plus[TV][RB][8];
    for (int j = 0; j < 8; ++j) {
      __m256i acc[TV][RB];
      for (int t = 0; t < TV; ++t)
        for (int r = 0; r < RB; ++r) acc[t][r] = _mm256_setzero_si256();
      for (int w = 0; w < WPG && g0 + j < a.groups; ++w) {
        const int64_t off = 32 * ((g0 + j) * WPG + w);
        __m256i mk[TV];
        for (int t = 0; t < TV; ++t) mk[t] = load(a.mask + t * a.mask_stride + off);
        for (int r = 0; r < RB; ++r) {
          const __m256i av = load(a.act + r * a.act_stride + off);
          for (int t = 0; t < TV; ++t)
            acc[t][r] = _mm256_add_epi16(acc[t][r], _mm256_maddubs_epi16(mk[t], av));
        }
      }
      for (int t = 0; t < TV; ++t)
        for (int r = 0; r < RB; ++r) plus[t][r][j] = _mm256_madd_epi16(acc[t][r], ones16);
    }
    fold_groups<TV, RB>(a, plus, g0, lanes);
  }
  store_lanes<TV, RB>(a, lanes);
}

#pragma GCC push_options
#pragma GCC target("avx2,fma,avxvnni")
// As tile_block, with vpdpbusd (u8 mask x s8 act, four products per int32
// lane, exact) doing the multiply, the pair sums and the widening in one step.
template <int WPG, int TV, int RB>
void tile_block_vnni(const TileArgs& a) {
  __m256 lanes[TV][RB];
  for (int t = 0; t < TV; ++t)
    for (int r = 0; r < RB; ++r) lanes[t][r] = _mm256_setzero_ps();
  for (int64_t g0 = 0; g0 < a.groups; g0 += 8) {
    __m256i plus[TV][RB][8];
    for (int j = 0; j < 8; ++j) {
      __m256i acc[TV][RB];
      for (int t = 0; t < TV; ++t)
        for (int r = 0; r < RB; ++r) acc[t][r] = _mm256_setzero_si256();
      for (int w = 0; w < WPG && g0 + j < a.groups; ++w) {
        const int64_t off = 32 * ((g0 + j) * WPG + w);
        __m256i mk[TV];
        for (int t = 0; t < TV; ++t) mk[t] = load(a.mask + t * a.mask_stride + off);
        for (int r = 0; r < RB; ++r) {
          const __m256i av = load(a.act + r * a.act_stride + off);
          for (int t = 0; t < TV; ++t) acc[t][r] = _mm256_dpbusd_avx_epi32(acc[t][r], mk[t], av);
        }
      }
      for (int t = 0; t < TV; ++t)
        for (int r = 0; r < RB; ++r) plus[t][r][j] = acc[t][r];
    }
    fold_groups<TV, RB>(a, plus, g0, lanes);
  }
  store_lanes<TV, RB>(a, lanes);
}
#pragma GCC pop_options

bool has_vnni() {
  static const bool ok = __builtin_cpu_supports("avxvnni");
  return ok;
}

template <int WPG, int TV, int RB>
void run_block(const TileArgs& a) {
  if (has_vnni()) tile_block_vnni<WPG, TV, RB>(a);
  else tile_block<WPG, TV, RB>(a);
}

// Hidden rows two at a time, then the odd one.
template <int WPG, int TV>
void all_rows(TileArgs a, int64_t m_count) {
  int64_t m = 0;
  for (; m + 2 <= m_count; m += 2) {
    run_block<WPG, TV, 2>(a);
    a.act += 2 * a.act_stride; a.sums += 2 * a.sums_stride; a.lanes += 16;
  }
  if (m < m_count) run_block<WPG, TV, 1>(a);
}

template <int WPG>
void all_tile_rows(TileArgs a, int tile_rows, int64_t m_count) {
  if (tile_rows == 4) {
    all_rows<WPG, 4>(a, m_count);
    return;
  }
  for (int t = 0; t < tile_rows; ++t) {
    all_rows<WPG, 1>(a, m_count);
    a.mask += a.mask_stride; a.scale += a.scale_stride; a.lanes += a.lanes_stride;
  }
}

}  // namespace

// mask[32w + j] = bit j of words[w] (0 or 1).
void expand_signs(const uint32_t* words, int64_t n_words, uint8_t* mask) {
  // Byte j of the lane takes byte j/8 of the word, then keeps only bit j%8.
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bits = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
  const __m256i one = _mm256_set1_epi8(1);
  for (int64_t w = 0; w < n_words; ++w) {
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(words[w])), spread);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(mask + 32 * w),
                        _mm256_min_epu8(_mm256_and_si256(v, bits), one));
  }
}

// dst[g] = float(src[g]) for g < n (exact either way).
void widen_scales(const uint16_t* src, int64_t n, float* dst) {
  int64_t g = 0;
  for (; g + 8 <= n; g += 8)
    _mm256_storeu_ps(dst + g, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + g))));
  for (; g < n; ++g) dst[g] = nt_f16_to_f32(src[g]);
}

// See lm_head_topk_binary.cpp (group_lanes_portable) for the definition.
void group_lanes(const uint8_t* mask, const float* scale, int tile_rows, const int8_t* act,
                 int64_t act_stride, const int32_t* group_sums, int64_t m_count, int64_t groups,
                 int group_size, float* lanes) {
  const int64_t padded = (groups + 7) & ~int64_t(7);
  const TileArgs a{mask, groups * group_size, scale, padded, act, act_stride,
                   group_sums, padded, groups, lanes, m_count * 8};
  switch (group_size) {
    case 32: all_tile_rows<1>(a, tile_rows, m_count); break;
    case 64: all_tile_rows<2>(a, tile_rows, m_count); break;
    case 128: all_tile_rows<4>(a, tile_rows, m_count); break;
    default: all_tile_rows<8>(a, tile_rows, m_count); break;
  }
}

}  // namespace nt::cpu::binary_avx2

#endif
