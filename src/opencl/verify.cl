/* verify_draft / verify_tree (docs/SEMANTICS.md, "Speculative verification"):
 * one work-item per request, which walks its positions and resolves a target
 * row only when the walk reaches it. Serial and free of barriers (PoCL builds
 * such a kernel quickly, and any device runs it); the keep-set is found by
 * bisection over the 64-bit (score key, index) composites of common.cl, each
 * step a pass over the row counting tokens and summing their fixed-point masses
 * (core/verify.h), so its cut, its mass and every decision are the CPU
 * backend's exactly. Tried tree children live in the workspace, D per request.
 *
 * flags: common.cl's NT_PER_ROW_* (per-request arrays), and the layout. */
#define NT_V_JOINT 64u
#define NT_V_TREE 128u
#define NT_V_PROBS 256u
#define NT_V_NODES 512u

/* A resolved target row; cut: the keep-set is {finite tokens with composite >= cut}
 * (+inf rows: the +inf tokens). */
typedef struct {
  __global const nt_elem* x;
  uint vocab;
  int greedy, empty, inf_row;
  long argmax;
  float temperature, s_max;
  int bits;
  ulong cut, z;
} nt_vrow;

static inline float nt_vrow_score(const nt_vrow* r, uint i) {
  return nt_scaled_score(nt_widen(r->x, i), r->temperature);
}

/* Tokens at or before `cut` and their mass, over the finite scores (of a row
 * without +inf scores). */
static void nt_vrow_prefix(const nt_vrow* r, ulong cut, ulong* count, ulong* mass) {
  ulong c = 0, m = 0;
  for (uint i = 0; i < r->vocab; ++i) {
    const float s = nt_vrow_score(r, i);
    if (!nt_member(s, i, cut, 0)) continue;
    ++c;
    m += nt_mass_of(s, r->s_max, r->bits);
  }
  *count = c;
  *mass = m;
}

/* The largest cut in [lo, hi] whose prefix has at least `need` tokens (by_mass
 * = 0) or mass (by_mass = 1); the prefix at lo must qualify. */
static ulong nt_vrow_find_cut(const nt_vrow* r, ulong lo, ulong hi, int by_mass, ulong need) {
  while (lo < hi) {
    const ulong mid = lo + (hi - lo) / 2ul + 1ul;
    ulong c, m;
    nt_vrow_prefix(r, mid, &c, &m);
    if ((by_mass ? m : c) >= need) lo = mid; else hi = mid - 1ul;
  }
  return lo;
}

static nt_vrow nt_vrow_resolve(__global const nt_elem* x, uint vocab, nt_row_params p, int joint,
                               int bits) {
  nt_vrow r;
  r.x = x;
  r.vocab = vocab;
  r.greedy = p.greedy;
  r.temperature = p.temperature;
  r.bits = bits;
  r.empty = 0;
  r.inf_row = 0;
  r.argmax = -1;
  r.s_max = 0.0f;
  r.cut = 0;
  r.z = 0;
  if (r.greedy) {
    uint best = NT_KEY_NEG_INF;
    for (uint i = 0; i < vocab; ++i) {
      const uint k = nt_order_key(nt_widen(x, i));
      if (k > best) { best = k; r.argmax = (long)i; }
    }
    r.empty = r.argmax < 0;
    return r;
  }
  ulong top = 0, n_inf = 0, n_fin = 0, lowest = ~0ul;
  for (uint i = 0; i < vocab; ++i) {
    const float s = nt_vrow_score(&r, i);
    if (s == -INFINITY) continue;
    const ulong c = nt_composite(nt_order_key(s), i);
    top = max(top, c);
    lowest = min(lowest, c);
    n_inf += s == INFINITY;
    ++n_fin;
  }
  if (n_fin == 0) { r.empty = 1; return r; }
  if (n_inf > 0) {
    r.inf_row = 1;
    r.cut = nt_composite(NT_KEY_POS_INF, vocab - 1u);
    r.z = n_inf;
    return r;
  }
  r.s_max = nt_key_to_float(nt_composite_key(top));
  ulong cut = lowest, c_all, z_all;
  nt_vrow_prefix(&r, lowest, &c_all, &z_all);
  ulong z_k = z_all;
  if (p.top_k > 0 && (ulong)p.top_k < n_fin) {
    const ulong cut_k = nt_vrow_find_cut(&r, lowest, top, 0, (ulong)p.top_k);
    cut = max(cut, cut_k);
    ulong c;
    nt_vrow_prefix(&r, cut_k, &c, &z_k);
  }
  if (p.top_p < 1.0f) {
    const ulong target = nt_scale_u64(joint ? z_all : z_k, p.top_p, 1);
    cut = max(cut, p.top_p == 0.0f ? top : nt_vrow_find_cut(&r, lowest, top, 1, target));
  }
  if (p.min_p > 0.0f) {
    /* the prefix ends before the first token (the largest composite) whose
     * probability falls below min_p */
    ulong fail = 0;
    for (uint i = 0; i < vocab; ++i) {
      const float s = nt_vrow_score(&r, i);
      if (s != -INFINITY && !(nt_portable_exp(s - r.s_max) >= p.min_p))
        fail = max(fail, nt_composite(nt_order_key(s), i));
    }
    if (fail != 0) cut = max(cut, fail + 1ul);
  }
  r.cut = cut;
  ulong c;
  nt_vrow_prefix(&r, cut, &c, &r.z);
  return r;
}

/* m_x: 0 outside the keep-set or [0, V). */
static ulong nt_vrow_mass(const nt_vrow* r, long x) {
  if (r->empty || x < 0 || x >= (long)r->vocab) return 0;
  const float s = nt_vrow_score(r, (uint)x);
  if (!nt_member(s, (uint)x, r->cut, r->inf_row)) return 0;
  return r->inf_row ? 1ul : nt_mass_of(s, r->s_max, r->bits);
}

static int nt_excluded(long i, __global const long* excluded, uint n_excluded, long single) {
  if (i == single) return 1;
  for (uint k = 0; k < n_excluded; ++k)
    if (excluded[k] == i) return 1;
  return 0;
}

/* Gumbel-max from p over the keep-set without the excluded tokens; -1 if none. */
static long nt_vdraw_p(const nt_vrow* r, ulong seed, ulong offset, uint tag,
                       __global const long* excluded, uint n_excluded, long single) {
  long best = -1;
  float best_v = 0.0f;
  for (uint i = 0; i < r->vocab; ++i) {
    const float s = nt_vrow_score(r, i);
    if (!nt_member(s, i, r->cut, r->inf_row) || nt_excluded((long)i, excluded, n_excluded, single))
      continue;
    const float v = nt_perturbed_score(s, nt_token_gumbel(seed, offset, tag, i), r->inf_row);
    if (best < 0 || v > best_v) { best = (long)i; best_v = v; }
  }
  return best;
}

/* Gumbel-max over the residual masses; -1 if none. */
static long nt_vdraw_residual(const nt_vrow* r, ulong seed, ulong offset, uint tag,
                              __global const float* q) {
  long best = -1;
  float best_v = 0.0f;
  for (uint i = 0; i < r->vocab; ++i) {
    const ulong res = nt_verify_residual(nt_vrow_mass(r, (long)i), q[i], r->z);
    if (res == 0ul) continue;
    const float v = nt_verify_residual_key(res, nt_token_gumbel(seed, offset, tag, i));
    if (best < 0 || v > best_v) { best = (long)i; best_v = v; }
  }
  return best;
}

__kernel void nt_verify(
    __global const nt_elem* target, ulong target_off, ulong target_stride, uint vocab,
    uint requests, uint width, uint flags, int bits, NT_ROW_PARAMS,
    /* chain */
    __global const int* draft_ids, ulong draft_off, uint drafts, __global const int* cu,
    ulong cu_off, __global const float* probs, ulong probs_off, ulong probs_stride,
    /* tree */
    __global const long* cand, ulong cand_off, ulong cand_stride, __global const long* next,
    ulong next_off, ulong next_stride, __global const long* sib, ulong sib_off,
    ulong sib_stride, uint nodes,
    /* outputs */
    __global int* out_ids, ulong out_off, ulong out_stride, __global int* out_nodes,
    ulong nodes_off, ulong nodes_stride, __global int* num_emitted, ulong num_off,
    __global long* tried) {
  const uint b = get_global_id(0);
  if (b >= requests) return;
  const nt_row_draw d = nt_row_draw_of(b, flags, vocab, NT_ROW_PARAM_NAMES);
  const nt_row_params p = d.p;
  const ulong sd = d.seed, of = d.offset;
  const int per_request = (flags & NT_PER_ROW_SEED) != 0;
  const int joint = (flags & NT_V_JOINT) != 0;
  __global int* out = out_ids + out_off + (ulong)b * out_stride;
  __global int* out_n = (flags & NT_V_NODES) ? out_nodes + nodes_off + (ulong)b * nodes_stride : out;
  uint count = 0;

  if (!(flags & NT_V_TREE)) {
    const long td = (long)drafts;
    const long lo = clamp((long)cu[cu_off + b], 0l, td);
    const long n = clamp((long)cu[cu_off + b + 1u] - lo, 0l, min(td - lo, (long)width - 1l));
    for (long j = 0; j <= n; ++j) {
      const uint tag = nt_verify_tag(per_request, b, (uint)j);
      const nt_vrow r = nt_vrow_resolve(target + target_off + (ulong)(lo + b + j) * target_stride,
                                        vocab, p, joint, bits);
      if (r.empty) break;
      if (j == n) {
        out[count++] = (int)(r.greedy ? r.argmax : nt_vdraw_p(&r, sd, of, tag, tried, 0u, -1l));
        break;
      }
      const long x = draft_ids[draft_off + (ulong)(lo + j)];
      if (r.greedy) {
        out[count++] = (int)r.argmax;
        if (x == r.argmax) continue;
        break;
      }
      __global const float* q =
          (flags & NT_V_PROBS) ? probs + probs_off + (ulong)(lo + j) * probs_stride : probs;
      const float qx = (flags & NT_V_PROBS) ? ((x >= 0 && x < (long)vocab) ? q[x] : 0.0f) : 1.0f;
      const float u = nt_verify_accept_uniform(sd, of, tag, 0u);
      if (nt_verify_accepts(u, qx, nt_vrow_mass(&r, x), r.z)) {
        out[count++] = (int)x;
        continue;
      }
      long t = (flags & NT_V_PROBS) ? nt_vdraw_residual(&r, sd, of, tag, q)
                                    : nt_vdraw_p(&r, sd, of, tag, tried, 0u, x);
      if (t < 0) t = nt_vdraw_p(&r, sd, of, tag, tried, 0u, -1l);
      out[count++] = (int)t;
      break;
    }
  } else {
    const long D = (long)nodes;
    __global const long* cb = cand + cand_off + (ulong)b * cand_stride;
    __global const long* nb = next + next_off + (ulong)b * next_stride;
    __global const long* sb = sib + sib_off + (ulong)b * sib_stride;
    __global long* tr = tried + (ulong)b * (ulong)nodes;
    long node = 0;
    for (;;) {
      const uint tag = nt_verify_tag(per_request, b, (uint)node);
      const nt_vrow r = nt_vrow_resolve(target + target_off + (ulong)(b * D + node) * target_stride,
                                        vocab, p, joint, bits);
      if (r.empty) break;
      if (count == width - 1u) {
        if (flags & NT_V_NODES) out_n[count] = -1;
        out[count++] = (int)(r.greedy ? r.argmax : nt_vdraw_p(&r, sd, of, tag, tr, 0u, -1l));
        break;
      }
      long accepted = -1;
      uint n_tried = 0;
      ulong remaining = r.z;
      long child = nb[node];
      child = (child >= 1 && child < D) ? child : -1l;
      for (long k = 0; child >= 0 && k < D; ++k) {
        const long x = cb[child];
        if (r.greedy) {
          if (x == r.argmax) { accepted = child; break; }
        } else {
          const int repeated = nt_excluded(x, tr, n_tried, -1l);
          const ulong m = repeated ? 0ul : nt_vrow_mass(&r, x);
          const float u = nt_verify_accept_uniform(sd, of, tag, (uint)k);
          if (nt_verify_accepts(u, 1.0f, m, remaining)) { accepted = child; break; }
          if (!repeated) {
            tr[n_tried++] = x;
            remaining -= m;
          }
        }
        child = sb[child];
        child = (child >= 1 && child < D) ? child : -1l;
      }
      if (accepted >= 0) {
        if (flags & NT_V_NODES) out_n[count] = (int)accepted;
        out[count++] = (int)cb[accepted];
        node = accepted;
        continue;
      }
      long t = r.greedy ? r.argmax : nt_vdraw_p(&r, sd, of, tag, tr, n_tried, -1l);
      if (t < 0) t = nt_vdraw_p(&r, sd, of, tag, tr, 0u, -1l);
      if (flags & NT_V_NODES) out_n[count] = -1;
      out[count++] = (int)t;
      break;
    }
  }
  for (uint k = count; k < width; ++k) {
    out[k] = -1;
    if (flags & NT_V_NODES) out_n[k] = -1;
  }
  num_emitted[num_off + b] = (int)count;
}
