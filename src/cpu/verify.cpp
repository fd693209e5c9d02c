// Speculative verification on the CPU, the oracle (docs/SEMANTICS.md,
// "Speculative verification"): requests are split over the pool, and each
// walks its positions, resolving the keep-set of a target row only when the
// walk reaches it. A row's finite scores are listed as 64-bit composite keys
// (score desc, index asc) in the worker's slot of the workspace (under a top-k
// only those at or above a sampled pivot) and sorted only as far as its cuts
// look (selection, then a sort of the selected part); the
// keep-set is a prefix of that order and its masses are the fixed-point
// integers of core/verify.h, so every decision equals the other backends'.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

#include "core/check.h"
#include "core/verify.h"
#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/thread_pool.h"

namespace nt::cpu {
namespace {

// A request's sampling parameters, resolved (core/sampling.h).
struct RequestParams {
  nt_row_params p;
  uint64_t seed, offset;
};

// One target row, resolved: greedy rows know their argmax only; sampled rows
// their keep-set (members[0, n) of the slot's list), its end and mass z.
struct TargetRow {
  const void* data;
  nt_dtype dtype;
  int64_t vocab;
  bool greedy, empty, inf_row;
  int64_t argmax;
  float temperature, s_max;
  int bits;
  uint32_t end_key;
  int64_t end_index;
  uint64_t z;
  const uint64_t* members;  // composite keys; +inf rows: index order
  int64_t n;

  float score(int64_t i) const {
    return nt_scaled_score(widen_element(data, dtype, i), temperature);
  }
  // m_x: 0 outside the keep-set (or outside [0, V)).
  uint64_t mass(int64_t x) const {
    if (x < 0 || x >= vocab || empty) return 0;
    const float s = score(x);
    if (inf_row) return s == INFINITY ? 1u : 0u;
    const uint32_t key = nt_order_key(s);
    if (s == -INFINITY || key < end_key || (key == end_key && x > end_index)) return 0;
    return nt_mass_of(s, s_max, bits);
  }
};

TargetRow resolve_row(const VerifyCall& c, int64_t r, const RequestParams& rp, uint64_t* list) {
  TargetRow t{};
  t.data = row_address(c.target, r);
  t.dtype = c.target.dtype;
  t.vocab = c.vocab;
  t.greedy = rp.p.greedy != 0;
  t.temperature = rp.p.temperature;
  t.bits = c.mass_bits;
  t.members = list;
  const int64_t V = c.vocab;
  if (t.greedy) {
    uint32_t best = NT_KEY_NEG_INF;
    t.argmax = -1;
    for (int64_t i = 0; i < V; ++i) {
      const uint32_t k = nt_order_key(widen_element(t.data, t.dtype, i));
      if (k > best) {
        best = k;
        t.argmax = i;
      }
    }
    t.empty = t.argmax < 0;
    return t;
  }
  const nt_row_params& p = rp.p;
  // Under a top-k, only the tokens at or above a pivot are listed: a score key
  // with, in expectation, a few times k tokens at or above it, estimated from
  // every 64th token (all are listed when that leaves fewer than k).
  uint32_t pivot = 0;
  if (p.top_k > 0) {
    const int64_t m = V / 64;
    const double e = double(p.top_k) / 64.0;
    const int64_t rank = int64_t(std::ceil(e + 3.0 * std::sqrt(e) + 3.0));
    if (m >= 16 && rank < m) {
      for (int64_t j = 0; j < m; ++j) list[j] = nt_order_key(t.score(j * 64 + 63));
      std::nth_element(list, list + (rank - 1), list + m, std::greater<uint64_t>());
      pivot = uint32_t(list[rank - 1]);
    }
  }
  int64_t n_fin = 0, n_inf = 0, n_list = 0;
  uint64_t top = 0, lowest = ~uint64_t(0);
  auto list_row = [&](uint32_t at_least) {
    n_fin = n_inf = n_list = 0;
    for (int64_t i = 0; i < V; ++i) {
      const float s = t.score(i);
      if (s == -INFINITY) continue;
      const uint32_t key = nt_order_key(s);
      const uint64_t c = nt_composite(key, uint32_t(i));
      ++n_fin;
      n_inf += s == INFINITY;
      top = std::max(top, c);
      lowest = std::min(lowest, c);
      if (key >= at_least) list[n_list++] = c;
    }
  };
  list_row(pivot);
  if (n_inf > 0) {  // +inf rows keep those tokens, one unit of mass each
    n_list = 0;
    for (int64_t i = 0; i < V; ++i)
      if (t.score(i) == INFINITY) list[n_list++] = nt_composite(NT_KEY_POS_INF, uint32_t(i));
    t.inf_row = true;
    t.n = n_inf;
    t.z = uint64_t(n_inf);
    t.end_key = NT_KEY_POS_INF;
    t.end_index = V - 1;
    return t;
  }
  if (n_fin == 0) {
    t.empty = true;
    return t;
  }
  const int64_t n_k = p.top_k > 0 ? std::min<int64_t>(p.top_k, n_fin) : n_fin;
  if (n_list < n_k) list_row(0);  // the pivot was above the k-th token
  t.s_max = nt_key_to_float(uint32_t(top >> 32));
  auto mass_of = [&](uint64_t c) {
    return nt_mass_of(nt_key_to_float(uint32_t(c >> 32)), t.s_max, t.bits);
  };
  if (p.top_k == 0 && p.top_p >= 1.0f && p.min_p <= 0.0f) {  // no cut: every finite token
    t.n = n_fin;
    for (int64_t j = 0; j < n_fin; ++j) t.z += mass_of(list[j]);
    t.end_key = uint32_t(lowest >> 32);
    t.end_index = int64_t(nt_composite_index(lowest));
    return t;
  }
  // The list is sorted (largest first) only as far as the cuts look:
  // list[0, n_sorted) holds its largest n_sorted composites in order. Under a
  // top-k every cut ends within the first n_k <= n_list, so a cut that runs
  // past the list is longer than the top-k's and loses to it.
  int64_t n_sorted = 0;
  auto at = [&](int64_t j) {
    if (j >= n_sorted) {
      const int64_t m = std::min(n_list, std::max({j + 1, 2 * n_sorted, int64_t(64)}));
      std::nth_element(list + n_sorted, list + (m - 1), list + n_list, std::greater<uint64_t>());
      std::sort(list + n_sorted, list + m, std::greater<uint64_t>());
      n_sorted = m;
    }
    return list[j];
  };
  int64_t n_p = n_fin;
  if (p.top_p < 1.0f) {
    if (p.top_p == 0.0f) {
      n_p = 1;
    } else {
      // Z over the top-k prefix, or over every finite token (an unordered sum).
      uint64_t zk = 0;
      if (c.joint || n_k == n_fin) {
        if (n_list == n_fin) {
          for (int64_t j = 0; j < n_fin; ++j) zk += mass_of(list[j]);
        } else {
          for (int64_t i = 0; i < V; ++i) {
            const float s = t.score(i);
            if (s != -INFINITY) zk += nt_mass_of(s, t.s_max, t.bits);
          }
        }
      } else {
        for (int64_t j = 0; j < n_k; ++j) zk += mass_of(at(j));
      }
      const uint64_t target = nt_scale_u64(zk, p.top_p, 1);
      const int64_t z_count = std::min(c.joint ? n_fin : n_k, n_list);
      uint64_t acc = 0;
      n_p = c.joint ? n_fin : n_k;
      for (int64_t j = 0; j < z_count; ++j) {
        acc += mass_of(at(j));
        if (acc >= target) {
          n_p = j + 1;
          break;
        }
      }
    }
  }
  int64_t n_m = n_fin;
  if (p.min_p > 0.0f) {
    // The leading tokens whose probability reaches min_p, up to the first
    // that does not (the portable exp is monotone only to within an ulp).
    n_m = 1;  // the top token's exp(0) = 1 >= min_p
    while (n_m < n_list &&
           nt_portable_exp(nt_key_to_float(uint32_t(at(n_m) >> 32)) - t.s_max) >= p.min_p)
      ++n_m;
  }
  t.n = std::max<int64_t>(1, std::min({n_k, n_p, n_m}));
  const uint64_t end = at(t.n - 1);
  t.end_key = uint32_t(end >> 32);
  t.end_index = int64_t(nt_composite_index(end));
  for (int64_t j = 0; j < t.n; ++j) t.z += mass_of(list[j]);
  return t;
}

// Gumbel-max from p over the keep-set without the excluded tokens; -1 if none.
int64_t draw_from_p(const TargetRow& t, const RequestParams& rp, uint32_t tag,
                    const int64_t* excluded, int64_t n_excluded) {
  int64_t best = -1;
  float best_score = 0.0f;
  for (int64_t j = 0; j < t.n; ++j) {
    const int64_t i = int64_t(nt_composite_index(t.members[j]));
    if (std::find(excluded, excluded + n_excluded, i) != excluded + n_excluded) continue;
    const float g = nt_token_gumbel(rp.seed, rp.offset, tag, uint32_t(i));
    const float v = nt_perturbed_score(t.inf_row ? 0.0f : t.score(i), g, t.inf_row);
    if (best < 0 || v > best_score || (v == best_score && i < best)) {
      best = i;
      best_score = v;
    }
  }
  return best;
}

// Gumbel-max over the residual masses max(m_i - floor(q_i z), 0); -1 if none.
int64_t draw_residual(const TargetRow& t, const RequestParams& rp, uint32_t tag, const float* q) {
  int64_t best = -1;
  float best_key = 0.0f;
  for (int64_t j = 0; j < t.n; ++j) {
    const int64_t i = int64_t(nt_composite_index(t.members[j]));
    const uint64_t m = t.inf_row ? 1u : nt_mass_of(t.score(i), t.s_max, t.bits);
    const uint64_t r = nt_verify_residual(m, q[i], t.z);
    if (r == 0) continue;
    const float v = nt_verify_residual_key(r, nt_token_gumbel(rp.seed, rp.offset, tag, uint32_t(i)));
    if (best < 0 || v > best_key || (v == best_key && i < best)) {
      best = i;
      best_key = v;
    }
  }
  return best;
}

// The bonus (or fallback) token of a row: its argmax when greedy, else from p.
int64_t bonus_token(const TargetRow& t, const RequestParams& rp, uint32_t tag) {
  return t.greedy ? t.argmax : draw_from_p(t, rp, tag, nullptr, 0);
}

template <class T>
T element(const nt_tensor& t, int64_t i) {
  return static_cast<const T*>(t.data)[i];
}

RequestParams request_params(const VerifyCall& c, int64_t b) {
  RequestParams rp;
  rp.p = row_params(c, b, c.vocab);
  rp.seed = row_param(c.seed, b);
  rp.offset = row_param(c.offset, b);
  return rp;
}

// Writes the emitted tokens of request b, -1 after them, and their number.
class Emitter {
 public:
  Emitter(const VerifyCall& c, int64_t b)
      : out_(static_cast<int32_t*>(c.out_ids.data) + b * c.out_ids.row_stride),
        nodes_(c.out_nodes.data ? static_cast<int32_t*>(c.out_nodes.data) + b * c.out_nodes.row_stride
                                : nullptr),
        width_(c.width) {}
  void emit(int64_t token, int64_t node) {
    out_[count_] = int32_t(token);
    if (nodes_) nodes_[count_] = int32_t(node);
    ++count_;
  }
  int64_t count() const { return count_; }
  void finish(const VerifyCall& c, int64_t b) {
    for (int64_t k = count_; k < width_; ++k) {
      out_[k] = -1;
      if (nodes_) nodes_[k] = -1;
    }
    static_cast<int32_t*>(c.num_emitted.data)[b] = int32_t(count_);
  }

 private:
  int32_t* out_;
  int32_t* nodes_;
  int64_t width_, count_ = 0;
};

void verify_chain(const VerifyCall& c, int64_t b, uint64_t* list) {
  const RequestParams rp = request_params(c, b);
  const bool seeds_per_request = c.seed.per_row != nullptr;
  const int64_t td = c.drafts;
  const int64_t lo = std::clamp<int64_t>(element<int32_t>(c.cu_num_draft, b), 0, td);
  const int64_t n = std::clamp<int64_t>(int64_t(element<int32_t>(c.cu_num_draft, b + 1)) - lo, 0,
                                        std::min(td - lo, c.width - 1));
  Emitter out(c, b);
  for (int64_t j = 0; j <= n; ++j) {
    const uint32_t tag = nt_verify_tag(seeds_per_request, uint32_t(b), uint32_t(j));
    const TargetRow t = resolve_row(c, lo + b + j, rp, list);
    if (t.empty) break;
    if (j == n) {
      out.emit(bonus_token(t, rp, tag), -1);
      break;
    }
    const int64_t x = element<int32_t>(c.draft_ids, lo + j);
    if (t.greedy) {
      out.emit(t.argmax, -1);
      if (x == t.argmax) continue;
      break;
    }
    const float* q = c.draft_probs.data
                         ? reinterpret_cast<const float*>(row_address(c.draft_probs, lo + j))
                         : nullptr;
    const float qx = q ? (x >= 0 && x < c.vocab ? q[x] : 0.0f) : 1.0f;
    const float u = nt_verify_accept_uniform(rp.seed, rp.offset, tag, 0);
    if (nt_verify_accepts(u, qx, t.mass(x), t.z)) {
      out.emit(x, -1);
      continue;
    }
    int64_t token = q ? draw_residual(t, rp, tag, q) : draw_from_p(t, rp, tag, &x, 1);
    if (token < 0) token = draw_from_p(t, rp, tag, nullptr, 0);
    out.emit(token, -1);
    break;
  }
  out.finish(c, b);
}

void verify_tree(const VerifyCall& c, int64_t b, uint64_t* list, int64_t* tried) {
  const RequestParams rp = request_params(c, b);
  const bool seeds_per_request = c.seed.per_row != nullptr;
  const int64_t D = c.nodes;
  const int64_t* cand = static_cast<const int64_t*>(c.candidates.data) + b * c.candidates.row_stride;
  const int64_t* first = static_cast<const int64_t*>(c.next_token.data) + b * c.next_token.row_stride;
  const int64_t* sibling =
      static_cast<const int64_t*>(c.next_sibling.data) + b * c.next_sibling.row_stride;
  auto node_or_none = [&](int64_t v) { return v >= 1 && v < D ? v : int64_t(-1); };
  Emitter out(c, b);
  int64_t node = 0;
  for (;;) {
    const uint32_t tag = nt_verify_tag(seeds_per_request, uint32_t(b), uint32_t(node));
    const TargetRow t = resolve_row(c, b * D + node, rp, list);
    if (t.empty) break;
    if (out.count() == c.width - 1) {
      out.emit(bonus_token(t, rp, tag), -1);
      break;
    }
    int64_t accepted = -1, n_tried = 0;
    uint64_t remaining = t.z;
    int64_t child = node_or_none(first[node]);
    for (int64_t k = 0; child >= 0 && k < D; ++k, child = node_or_none(sibling[child])) {
      const int64_t x = cand[child];
      if (t.greedy) {
        if (x == t.argmax) {
          accepted = child;
          break;
        }
        continue;
      }
      const bool repeated = std::find(tried, tried + n_tried, x) != tried + n_tried;
      const uint64_t m = repeated ? 0u : t.mass(x);
      const float u = nt_verify_accept_uniform(rp.seed, rp.offset, tag, uint32_t(k));
      if (nt_verify_accepts(u, 1.0f, m, remaining)) {
        accepted = child;
        break;
      }
      if (!repeated) {
        tried[n_tried++] = x;
        remaining -= m;
      }
    }
    if (accepted >= 0) {
      out.emit(cand[accepted], accepted);
      node = accepted;
      continue;
    }
    int64_t token = t.greedy ? t.argmax : draw_from_p(t, rp, tag, tried, n_tried);
    if (token < 0) token = draw_from_p(t, rp, tag, nullptr, 0);
    out.emit(token, -1);
    break;
  }
  out.finish(c, b);
}

// Per slot (one per worker): V composite keys, and D tried tokens in tree mode.
struct Layout {
  size_t list_bytes, tried_bytes, slot_bytes;
  int64_t slots;
  explicit Layout(const VerifyCall& c)
      : list_bytes(align64(size_t(c.vocab) * 8)),
        tried_bytes(c.tree ? align64(size_t(c.nodes) * 8) : 0),
        slot_bytes(list_bytes + tried_bytes),
        slots(std::min<int64_t>(c.requests, num_threads())) {}
  size_t bytes() const { return slots > 0 ? size_t(slots) * slot_bytes + kWorkspaceSlack : 0; }
};

}  // namespace

size_t CpuBackend::verify_workspace_size(const VerifyCall& c) { return Layout(c).bytes(); }

void CpuBackend::verify(const VerifyCall& c, void* workspace, size_t workspace_bytes, void*) {
  const Layout L(c);
  check_workspace(c.op, L.bytes(), workspace, workspace_bytes);
  if (c.requests == 0) return;
  char* base = align_workspace(workspace);
  parallel_for(c.requests, 1, [&](int64_t begin, int64_t end, int worker) {
    char* slot = base + size_t(worker) * L.slot_bytes;
    uint64_t* list = reinterpret_cast<uint64_t*>(slot);
    int64_t* tried = reinterpret_cast<int64_t*>(slot + L.list_bytes);
    for (int64_t b = begin; b < end; ++b) {
      if (c.tree) verify_tree(c, b, list, tried);
      else verify_chain(c, b, list);
    }
  });
}

}  // namespace nt::cpu
