#include "baselines.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <thread>


namespace baseline {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

int64_t argmax(const float* row, int64_t vocab) {
  int64_t best = -1;
  float best_value = kNegInf;
  for (int64_t i = 0; i < vocab; ++i) {
    float x = row[i];
    if (x > best_value) {  // NaN and -inf never win
      best_value = x;
      best = i;
    }
  }
  return best;
}

int64_t sort_chain_sample(const float* logits, int64_t vocab, const ChainParams& p,
                          uint64_t& rng_state, ChainScratch& c) {
  if (!(p.temperature > 0.0f) || p.top_k == 1 || vocab == 1) return argmax(logits, vocab);
  c.order.clear();
  for (int64_t i = 0; i < vocab; ++i)
    if (logits[i] == -kNegInf) c.order.emplace_back(0.0f, static_cast<int32_t>(i));
  const bool pos_inf = !c.order.empty();  // the keep-set is the +inf tokens, drawn uniformly
  if (!pos_inf) {
    for (int64_t i = 0; i < vocab; ++i) {
      float s = logits[i] / p.temperature;
      if (s == s && s != kNegInf) c.order.emplace_back(s, static_cast<int32_t>(i));
    }
    // Stable on a descending score comparison keeps equal scores in index order.
    std::stable_sort(c.order.begin(), c.order.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
  }
  const int64_t n = static_cast<int64_t>(c.order.size());
  if (n == 0) return -1;
  c.prob.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) c.prob[i] = std::exp(c.order[i].first - c.order[0].first);
  int64_t kept = n;
  if (!pos_inf) {
    const int64_t n_k = (p.top_k > 0 && p.top_k < n) ? p.top_k : n;
    int64_t n_p = n_k;
    if (p.top_p < 1.0f) {
      if (!(p.top_p > 0.0f)) {
        n_p = 1;
      } else {
        const int64_t span = p.joint ? n : n_k;
        double z = 0, cum = 0;
        for (int64_t i = 0; i < span; ++i) z += c.prob[i];
        for (n_p = 0; n_p < span && cum < double(p.top_p) * z;) cum += c.prob[n_p++];
      }
    }
    int64_t n_m = n;
    if (p.min_p > 0.0f) {
      const double threshold = std::min(1.0f, p.min_p);
      for (n_m = 0; n_m < n && c.prob[n_m] >= threshold;) ++n_m;
      n_m = std::max<int64_t>(n_m, 1);
    }
    kept = std::min({n_k, n_p, n_m});
  }
  // Exponential race: argmax p_i / E_i with E_i ~ Exp(1) picks i with
  // probability p_i / sum p, as torch's `probs / q.exponential_()` does.
  int64_t best = 0;
  double best_key = -1;
  for (int64_t i = 0; i < kept; ++i) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = ((z >> 11) + 0.5) * 0x1.0p-53;
    double key = c.prob[i] / -std::log(u);
    if (key > best_key) {
      best_key = key;
      best = i;
    }
  }
  return c.order[best].second;
}

void unpack_bitmask(const int32_t* bitmask, int64_t words, int64_t rows, int64_t vocab,
                    bool* allowed) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w * 32 < vocab; ++w) {
      uint32_t word = w < words ? static_cast<uint32_t>(bitmask[r * words + w]) : 0u;
      unsigned char* out = reinterpret_cast<unsigned char*>(allowed + r * vocab + w * 32);
      if (vocab - w * 32 >= 32) {
        for (int j = 0; j < 32; ++j) out[j] = static_cast<unsigned char>((word >> j) & 1u);
      } else {
        for (int64_t j = 0; j < vocab - w * 32; ++j) out[j] = static_cast<unsigned char>((word >> j) & 1u);
      }
    }
}

void masked_fill(void* logits, nt_dtype dtype, int64_t rows, int64_t vocab, const bool* allowed) {
  // Branch-free bit selects, which the compiler vectorizes as torch's
  // masked_fill_ is vectorized; a branch per token would mispredict on
  // random masks and make the baseline look worse than it need be.
  int64_t n = rows * vocab;
  const unsigned char* keep = reinterpret_cast<const unsigned char*>(allowed);
  if (dtype == NT_F32) {
    uint32_t* x = static_cast<uint32_t*>(logits);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t m = 0u - static_cast<uint32_t>(keep[i]);
      x[i] = (x[i] & m) | (0xFF800000u & ~m);
    }
    return;
  }
  uint16_t neg_inf = dtype == NT_BF16 ? 0xFF80u : 0xFC00u;
  uint16_t* x = static_cast<uint16_t*>(logits);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t m = static_cast<uint16_t>(0u - static_cast<uint32_t>(keep[i]));
    x[i] = static_cast<uint16_t>((x[i] & m) | (neg_inf & ~m));
  }
}

namespace {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) {
  uint32_t bits = static_cast<uint32_t>(p[i]) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Eight partial sums so the compiler can vectorize without reassociating.
template <class T>
inline __attribute__((always_inline)) float dot(const T* a, const T* b, int64_t h) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= h; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += load(a, i + j) * load(b, i + j);
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < h; ++i) s += load(a, i) * load(b, i);
  return s;
}

// Each weight row is read once and reused, from L1, for every hidden row.
template <class T>
inline __attribute__((always_inline)) void gemm_rows(const T* hidden, const T* weight, int64_t m,
                                                     int64_t v0, int64_t v1, int64_t v, int64_t h,
                                                     float* logits) {
  for (int64_t j = v0; j < v1; ++j)
    for (int64_t r = 0; r < m; ++r) logits[r * v + j] = dot(hidden + r * h, weight + j * h, h);
}

__attribute__((target_clones("arch=haswell", "default")))
void gemm_f32(const float* hidden, const float* weight, int64_t m, int64_t v0, int64_t v1,
              int64_t v, int64_t h, float* logits) {
  gemm_rows(hidden, weight, m, v0, v1, v, h, logits);
}

__attribute__((target_clones("arch=haswell", "default")))
void gemm_bf16(const uint16_t* hidden, const uint16_t* weight, int64_t m, int64_t v0, int64_t v1,
               int64_t v, int64_t h, float* logits) {
  gemm_rows(hidden, weight, m, v0, v1, v, h, logits);
}

}  // namespace

void dense_logits(const void* hidden, const void* weight, nt_dtype dtype, int64_t m, int64_t v,
                  int64_t h, float* logits, int threads) {
  auto part = [&](int64_t v0, int64_t v1) {
    if (dtype == NT_F32)
      gemm_f32(static_cast<const float*>(hidden), static_cast<const float*>(weight), m, v0, v1, v,
               h, logits);
    else
      gemm_bf16(static_cast<const uint16_t*>(hidden), static_cast<const uint16_t*>(weight), m, v0,
                v1, v, h, logits);
  };
  threads = std::max(1, threads);
  std::vector<std::thread> pool;
  int64_t chunk = (v + threads - 1) / threads;
  for (int t = 1; t < threads; ++t) {
    int64_t v0 = std::min(v, t * chunk), v1 = std::min(v, v0 + chunk);
    if (v0 < v1) pool.emplace_back(part, v0, v1);
  }
  part(0, std::min(v, chunk));
  for (auto& th : pool) th.join();
}

void topk(const float* row, int64_t vocab, int32_t k, float* values, int64_t* indices,
          std::vector<int32_t>& idx) {
  idx.resize(static_cast<size_t>(vocab));
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [row](int32_t i) { return row[i] == row[i] ? row[i] : kNegInf; };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    float ka = key(a), kb = key(b);
    return ka > kb || (ka == kb && a < b);
  });
  for (int32_t i = 0; i < k; ++i) {
    values[i] = row[idx[i]];
    indices[i] = idx[i];
  }
}

void logprobs_of_row(const float* row, int64_t vocab, int32_t n, int64_t sampled, float* logprob,
                     float* values, int64_t* ids, int32_t* rank, std::vector<int32_t>& scratch) {
  float top = kNegInf;
  for (int64_t i = 0; i < vocab; ++i) top = row[i] > top ? row[i] : top;
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i) z += row[i] == row[i] ? std::exp(double(row[i]) - top) : 0.0;
  const float log_z = static_cast<float>(top + std::log(z));
  for (int64_t i = 0; i < vocab; ++i) logprob[i] = row[i] == row[i] ? row[i] - log_z : kNegInf;
  topk(logprob, vocab, n, values, ids, scratch);
  const float own = sampled >= 0 ? logprob[sampled] : kNegInf;
  int32_t at_least = 0;
  for (int64_t i = 0; i < vocab; ++i) at_least += logprob[i] >= own;
  *rank = at_least;
}

void dense_penalties(float* row, int64_t vocab, const int32_t* prompt, int64_t n_prompt,
                     const int32_t* output, int64_t n_output, float r, float p, float f,
                     PenaltyScratch& s) {
  s.counts.assign(static_cast<size_t>(vocab), 0);
  s.in_prompt.assign(static_cast<size_t>(vocab), 0);
  for (int64_t j = 0; j < n_prompt; ++j)
    if (prompt[j] >= 0 && prompt[j] < vocab) s.in_prompt[prompt[j]] = 1;
  for (int64_t j = 0; j < n_output; ++j)
    if (output[j] >= 0 && output[j] < vocab) ++s.counts[output[j]];
  const float inv_r = 1.0f / r;
  for (int64_t t = 0; t < vocab; ++t) {
    const int32_t count = s.counts[t];
    const float scale = (s.in_prompt[t] || count > 0) ? (row[t] > 0.0f ? inv_r : r) : 1.0f;
    row[t] = row[t] * scale - f * static_cast<float>(count) - p * static_cast<float>(count > 0);
  }
}

}  // namespace baseline
