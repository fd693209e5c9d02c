#include "cpu/sample_row.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace nt::cpu::sampling {
namespace {

constexpr int64_t kPivotStride = 64;  // the top-k pivot looks at every 64th logit
// Keep-sets up to this size are drawn from their list; larger ones by a scan
// of the row, whose Gumbel noise comes 32 tokens per Philox vector.
constexpr int64_t kListDrawMax = 4096;
// Top-p without top-k: the scan lists the tokens at or above a pivot for a few
// times this many, which hold the nucleus of a peaked row. The pivot's sample
// is read ahead of the scan, where each sampled logit is a DRAM access, so it
// takes about kTopPSample logits (every 64th at least).
constexpr int64_t kTopPCandidates = 512;
constexpr int64_t kTopPSample = 512;

// ---- chunks --------------------------------------------------------------------

int64_t chunk_begin(int64_t c) { return c * kChunk; }
int64_t chunk_end(const RowJob& j, int64_t c) { return std::min(j.vocab, (c + 1) * kChunk); }

// ---- helpers of the stages -------------------------------------------------------

void finish(RowJob& j, int64_t token) { j.token = token; j.next = Next::kDone; }

// Whether the m logits topk_pivot sampled (x-keys in j.r_key, largest score
// ref) put the top_p nucleus of their own mass past half of them: a flat row,
// whose nucleus no candidate list holds, so the scan neither lists nor sums
// for it. Peaks the sample missed could only shorten the nucleus; such a row
// takes the mass pass, as a flat one does.
bool sample_looks_flat(RowJob& j, int64_t m, float ref) {
  for (int64_t s = 0; s < m; ++s)
    j.c_score[s] = nt_scaled_score(nt_key_to_float(j.r_key[s]), j.p.temperature);
  kernels().exp_list(j.c_score, m, ref, j.c_mass);
  constexpr int kUnits = 32;
  double unit_mass[kUnits + 1] = {}, total = 0.0;  // sampled mass per unit of ref - s
  int64_t unit_count[kUnits + 1] = {};
  for (int64_t s = 0; s < m; ++s) {
    if (j.c_score[s] == -INFINITY) continue;
    const float d = ref - j.c_score[s];
    const int u = d < float(kUnits) ? int(d) : kUnits;
    unit_mass[u] += j.c_mass[s];
    ++unit_count[u];
    total += j.c_mass[s];
  }
  double done = 0.0;
  int64_t count = 0;
  for (int u = 0; u <= kUnits && done < double(j.p.top_p) * total; ++u) {
    done += unit_mass[u];
    count += unit_count[u];
  }
  return 2 * count > m;
}

// x-key pivot from every stride-th logit with, in expectation, a few times k
// logits at or above it. With ref, also the score of the largest sampled logit
// when it is finite; ref is left as it is when the row is too short to sample,
// and for top-p alone on a row whose sample looks flat, which gets no pivot
// (UINT32_MAX) either.
uint32_t topk_pivot(RowJob& j, int64_t k, float* ref, int64_t stride = kPivotStride) {
  const int64_t m = j.vocab / stride;
  const double e = double(k) / double(stride);
  const double rank = std::ceil(e + 3.0 * std::sqrt(e) + 3.0);
  if (m < 16 || rank >= double(m)) return x_threshold(NT_KEY_FIRST_FINITE, j.p.temperature, j.hi);
  uint32_t top = 0;
  for (int64_t s = 0; s < m; ++s) {
    j.r_key[s] = nt_order_key(j.x.at(s * stride + stride - 1));
    j.r_index[s] = int32_t(s);
    top = std::max(top, j.r_key[s]);
  }
  if (ref != nullptr) {
    const float s = nt_scaled_score(nt_key_to_float(top), j.p.temperature);
    // Top-p alone on a flat row: neither a list nor Z.
    if (j.p.top_k <= 0 && std::isfinite(s) && sample_looks_flat(j, m, s)) return UINT32_MAX;
    if (std::isfinite(s)) *ref = s;
  }
  const PrefixEnd e_pivot = select_prefix(j.r_key, j.r_index, nullptr, m, 0.0, rank, j.c_key,
                                          j.c_index, j.c_score);
  uint32_t key = score_key(nt_key_to_float(e_pivot.key), j.p.temperature);
  if (key < NT_KEY_FIRST_FINITE) key = NT_KEY_FIRST_FINITE;
  return x_threshold(key, j.p.temperature, j.hi);
}

// Moves the chunks' found indices together, in index order.
int64_t gather_found(RowJob& j) {
  int64_t n = 0;
  for (int64_t c = 0; c < j.n_chunks; ++c) {
    const int64_t m = j.chunks[c].n_found;
    if (n != chunk_begin(c)) std::memmove(j.c_index + n, j.c_index + chunk_begin(c), size_t(m) * 4);
    n += m;
  }
  return n;
}

// Scores and score keys of the listed candidates.
void score_list(RowJob& j, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = nt_scaled_score(j.x.at(j.c_index[i]), j.p.temperature);
    j.c_score[i] = s;
    j.c_key[i] = nt_order_key(s);
  }
}

// Keeps the list entries inside end, in order; returns their number.
int64_t filter_list(RowJob& j, int64_t n, PrefixEnd end) {
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!in_prefix(j.c_key[i], j.c_index[i], end)) continue;
    j.c_index[m] = j.c_index[i];
    j.c_key[m] = j.c_key[i];
    j.c_score[m] = j.c_score[i];
    ++m;
  }
  return m;
}

// The end of a listed set's own order: its lowest key, last index among those.
PrefixEnd list_end(const RowJob& j, int64_t n) {
  PrefixEnd e{UINT32_MAX, -1};
  for (int64_t i = 0; i < n; ++i)
    if (j.c_key[i] < e.key || (j.c_key[i] == e.key && j.c_index[i] > e.index))
      e = {j.c_key[i], j.c_index[i]};
  return e;
}

// Top-p over the listed candidates (ranked after mass j.before_list): p_i,
// then the prefix reaching top_p * z.
void topp_over_list(RowJob& j, int64_t n, bool z_from_list) {
  kernels().exp_list(j.c_score, n, j.s_max, j.c_mass);
  const double z = z_from_list ? std::accumulate(j.c_mass, j.c_mass + n, 0.0) : j.z;
  const PrefixEnd e = select_prefix(j.c_key, j.c_index, j.c_mass, n, j.before_list,
                                    double(j.p.top_p) * z, j.r_key, j.r_index, j.r_val);
  j.keep = shorter(j.keep, e);
}

// Top-p alone from the scan (j.mass_ref set): the scan listed every token at
// or above the pivot, a prefix of the order, and summed exp(s - mass_ref) over
// the others, all of which score at or below mass_ref. Z is the listed
// tokens' masses, exp(s - s_max) as the mass pass takes them, plus that sum
// rescaled to s_max: the tokens that carry Z's bulk are measured from s_max,
// and the rest from a reference at or above them, so Z keeps fp32 accuracy
// however far s_max lies above the sample. Sets j.z and returns true when the
// sums are usable; the keep-set is then settled here when the listed tokens
// reach top_p * Z (*settled), else the mass pass finds it.
bool topp_from_scan(RowJob& j, bool* settled) {
  *settled = false;
  double below = 0.0;
  for (int64_t c = 0; c < j.n_chunks; ++c) below += j.chunks[c].mass;
  if (!std::isfinite(below)) return false;
  const int64_t n = gather_found(j);
  score_list(j, n);
  kernels().exp_list(j.c_score, n, j.s_max, j.c_mass);
  const double listed = std::accumulate(j.c_mass, j.c_mass + n, 0.0);
  j.z = listed + below * std::exp(double(j.mass_ref) - double(j.s_max));
  const double target = double(j.p.top_p) * j.z;
  if (n == 0 || listed < target) return true;
  j.keep = shorter(j.keep, select_prefix(j.c_key, j.c_index, j.c_mass, n, 0.0, target, j.r_key,
                                         j.r_index, j.r_val));
  j.n_list = n;
  *settled = true;
  return true;
}

// Mass bins worth filling for top-p without top-k. Far below s_max the bins
// only add to Z, and a scatter per token is the mass pass's main cost, so
// every 64th logit estimates how deep the target lies: the tokens left out
// should hold a quarter of 1 - top_p of the mass. A sampled token with
// p >= 1/64 is likely one of a few peaks rather than typical of 64 others, so
// it counts once. If the target still lies beyond, the pass is redone with
// every bin (stage_after_mass). With z_known, the scan's Z replaces the
// sample's estimate of it.
int binned_estimate(RowJob& j, bool z_known) {
  const int64_t m = j.vocab / kPivotStride;
  if (m < 16) return kMassBins;
  for (int64_t s = 0; s < m; ++s)
    j.c_score[s] = nt_scaled_score(j.x.at(s * kPivotStride + kPivotStride - 1), j.p.temperature);
  kernels().exp_list(j.c_score, m, j.s_max, j.c_mass);
  constexpr int kUnits = kMassBins / int(kMassBinScale);  // units of s_max - s the bins span
  double unit_mass[kUnits + 1] = {};  // estimated mass per unit of s_max - s
  double z = 1.0;
  for (int64_t s = 0; s < m; ++s) {
    if (j.c_score[s] == -INFINITY) continue;
    const float d = j.s_max - j.c_score[s];
    const double p = j.c_mass[s], weight = p * kPivotStride >= 1.0 ? 1.0 : double(kPivotStride);
    unit_mass[d < float(kUnits) ? int(d) : kUnits] += weight * p;
    z += weight * p;
  }
  const double budget = 0.25 * (1.0 - double(j.p.top_p)) * (z_known ? j.z : z);
  double tail = 0.0;
  int depth = kUnits + 1;
  for (int u = kUnits; u >= 0 && tail + unit_mass[u] <= budget; --u) {
    tail += unit_mass[u];
    depth = u;
  }
  return std::min(kMassBins, (depth + 1) * int(kMassBinScale));  // one unit of slack
}

// The smallest x-key whose (finite) score falls in a bin <= bin.
uint32_t x_bin_threshold(const RowJob& j, int bin) {
  const uint32_t finite = x_threshold(NT_KEY_FIRST_FINITE, j.p.temperature, j.hi);
  return first_key(finite, j.hi, [&](float x) {
    return mass_bin(nt_scaled_score(x, j.p.temperature), j.s_max) <= bin;
  });
}

// The explicit draw's u: NaN or negative counts as 0.
float explicit_uniform(const RowJob& j) {
  return std::isnan(j.uniform) || j.uniform < 0.0f ? 0.0f : j.uniform;
}

// Cumulative mass of listed members in index order, formed exactly as the scan
// path forms it (a sum per chunk from 0, chunk sums added in order). Returns
// the first member whose cumulative mass exceeds target (-1 if none) and the
// total in *total.
int64_t chunked_walk(const int32_t* index, const float* p, int64_t n, double target,
                     double* total) {
  double prefix = 0.0, chain = 0.0;
  int64_t chunk = index[0] / kChunk;
  for (int64_t i = 0; i < n; ++i) {
    if (index[i] / kChunk != chunk) {
      prefix += chain;
      chain = 0.0;
      chunk = index[i] / kChunk;
    }
    chain += double(p[i]);
    if (prefix + chain > target) return i;
  }
  *total = prefix + chain;
  return -1;
}

// The draw from a keep-set listed in c_index / c_score[0, n).
void draw_from_list(RowJob& j, int64_t n) {
  const int32_t* index = j.c_index;
  float* score = j.c_score;
  if (j.has_uniform) {
    float* p = j.c_mass;
    kernels().exp_list(score, n, j.s_max, p);
    double total = 0.0;
    chunked_walk(index, p, n, std::numeric_limits<double>::infinity(), &total);
    const float u = explicit_uniform(j);
    const int64_t hit = u >= 1.0f ? -1 : chunked_walk(index, p, n, double(u) * total, &total);
    return finish(j, index[hit >= 0 ? hit : n - 1]);
  }
  // Gumbel-max. The first member in order (top score, lowest index) gives a
  // bound; only members that could beat it get their noise computed.
  int64_t first = 0;
  for (int64_t i = 1; i < n; ++i)
    if (score[i] > score[first]) first = i;
  const float bound =
      score[first] + nt_token_gumbel(j.seed, j.offset, j.tag, uint32_t(index[first]));
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (score[i] + NT_GUMBEL_MAX < bound) continue;
    j.r_index[m] = index[i];
    score[m] = score[i];
    ++m;
  }
  float* g = j.c_mass;
  kernels().gumbel_list(j.r_index, m, j.seed, j.offset, j.tag, g);
  Best b{-INFINITY, INT32_MAX};
  for (int64_t i = 0; i < m; ++i) {
    const float v = score[i] + g[i];
    if (v > b.value || (v == b.value && j.r_index[i] < b.index)) b = Best{v, j.r_index[i]};
  }
  finish(j, b.index);
}

void stage_constraints_done(RowJob& j) {
  if (j.p.min_p > 0.0f)
    j.keep = shorter(j.keep, PrefixEnd{minp_key(j.s_max_key, j.s_max, j.p.min_p), INT32_MAX});
  if (j.n_list >= 0) {
    const int64_t m = filter_list(j, j.n_list, j.keep);
    if (m <= kListDrawMax) return draw_from_list(j, m);
  }
  const float t = j.p.temperature;
  j.set.a = x_threshold(j.keep.key, t, j.hi);
  j.set.b = x_threshold(j.keep.key + 1, t, j.hi);
  j.set.cut = j.keep.index;
  // The bound is usable only if its token is a member.
  if (!(std::isfinite(j.bound) && in_prefix(j.s_max_key, j.stats.max_index, j.keep)))
    j.bound = -INFINITY;
  if (!j.has_uniform && std::isfinite(j.bound)) {
    // Tokens with fl(s + NT_GUMBEL_MAX) < bound cannot win: leave them out of the set.
    const float bound = j.bound;
    const uint32_t reach = first_key(NT_KEY_FIRST_FINITE, j.hi, [&](float x) {
      return nt_scaled_score(x, t) + NT_GUMBEL_MAX >= bound;
    });
    j.set.a = std::max(j.set.a, reach);
    j.set.b = std::max(j.set.b, reach);
  }
  j.next = Next::kDraw;
}

}  // namespace

// ---- stages ----------------------------------------------------------------------

nt_keep_set drawn_keep_set(const RowJob& j) {
  nt_keep_set k{NT_KEEP_EMPTY, j.p.temperature, 0u, 0};
  if (j.token < 0) return k;
  if (j.p.greedy) {
    k.kind = NT_KEEP_ONE;
  } else if (j.s_max_key == NT_KEY_POS_INF) {
    k.kind = NT_KEEP_POS_INF;
  } else {
    k.kind = NT_KEEP_PREFIX;
    k.key = j.keep.key;
    k.index = uint32_t(j.keep.index);
  }
  return k;
}

void stage_start(RowJob& j) {
  j.hi = std::isinf(j.p.temperature) ? NT_KEY_POS_INF - 1 : NT_KEY_POS_INF;
  j.compact_lo = UINT32_MAX;
  j.compact_hi = j.hi;
  j.mass_ref = NAN;
  j.n_list = -1;
  j.keep = PrefixEnd{NT_KEY_FIRST_FINITE, INT32_MAX};
  j.bound = -INFINITY;
  j.token = -1;
  j.next = Next::kScan;
  if (j.p.greedy) return;
  // Top-p alone (at a finite temperature): a candidate list and Z from the scan.
  const bool row_z = j.p.top_p < 1.0f && j.p.top_k <= 0 && !std::isinf(j.p.temperature);
  if (j.p.top_k > 0) {
    j.compact_lo = topk_pivot(j, j.p.top_k, nullptr);
  } else if (row_z) {
    const int64_t stride = std::max(kPivotStride, j.vocab / kTopPSample);
    const uint32_t lo = topk_pivot(j, kTopPCandidates, &j.mass_ref, stride);
    if (!std::isnan(j.mass_ref)) j.compact_lo = lo;
  }
}

void chunk_scan(RowJob& j, int64_t c) {
  ChunkOut& o = j.chunks[c];
  if (std::isnan(j.mass_ref))
    o.n_found = kernels().scan(j.x, chunk_begin(c), chunk_end(j, c), j.compact_lo, j.compact_hi,
                               j.c_index + chunk_begin(c), &o.stats);
  else
    o.n_found = kernels().scan_mass(j.x, chunk_begin(c), chunk_end(j, c), j.compact_lo,
                                    j.compact_hi, j.p.temperature, j.mass_ref,
                                    j.c_index + chunk_begin(c), &o.stats, &o.mass);
}

void stage_after_scan(RowJob& j) {
  ScanStats st{0u, -1};
  for (int64_t c = 0; c < j.n_chunks; ++c) {
    const ScanStats& s = j.chunks[c].stats;
    if (st.max_index < 0 || s.max_key > st.max_key) st = s;
  }
  j.stats = st;
  if (j.p.greedy) return finish(j, st.max_key == NT_KEY_NEG_INF ? -1 : st.max_index);

  const float t = j.p.temperature;
  const bool t_inf = std::isinf(t);
  int32_t bound_index = st.max_index;  // a token whose score is s_max
  if (t_inf) {
    // Every finite logit scores 0; the largest logit may be +inf, which scores NaN.
    bool any_finite = false;
    for (int64_t i = 0; i < j.vocab && !any_finite; ++i)
      any_finite = std::isfinite(j.x.at(i));
    j.s_max_key = any_finite ? nt_order_key(0.0f) : NT_KEY_NEG_INF;
    bound_index = -1;
  } else {
    j.s_max_key = score_key(nt_key_to_float(st.max_key), t);
  }
  if (j.s_max_key == NT_KEY_NEG_INF) return finish(j, -1);

  j.set = DrawSet{0u, 0u, j.hi, INT32_MAX, false, t, 0.0f, j.seed, j.offset, j.tag};
  if (j.s_max_key == NT_KEY_POS_INF) {
    // Only the tokens scoring +inf, uniformly (their scores count as 0).
    j.set.a = j.set.b = x_threshold(NT_KEY_POS_INF, t, j.hi);
    j.set.pos_inf = true;
    const float g = nt_token_gumbel(j.seed, j.offset, j.tag, uint32_t(bound_index));
    j.bound = nt_perturbed_score(INFINITY, g, 1);
    j.next = Next::kDraw;
    return;
  }
  j.s_max = nt_key_to_float(j.s_max_key);
  j.set.s_max = j.s_max;
  if (bound_index >= 0) {
    const float g = nt_token_gumbel(j.seed, j.offset, j.tag, uint32_t(bound_index));
    j.bound = nt_perturbed_score(j.s_max, g, 0);
  }

  if (j.p.top_k > 0) {
    int64_t n = gather_found(j);
    if (n < j.p.top_k) {  // the pivot was too high: list every finite score
      const uint32_t lo = x_threshold(NT_KEY_FIRST_FINITE, t, j.hi);
      ScanStats unused;
      n = kernels().scan(j.x, 0, j.vocab, lo, j.hi, j.c_index, &unused);
    }
    score_list(j, n);
    if (n > j.p.top_k) {
      const PrefixEnd e = select_prefix(j.c_key, j.c_index, nullptr, n, 0.0, double(j.p.top_k),
                                        j.r_key, j.r_index, j.r_val);
      j.keep = shorter(j.keep, e);
      n = filter_list(j, n, e);
    } else {
      j.keep = shorter(j.keep, list_end(j, n));
    }
    j.n_list = n;
  }

  j.before_list = 0.0;
  if (j.p.top_p < 1.0f) {
    if (j.n_list < 0 || j.joint) {  // needs the mass of every finite score
      bool settled = false;
      const bool z_known = !std::isnan(j.mass_ref) && topp_from_scan(j, &settled);
      if (settled) return stage_constraints_done(j);
      j.n_binned = j.n_list < 0 ? binned_estimate(j, z_known) : 0;
      j.next = Next::kMass;
      return;
    }
    topp_over_list(j, j.n_list, true);
  }
  stage_constraints_done(j);
}

void chunk_mass(RowJob& j, int64_t c) {
  double* mass = j.bin_mass + c * kMassBins;
  uint32_t* count = j.bin_count + c * kMassBins;
  std::memset(mass, 0, size_t(j.n_binned) * sizeof(double));
  std::memset(count, 0, size_t(j.n_binned) * sizeof(uint32_t));
  j.chunks[c].rest = kernels().mass_histogram(j.x, chunk_begin(c), chunk_end(j, c), j.p.temperature,
                                              j.s_max, j.n_binned, mass, count);
}

void stage_after_mass(RowJob& j) {
  double* mass = j.bin_mass;  // chunk 0's bins accumulate the others, in chunk order
  uint32_t* count = j.bin_count;
  const int binned = j.n_binned;
  for (int64_t c = 1; c < j.n_chunks; ++c)
    for (int b = 0; b < binned; ++b) {
      mass[b] += j.bin_mass[c * kMassBins + b];
      count[b] += j.bin_count[c * kMassBins + b];
    }
  double rest = 0.0;
  for (int64_t c = 0; c < j.n_chunks; ++c) rest += j.chunks[c].rest;
  j.z = std::accumulate(mass, mass + binned, 0.0) + rest;
  if (j.n_list >= 0) {  // joint mode over the top-k list
    topp_over_list(j, j.n_list, false);
    return stage_constraints_done(j);
  }
  // The bin where the mass, from the top, reaches the target (the lowest
  // non-empty one when rounding leaves it short).
  const double target = double(j.p.top_p) * j.z;
  int chosen = -1;
  bool crossed = false;
  double done = 0.0, before = 0.0;
  int64_t above = 0, above_chosen = 0;
  for (int b = 0; b < binned && !crossed; ++b) {
    if (count[b] == 0) continue;
    chosen = b;
    before = done;
    above_chosen = above;
    crossed = done + mass[b] >= target;
    done += mass[b];
    above += count[b];
  }
  if (!crossed && binned < kMassBins) {  // the target lies in the unbinned rest
    j.n_binned = kMassBins;
    j.next = Next::kMass;
    return;
  }
  j.compact_lo = x_bin_threshold(j, chosen);
  j.compact_hi = chosen == 0 ? j.hi : x_bin_threshold(j, chosen - 1) - 1;
  j.before_list = before;
  if (above_chosen + int64_t(count[chosen]) <= kListDrawMax) {
    // Few tokens at or above the bin: list them all, so the draw needs no scan.
    j.compact_hi = j.hi;
    j.before_list = 0.0;
  }
  j.next = Next::kCompact;
}

void chunk_compact(RowJob& j, int64_t c) {
  ScanStats unused;
  j.chunks[c].n_found = kernels().scan(j.x, chunk_begin(c), chunk_end(j, c), j.compact_lo,
                                       j.compact_hi, j.c_index + chunk_begin(c), &unused);
}

void stage_after_compact(RowJob& j) {
  const int64_t n = gather_found(j);
  score_list(j, n);
  topp_over_list(j, n, false);
  // The list holds the keep-set only when it starts at the top.
  j.n_list = j.compact_hi == j.hi ? n : -1;
  stage_constraints_done(j);
}

void chunk_draw(RowJob& j, int64_t c) {
  ChunkOut& o = j.chunks[c];
  if (j.has_uniform) {
    o.cum = kernels().cumulative(j.x, chunk_begin(c), chunk_end(j, c), j.set, 0.0,
                                 std::numeric_limits<double>::infinity());
  } else {
    o.best = Best{j.bound, INT32_MAX};
    kernels().gumbel_scan(j.x, chunk_begin(c), chunk_end(j, c), j.set, &o.best);
  }
}

void stage_after_draw(RowJob& j) {
  if (!j.has_uniform) {
    Best b{-INFINITY, INT32_MAX};
    for (int64_t c = 0; c < j.n_chunks; ++c) {
      const Best& o = j.chunks[c].best;
      if (o.index == INT32_MAX) continue;
      if (o.value > b.value || (o.value == b.value && o.index < b.index)) b = o;
    }
    return finish(j, b.index == INT32_MAX ? -1 : b.index);
  }
  double total = 0.0;
  int32_t last = -1;
  for (int64_t c = 0; c < j.n_chunks; ++c) {
    total += j.chunks[c].cum.total;
    if (j.chunks[c].cum.last >= 0) last = j.chunks[c].cum.last;
  }
  const float u = explicit_uniform(j);
  if (u < 1.0f) {
    const double target = double(u) * total;
    double prefix = 0.0;
    for (int64_t c = 0; c < j.n_chunks; ++c) {
      const double next = prefix + j.chunks[c].cum.total;
      if (next > target) {
        const Cumulative hit = kernels().cumulative(j.x, chunk_begin(c), chunk_end(j, c), j.set,
                                                    prefix, target);
        if (hit.hit >= 0) return finish(j, hit.hit);
        break;
      }
      prefix = next;
    }
  }
  finish(j, last);
}

}  // namespace nt::cpu::sampling
