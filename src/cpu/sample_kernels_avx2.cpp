// AVX2+FMA sampler passes, lane for lane the operations of the portable ones
// (cpu/sample_kernels.cpp, cpu/sample_kernels.h, core/philox.h,
// core/portable_log.h, core/portable_exp.h). This file calls no inline
// function of the shared headers: an out-of-line copy compiled with -mavx2
// could be the one the linker keeps for the portable code too (the same goes
// for std:: templates such as std::max).
#include "cpu/sample_kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <climits>
#include <cmath>
#include <cstring>

#include "core/word_floor.h"

namespace nt::cpu::sampling {
namespace {

// Ordering keys are compared as int32 after flipping bit 31 ("signed keys"),
// since AVX2 has no unsigned 32-bit compare.
constexpr uint32_t kFlip = 0x80000000u;
inline __m256i signed_key(uint32_t key) { return _mm256_set1_epi32(int32_t(key ^ kFlip)); }
inline __m256i lane_offsets() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }

inline __m256 widen16(__m128i h, nt_dtype dtype) {
  if (dtype == NT_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Eight logits from i, fewer at the end of a range: missing lanes read as NaN,
// whose key is that of -inf, and callers mask them by `valid`.
inline __m256 load8(Row row, int64_t i, int64_t n) {
  if (row.dtype == NT_F32) {
    const float* p = static_cast<const float*>(row.data) + i;
    if (n >= 8) return _mm256_loadu_ps(p);
    float buf[8];
    for (int k = 0; k < 8; ++k) buf[k] = NAN;
    std::memcpy(buf, p, size_t(n) * 4);
    return _mm256_loadu_ps(buf);
  }
  const uint16_t* p = static_cast<const uint16_t*>(row.data) + i;
  if (n >= 8) return widen16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), row.dtype);
  uint16_t buf[8];
  for (int k = 0; k < 8; ++k) buf[k] = 0x7FFFu;  // NaN in f16 and in bf16
  std::memcpy(buf, p, size_t(n) * 2);
  return widen16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf)), row.dtype);
}

inline __m256i valid_lanes(int64_t n) {
  if (n >= 8) return _mm256_set1_epi32(-1);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n)), lane_offsets());
}

// The token indices of eight lanes from i.
inline __m256i lane_index(int64_t i) {
  return _mm256_add_epi32(_mm256_set1_epi32(int32_t(i)), lane_offsets());
}

// nt_order_key(x) ^ kFlip: NaN -> -inf, -0 -> +0, then flip the magnitude bits
// of negatives.
inline __m256i signed_key8(__m256 x) {
  __m256i u = _mm256_castps_si256(x);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  u = _mm256_blendv_epi8(u, _mm256_set1_epi32(int32_t(0xFF800000u)), nan);
  u = _mm256_andnot_si256(_mm256_cmpeq_epi32(u, _mm256_set1_epi32(INT_MIN)), u);
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  return _mm256_xor_si256(u, _mm256_and_si256(_mm256_srai_epi32(u, 31), magnitude));
}

inline __m256i ge_i32(__m256i a, __m256i b) {  // a >= b
  return _mm256_xor_si256(_mm256_cmpgt_epi32(b, a), _mm256_set1_epi32(-1));
}

inline int mask_bits(__m256i m) { return _mm256_movemask_ps(_mm256_castsi256_ps(m)); }

// nt_scaled_score: IEEE division (skipped for T = 1, where x / 1 == x), NaN -> -inf.
inline __m256 scaled8(__m256 x, float temperature) {
  const __m256 s = temperature == 1.0f ? x : _mm256_div_ps(x, _mm256_set1_ps(temperature));
  return _mm256_blendv_ps(s, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(s, s, _CMP_UNORD_Q));
}

// nt_portable_exp (core/portable_exp.h) lane for lane, with its NT_EXP_*
// constants: the same operations in the same order, so the bits are the core's
// (tests/core/portable_exp_test.cpp compares the two). The core computes
// out-of-range lanes (d < NT_EXP_MIN_ARG, -inf, NaN) as d = 0 and selects 0;
// here they run on their own d (cvttps gives INT_MIN for NaN/inf, no UB in
// SIMD) and are masked to 0: in-range lanes are unaffected either way.
inline __m256 exp8(__m256 d) {
  const __m256 in_range = _mm256_cmp_ps(d, _mm256_set1_ps(NT_EXP_MIN_ARG), _CMP_GE_OQ);
  const __m256 magic = _mm256_set1_ps(NT_EXP_ROUND_MAGIC);
  const __m256 n =
      _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(d, _mm256_set1_ps(NT_EXP_LOG2E)), magic), magic);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-NT_EXP_LN2_HI), d);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-NT_EXP_LN2_LO), r);
  __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(NT_EXP_C7), r, _mm256_set1_ps(NT_EXP_C6));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(NT_EXP_C5));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(NT_EXP_C4));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(NT_EXP_C3));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(NT_EXP_C2));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvttps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_and_ps(_mm256_mul_ps(_mm256_mul_ps(q, p1), p2), in_range);
}

// nt_portable_log for positive normal x.
inline __m256 log8(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127));
  __m256i m = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007FFFFF)),
                              _mm256_set1_epi32(0x3F800000));
  const __m256i big = _mm256_cmpgt_epi32(m, _mm256_set1_epi32(0x3FB504F3));
  m = _mm256_sub_epi32(m, _mm256_and_si256(big, _mm256_set1_epi32(0x00800000)));
  e = _mm256_sub_epi32(e, big);
  const __m256 f = _mm256_sub_ps(_mm256_castsi256_ps(m), _mm256_set1_ps(1.0f));
  const __m256 z = _mm256_mul_ps(f, f);
  __m256 p =
      _mm256_fmadd_ps(_mm256_set1_ps(6.804056466e-02f), f, _mm256_set1_ps(-1.172831580e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.189046502e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.239611059e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.421779245e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.666853428e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.000224590e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-2.500000000e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(3.333331048e-01f));
  const __m256 tail =
      _mm256_fmadd_ps(_mm256_mul_ps(z, f), p, _mm256_mul_ps(_mm256_set1_ps(-0.5f), z));
  const __m256 fe = _mm256_cvtepi32_ps(e);
  __m256 r = _mm256_fmadd_ps(fe, _mm256_set1_ps(-2.121944400546905828e-4f), tail);
  r = _mm256_add_ps(r, f);
  return _mm256_fmadd_ps(fe, _mm256_set1_ps(0.693359375f), r);
}

// nt_gumbel_from_uniform(nt_uniform_from_bits(w)).
inline __m256 gumbel8(__m256i w) {
  const __m256 u = _mm256_mul_ps(
      _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w, 9)), _mm256_set1_ps(0.5f)),
      _mm256_set1_ps(1.1920928955078125e-7f));
  const __m256 sign = _mm256_set1_ps(-0.0f);
  return _mm256_xor_ps(log8(_mm256_xor_ps(log8(u), sign)), sign);
}

struct Philox8 { __m256i v[4]; };

inline void mul_hi_lo(__m256i a, __m256i m, __m256i* hi, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// nt_token_block for kChains x 8 block indices at once. A round is a chain of
// multiply, blend and xor latencies, so independent chains are interleaved.
template <int kChains>
inline void philox8(const __m256i* block, uint64_t seed, uint64_t offset, uint32_t tag,
                    Philox8* out) {
  __m256i c0[kChains], c1[kChains], c2[kChains], c3[kChains];
  for (int c = 0; c < kChains; ++c) {
    c0[c] = block[c];
    c1[c] = _mm256_set1_epi32(int32_t(tag));
    c2[c] = _mm256_set1_epi32(int32_t(uint32_t(offset)));
    c3[c] = _mm256_set1_epi32(int32_t(uint32_t(offset >> 32)));
  }
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  const __m256i m0 = _mm256_set1_epi32(int32_t(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(int32_t(0xCD9E8D57u));
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    const __m256i key0 = _mm256_set1_epi32(int32_t(k0)), key1 = _mm256_set1_epi32(int32_t(k1));
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {
      __m256i hi0, lo0, hi1, lo1;
      mul_hi_lo(c0[c], m0, &hi0, &lo0);
      mul_hi_lo(c2[c], m1, &hi1, &lo1);
      c0[c] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[c]), key0);
      c2[c] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[c]), key1);
      c1[c] = lo1;
      c3[c] = lo0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int c = 0; c < kChains; ++c) out[c] = Philox8{{c0[c], c1[c], c2[c], c3[c]}};
}

// Philox words of eight arbitrary tokens (one lane each).
inline __m256i token_words8(__m256i token, uint64_t seed, uint64_t offset, uint32_t tag) {
  const __m256i block = _mm256_srli_epi32(token, 2);
  Philox8 b;
  philox8<1>(&block, seed, offset, tag, &b);
  const __m256i word = _mm256_and_si256(token, _mm256_set1_epi32(3));
  __m256i w = b.v[0];
  w = _mm256_blendv_epi8(w, b.v[1], _mm256_cmpeq_epi32(word, _mm256_set1_epi32(1)));
  w = _mm256_blendv_epi8(w, b.v[2], _mm256_cmpeq_epi32(word, _mm256_set1_epi32(2)));
  return _mm256_blendv_epi8(w, b.v[3], _mm256_cmpeq_epi32(word, _mm256_set1_epi32(3)));
}

// Words of eight consecutive blocks (32 tokens) in token order.
inline void transpose_words(const Philox8& b, __m256i w[4]) {
  const __m256i lo01 = _mm256_unpacklo_epi32(b.v[0], b.v[1]);
  const __m256i hi01 = _mm256_unpackhi_epi32(b.v[0], b.v[1]);
  const __m256i lo23 = _mm256_unpacklo_epi32(b.v[2], b.v[3]);
  const __m256i hi23 = _mm256_unpackhi_epi32(b.v[2], b.v[3]);
  const __m256i q0 = _mm256_unpacklo_epi64(lo01, lo23), q1 = _mm256_unpackhi_epi64(lo01, lo23);
  const __m256i q2 = _mm256_unpacklo_epi64(hi01, hi23), q3 = _mm256_unpackhi_epi64(hi01, hi23);
  w[0] = _mm256_permute2x128_si256(q0, q1, 0x20);
  w[1] = _mm256_permute2x128_si256(q2, q3, 0x20);
  w[2] = _mm256_permute2x128_si256(q0, q1, 0x31);
  w[3] = _mm256_permute2x128_si256(q2, q3, 0x31);
}

// Philox words of the tokens of kGroups groups of 32 starting at tokens
// 32 * group[g], in token order.
template <int kGroups>
inline void group_words(const int64_t* group, uint64_t seed, uint64_t offset, uint32_t tag,
                        __m256i* w) {
  __m256i block[kGroups];
  for (int g = 0; g < kGroups; ++g)
    block[g] = lane_index(group[g] * 8);
  Philox8 b[kGroups];
  philox8<kGroups>(block, seed, offset, tag, b);
  for (int g = 0; g < kGroups; ++g) transpose_words(b[g], w + 4 * g);
}

// Most tokens of a large keep-set cannot win, and showing it needs only their
// Philox word, not the two logs: the floors of core/word_floor.h (shared with
// the CUDA scans), as values of (w >> 9).
class WordFloor {
 public:
  WordFloor() {
    for (int k = 0; k < NT_WORD_FLOOR_STEPS; ++k) floor_[k] = nt_word_floor_entry(k);
  }
  int32_t operator()(float best, float s_top) const {
    const int k = nt_word_floor_index(best, s_top);
    return k < 0 ? 0 : floor_[k];
  }

 private:
  int32_t floor_[NT_WORD_FLOOR_STEPS];
};

const WordFloor& word_floor() {
  static const WordFloor table;
  return table;
}

// Lanes whose word reaches the floor.
inline int word_pass(__m256i w, int32_t floor) {
  return mask_bits(_mm256_cmpgt_epi32(_mm256_srli_epi32(w, 9), _mm256_set1_epi32(floor - 1)));
}

struct ScanState {
  __m256i best = _mm256_set1_epi32(INT_MIN), best_index = _mm256_set1_epi32(-1);
  int64_t n_out = 0;
};

// One vector of scan(); `valid` only at the end of a range.
template <bool kTail>
inline void scan8(__m256 x, int64_t i, int64_t n, __m256i lo_key, __m256i hi_key, bool compact,
                  int32_t* out, ScanState* st) {
  const __m256i key = signed_key8(x);
  __m256i gt = _mm256_cmpgt_epi32(key, st->best);
  if (kTail) gt = _mm256_and_si256(gt, valid_lanes(n));
  st->best = _mm256_blendv_epi8(st->best, key, gt);
  st->best_index = _mm256_blendv_epi8(st->best_index, lane_index(i), gt);
  if (!compact) return;
  __m256i in = _mm256_and_si256(ge_i32(key, lo_key), ge_i32(hi_key, key));
  if (kTail) in = _mm256_and_si256(in, valid_lanes(n));
  for (int bits = mask_bits(in); bits != 0; bits &= bits - 1)
    out[st->n_out++] = int32_t(i + __builtin_ctz(bits));
}

// The first token holding the largest key of a scan's lanes.
ScanStats scan_result(const ScanState& st) {
  alignas(32) int32_t keys[8], idx[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(keys), st.best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(idx), st.best_index);
  ScanStats result{0u, -1};
  int32_t top = INT_MIN;
  for (int l = 0; l < 8; ++l) {
    if (idx[l] < 0) continue;
    if (keys[l] > top || (keys[l] == top && idx[l] < result.max_index)) {
      top = keys[l];
      result.max_index = idx[l];
    }
  }
  if (result.max_index >= 0) result.max_key = uint32_t(top) ^ kFlip;
  return result;
}

// Sums exp(s - ref) of the eight logits whose keys lie below lo_key into two
// fp64 halves (lanes 0-3, 4-7); the other lanes, and those scoring -inf (the
// missing ones of a tail included), add exp8(-inf) = 0.
struct MassLanes {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  void add(__m256 q) {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(q)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(q, 1)));
  }
  double total() const {
    alignas(32) double t[4];
    _mm256_store_pd(t, _mm256_add_pd(lo, hi));
    return (t[0] + t[2]) + (t[1] + t[3]);
  }
};

inline void mass8(__m256 x, float temperature, __m256 ref, __m256i lo_key, MassLanes* m) {
  const __m256 below = _mm256_castsi256_ps(_mm256_cmpgt_epi32(lo_key, signed_key8(x)));
  const __m256 d = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY),
                                    _mm256_sub_ps(scaled8(x, temperature), ref), below);
  m->add(exp8(d));
}

// scan_mass(), and scan() without kMass (temperature, ref and mass unused).
template <bool kMass>
int64_t scan_range(Row row, int64_t begin, int64_t end, uint32_t lo, uint32_t hi,
                   float temperature, float ref, int32_t* out, ScanStats* stats, double* mass) {
  ScanState st;
  MassLanes m;
  const __m256i lo_key = signed_key(lo), hi_key = signed_key(hi);
  const __m256 ref8 = _mm256_set1_ps(ref);
  const bool compact = lo <= hi;
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 x = load8(row, i, 8);
    scan8<false>(x, i, 8, lo_key, hi_key, compact, out, &st);
    if (kMass) mass8(x, temperature, ref8, lo_key, &m);
  }
  if (i < end) {
    const __m256 x = load8(row, i, end - i);
    scan8<true>(x, i, end - i, lo_key, hi_key, compact, out, &st);
    if (kMass) mass8(x, temperature, ref8, lo_key, &m);
  }
  *stats = scan_result(st);
  if (kMass) *mass = m.total();
  return st.n_out;
}

int64_t scan(Row row, int64_t begin, int64_t end, uint32_t lo, uint32_t hi, int32_t* out,
             ScanStats* stats) {
  return scan_range<false>(row, begin, end, lo, hi, 1.0f, 0.0f, out, stats, nullptr);
}

double mass_histogram(Row row, int64_t begin, int64_t end, float temperature, float s_max,
                      int n_binned, double* mass, uint32_t* count) {
  const __m256 top = _mm256_set1_ps(s_max);
  const __m256i binned_end = _mm256_set1_epi32(n_binned);
  MassLanes rest;  // the scores past the binned range
  alignas(32) double p[8];
  alignas(32) int32_t bin[8];
  for (int64_t i = begin; i < end; i += 8) {
    const __m256 s = scaled8(load8(row, i, end - i), temperature);
    const __m256 finite = _mm256_cmp_ps(s, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    if (_mm256_movemask_ps(finite) == 0) continue;
    const __m256 q = exp8(_mm256_sub_ps(s, top));  // 0 where s = -inf
    const __m256 t = _mm256_mul_ps(_mm256_sub_ps(top, s), _mm256_set1_ps(kMassBinScale));
    const __m256i b = _mm256_cvttps_epi32(_mm256_min_ps(t, _mm256_set1_ps(kMassBinLast)));
    const __m256 binned =
        _mm256_and_ps(finite, _mm256_castsi256_ps(_mm256_cmpgt_epi32(binned_end, b)));
    rest.add(_mm256_andnot_ps(binned, q));
    const int lanes = _mm256_movemask_ps(binned);
    if (lanes == 0) continue;
    // 128-bit stores: scalar loads from the upper half of a 256-bit store
    // miss store forwarding on some cores.
    const __m256d q_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(q));
    const __m256d q_hi = _mm256_cvtps_pd(_mm256_extractf128_ps(q, 1));
    _mm_store_pd(p, _mm256_castpd256_pd128(q_lo));
    _mm_store_pd(p + 2, _mm256_extractf128_pd(q_lo, 1));
    _mm_store_pd(p + 4, _mm256_castpd256_pd128(q_hi));
    _mm_store_pd(p + 6, _mm256_extractf128_pd(q_hi, 1));
    _mm_store_si128(reinterpret_cast<__m128i*>(bin), _mm256_castsi256_si128(b));
    _mm_store_si128(reinterpret_cast<__m128i*>(bin + 4), _mm256_extracti128_si256(b, 1));
    auto add_lane = [&](int l) {
      mass[bin[l]] += p[l];
      ++count[bin[l]];
    };
    if (lanes == 0xFF) {  // the common case, without a data-dependent branch per lane
      for (int l = 0; l < 8; ++l) add_lane(l);
      continue;
    }
    for (int bits = lanes; bits != 0; bits &= bits - 1) add_lane(__builtin_ctz(bits));
  }
  return rest.total();
}

void exp_list(const float* s, int64_t n, float s_max, float* p) {
  const __m256 top = _mm256_set1_ps(s_max);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(p + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), top)));
  if (i < n) {
    const __m256i m = valid_lanes(n - i);
    _mm256_maskstore_ps(p + i, m, exp8(_mm256_sub_ps(_mm256_maskload_ps(s + i, m), top)));
  }
}

void gumbel_list(const int32_t* index, int64_t n, uint64_t seed, uint64_t offset, uint32_t tag,
                 float* gumbel) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = valid_lanes(n - i);
    const __m256i token = _mm256_maskload_epi32(index + i, m);
    _mm256_maskstore_ps(gumbel + i, m, gumbel8(token_words8(token, seed, offset, tag)));
  }
}

inline __m256i member8(__m256i key, __m256i index, __m256i valid, const DrawSet& set) {
  const __m256i upper = ge_i32(signed_key(set.hi), key);
  const __m256i above_b = ge_i32(key, signed_key(set.b));
  const __m256i tie = _mm256_and_si256(ge_i32(key, signed_key(set.a)),
                                       ge_i32(_mm256_set1_epi32(set.cut), index));
  return _mm256_and_si256(_mm256_and_si256(upper, _mm256_or_si256(above_b, tie)), valid);
}

inline __m256 draw_score8(__m256 x, const DrawSet& set) {
  return set.pos_inf ? _mm256_setzero_ps() : scaled8(x, set.temperature);
}

// Above this many candidates in a group of 32, one Philox lane per block of
// four consecutive tokens beats one lane per token.
constexpr int kDenseGroup = 12;

inline float max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// Candidates of one group of 32 tokens: members whose score could still reach
// the best with the largest Gumbel value.
struct Group {
  int64_t first;
  uint32_t keep;
  float s_top;
  alignas(32) float score[32];
};

inline void load_group(Row row, int64_t g0, int64_t end, const DrawSet& set, float best, Group* g) {
  const __m256 g_max = _mm256_set1_ps(NT_GUMBEL_MAX), neg_inf = _mm256_set1_ps(-INFINITY);
  const __m256 bound = _mm256_set1_ps(best);
  __m256 top = neg_inf;
  g->first = g0;
  g->keep = 0;
  for (int k = 0; k < 4 && g0 + 8 * k < end; ++k) {
    const int64_t i = g0 + 8 * k, n = end - i;
    const __m256 x = load8(row, i, n);
    const __m256i in = member8(signed_key8(x), lane_index(i), valid_lanes(n), set);
    if (mask_bits(in) == 0) continue;
    const __m256 s = draw_score8(x, set);
    const __m256 reach = _mm256_and_ps(_mm256_castsi256_ps(in),
                                       _mm256_cmp_ps(_mm256_add_ps(s, g_max), bound, _CMP_GE_OQ));
    const __m256 kept = _mm256_blendv_ps(neg_inf, s, reach);
    _mm256_store_ps(g->score + 8 * k, kept);
    top = _mm256_max_ps(top, kept);
    g->keep |= uint32_t(_mm256_movemask_ps(reach)) << (8 * k);
  }
  g->s_top = max8(top);
}

// Gumbel-max over the lanes of `pass`: lane l, token token_of(l), scores
// score[l] plus the Gumbel noise of Philox word w[l].
template <class TokenOf>
inline void draw_lanes(__m256 score, __m256i w, int pass, TokenOf token_of, Best* b) {
  if (pass == 0) return;
  alignas(32) float value[8];
  _mm256_store_ps(value, _mm256_add_ps(score, gumbel8(w)));
  for (int bits = pass; bits != 0; bits &= bits - 1) {
    const int l = __builtin_ctz(bits);
    const float v = value[l];
    const int32_t i = token_of(l);
    if (v > b->value || (v == b->value && i < b->index)) *b = Best{v, i};
  }
}

// Gumbel-max over the candidates of a group whose Philox words are w.
inline void draw_group(const Group& g, const __m256i* w, const WordFloor& floor_of, Best* b) {
  const int32_t floor = floor_of(b->value, g.s_top);
  for (int k = 0; k < 4; ++k) {
    const int pass = word_pass(w[k], floor) & int((g.keep >> (8 * k)) & 0xFFu);
    const int64_t first = g.first + 8 * k;
    draw_lanes(_mm256_load_ps(g.score + 8 * k), w[k], pass,
               [&](int l) { return int32_t(first + l); }, b);
  }
}

void gumbel_scan(Row row, int64_t begin, int64_t end, const DrawSet& set, Best* best) {
  Best b = *best;
  const WordFloor& floor_of = word_floor();
  alignas(32) int32_t pend_index[8];
  alignas(32) float pend_score[8];
  int n_pend = 0;
  auto flush = [&] {
    if (n_pend == 0) return;
    float s_top = pend_score[0];
    for (int l = 1; l < n_pend; ++l) s_top = pend_score[l] > s_top ? pend_score[l] : s_top;
    for (int l = n_pend; l < 8; ++l) pend_index[l] = pend_index[0];
    const __m256i w = token_words8(_mm256_load_si256(reinterpret_cast<const __m256i*>(pend_index)),
                                   set.seed, set.offset, set.tag);
    const int pass = word_pass(w, floor_of(b.value, s_top)) & ((1 << n_pend) - 1);
    draw_lanes(_mm256_load_ps(pend_score), w, pass, [&](int l) { return pend_index[l]; }, &b);
    n_pend = 0;
  };
  auto sparse = [&](const Group& g) {
    for (uint32_t bits = g.keep; bits != 0; bits &= bits - 1) {
      const int j = __builtin_ctz(bits);
      pend_index[n_pend] = int32_t(g.first + j);
      pend_score[n_pend] = g.score[j];
      if (++n_pend == 8) flush();
    }
  };
  // Two groups at a time, so that two Philox chains overlap when both are dense.
  Group g[2];
  for (int64_t g0 = begin; g0 < end; g0 += 64) {
    int dense[2], n_dense = 0;
    for (int h = 0; h < 2; ++h) {
      g[h].keep = 0;
      if (g0 + 32 * h < end) load_group(row, g0 + 32 * h, end, set, b.value, &g[h]);
      if (__builtin_popcount(g[h].keep) > kDenseGroup) dense[n_dense++] = h; else sparse(g[h]);
    }
    int64_t groups[2];
    for (int d = 0; d < n_dense; ++d) groups[d] = g[dense[d]].first >> 5;
    __m256i w[8];
    if (n_dense == 2) group_words<2>(groups, set.seed, set.offset, set.tag, w);
    if (n_dense == 1) group_words<1>(groups, set.seed, set.offset, set.tag, w);
    for (int d = 0; d < n_dense; ++d) draw_group(g[dense[d]], w + 4 * d, floor_of, &b);
  }
  flush();
  *best = b;
}

Cumulative cumulative(Row row, int64_t begin, int64_t end, const DrawSet& set, double prefix,
                      double target) {
  Cumulative c{0.0, -1, -1};
  alignas(32) float p[8];
  const __m256 top = _mm256_set1_ps(set.s_max);
  for (int64_t i = begin; i < end; i += 8) {
    const int64_t n = end - i;
    const __m256 x = load8(row, i, n);
    const int in = mask_bits(member8(signed_key8(x), lane_index(i), valid_lanes(n), set));
    if (in == 0) continue;
    const __m256 mass =
        set.pos_inf ? _mm256_set1_ps(1.0f) : exp8(_mm256_sub_ps(draw_score8(x, set), top));
    _mm256_store_ps(p, mass);
    for (int bits = in; bits != 0; bits &= bits - 1) {
      const int l = __builtin_ctz(bits);
      c.total += double(p[l]);
      c.last = int32_t(i + l);
      if (c.hit < 0 && prefix + c.total > target) c.hit = int32_t(i + l);
    }
  }
  return c;
}

constexpr Kernels kAvx2{&scan, &scan_range<true>, &mass_histogram, &exp_list, &gumbel_list,
                        &gumbel_scan, &cumulative};

}  // namespace

const Kernels* avx2_kernels() { return &kAvx2; }

}  // namespace nt::cpu::sampling

#else

namespace nt::cpu::sampling {
const Kernels* avx2_kernels() { return nullptr; }
}  // namespace nt::cpu::sampling

#endif
