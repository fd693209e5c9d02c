/* Helpers every nexttok OpenCL program shares (appended after the core
 * headers). OpenCL C 1.2 only: local-memory reductions, no subgroups, no
 * work-group collectives. Work-groups have at most NT_WG_MAX items; every
 * function that holds a barrier must be reached by all of them. */


/* nt_order_key (core/ordering.h) on four lanes, so that passes over a row
 * compare keys four at a time: NaN as -inf, -0 as +0, then the flip. */
static inline uint4 nt_order_key4(float4 x) {
  uint4 u = as_uint4(x);
  u = select(u, (uint4)(0xFF800000u), (u & 0x7FFFFFFFu) > 0x7F800000u);
  u = select(u, (uint4)(0u), u == 0x80000000u);
  return select(u | 0x80000000u, ~u, (u & 0x80000000u) != 0u);
}

/* Lanes whose (key, index) ranks at or before the composite cut. */
static inline int4 nt_at_or_before4(uint4 key, uint4 index, ulong cut) {
  const uint ck = (uint)(cut >> 32), ci = ~(uint)cut;
  return (key > ck) | ((key == ck) & (index <= ci));
}

/* Keys of finite scores: neither -inf (nor NaN) nor +inf. */
static inline int nt_finite_key(uint key) { return key != NT_KEY_NEG_INF && key != NT_KEY_POS_INF; }
static inline int4 nt_finite_key4(uint4 key) {
  return (key != NT_KEY_NEG_INF) & (key != NT_KEY_POS_INF);
}

/* A keep-set of sample and verify: the finite scores whose composite is >=
 * cut, or with inf_rule the +inf scores (whose score then counts as 0). Is
 * score s of token t a member? */
static inline int nt_member(float s, uint t, ulong cut, int inf_rule) {
  if (inf_rule) return s == INFINITY;
  const uint key = nt_order_key(s);
  return nt_finite_key(key) && nt_composite(key, t) >= cut;
}
/* The same on four lanes, from their keys. */
static inline int4 nt_member4(uint4 key, uint4 index, ulong cut, int inf_rule) {
  if (inf_rule) return key == NT_KEY_POS_INF;
  return nt_finite_key4(key) & nt_at_or_before4(key, index, cut);
}

/* ---- elements of the op's float tensor (NT_ELEM: 0 f32, 1 f16, 2 bf16) ---- */
#ifdef NT_ELEM
#if NT_ELEM == 0
typedef float nt_elem;
static inline float nt_widen(__global const nt_elem* p, ulong i) { return p[i]; }
static inline float4 nt_widen4(__global const nt_elem* p, ulong i) { return vload4(0, p + i); }
#elif NT_ELEM == 1
typedef ushort nt_elem;
/* vload_half widens exactly, and needs no cl_khr_fp16. */
static inline float nt_widen(__global const nt_elem* p, ulong i) {
  return vload_half(0, (__global const half*)(p + i));
}
static inline float4 nt_widen4(__global const nt_elem* p, ulong i) {
  return vload_half4(0, (__global const half*)(p + i));
}
#else
typedef ushort nt_elem;
static inline float nt_widen(__global const nt_elem* p, ulong i) { return nt_bf16_to_f32(p[i]); }
static inline float4 nt_widen4(__global const nt_elem* p, ulong i) {
  return as_float4(convert_uint4(vload4(0, p + i)) << 16);
}
#endif

/* Tokens t .. t+3 of a row of n; those past the end read as -inf, which no
 * selection ever keeps. */
static inline float4 nt_load4(__global const nt_elem* row, uint t, uint n) {
  if (t + 3u < n) return nt_widen4(row, t);
  float4 x = (float4)(-INFINITY);
  if (t < n) x.s0 = nt_widen(row, t);
  if (t + 1u < n) x.s1 = nt_widen(row, t + 1u);
  if (t + 2u < n) x.s2 = nt_widen(row, t + 2u);
  return x;
}
#endif

/* An element of an f32 / f16 / bf16 tensor whose dtype is only known at run
 * time (biases): code is the nt_dtype value. */
static inline float nt_widen_dtype(__global const uchar* base, ulong i, int code) {
  if (code == 0) return ((__global const float*)base)[i];
  const uint h = ((__global const ushort*)base)[i];
  return code == 1 ? nt_f16_to_f32(h) : nt_bf16_to_f32(h);
}

/* ---- the sampling parameters of sample and verify ----
 * Each a per-row array, read where the kernel's flags have its bit, and a
 * scalar (opencl/runtime.h's RowParams sets them). */
#define NT_PER_ROW_T 1u
#define NT_PER_ROW_K 2u
#define NT_PER_ROW_P 4u
#define NT_PER_ROW_MIN_P 8u
#define NT_PER_ROW_SEED 16u
#define NT_PER_ROW_OFFSET 32u

#define NT_ROW_PARAMS                                                                              \
  __global const float *temperature, float temperature_scalar, __global const int *top_k,          \
      int top_k_scalar, __global const float *top_p, float top_p_scalar,                           \
      __global const float *min_p, float min_p_scalar, __global const ulong *seed,                 \
      ulong seed_scalar, __global const ulong *offset, ulong offset_scalar
#define NT_ROW_PARAM_NAMES                                                                         \
  temperature, temperature_scalar, top_k, top_k_scalar, top_p, top_p_scalar, min_p,                \
      min_p_scalar, seed, seed_scalar, offset, offset_scalar

/* Row r's parameters, as core/sampling.h resolves them, and its Philox seed
 * and offset. */
typedef struct {
  nt_row_params p;
  ulong seed, offset;
} nt_row_draw;

static inline nt_row_draw nt_row_draw_of(uint r, uint flags, uint vocab, NT_ROW_PARAMS) {
  nt_row_draw d;
  d.p = nt_resolve_row_params((flags & NT_PER_ROW_T) ? temperature[r] : temperature_scalar,
                              (flags & NT_PER_ROW_K) ? top_k[r] : top_k_scalar,
                              (flags & NT_PER_ROW_P) ? top_p[r] : top_p_scalar,
                              (flags & NT_PER_ROW_MIN_P) ? min_p[r] : min_p_scalar, (int)vocab);
  d.seed = (flags & NT_PER_ROW_SEED) ? seed[r] : seed_scalar;
  d.offset = (flags & NT_PER_ROW_OFFSET) ? offset[r] : offset_scalar;
  return d;
}

/* ---- work-group reductions ----
 * Through `s`, NT_WG_MAX + 1 local entries. No barrier ever sits inside a
 * loop: PoCL turns every region between barriers into a loop over the
 * work-items, and loops of such regions make its compile time explode. One
 * item folds the (at most NT_WG_MAX) values, which costs a GPU little. */

/* The maximum of v over the work-group (the sum when `sum`), in every item. */
ulong nt_wg_fold_u64(__local ulong* s, ulong v, int sum) {
  const uint lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    ulong m = s[0];
    for (uint i = 1; i < get_local_size(0); ++i) m = sum ? m + s[i] : max(m, s[i]);
    s[NT_WG_MAX] = m;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const ulong r = s[NT_WG_MAX];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

ulong nt_wg_max_u64(__local ulong* s, ulong v) { return nt_wg_fold_u64(s, v, 0); }
ulong nt_wg_min_u64(__local ulong* s, ulong v) { return ~nt_wg_fold_u64(s, ~v, 0); }
ulong nt_wg_sum_u64(__local ulong* s, ulong v) { return nt_wg_fold_u64(s, v, 1); }

/* Exclusive prefix sum over the work-items in local-id order; *total gets the sum. */
ulong nt_wg_exclusive_sum_u64(__local ulong* s, ulong v, ulong* total) {
  const uint lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    ulong run = 0;
    for (uint i = 0; i < get_local_size(0); ++i) {
      const ulong x = s[i];
      s[i] = run;
      run += x;
    }
    s[NT_WG_MAX] = run;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const ulong r = s[lid];
  *total = s[NT_WG_MAX];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* The `keep` largest of a[0, n) into out, largest first (distinct values;
 * equal ones land on one slot): each item ranks its values by counting the
 * larger ones, a sort without barriers in loops whose O(n^2) compares stay
 * small at the list sizes used here. */
void nt_wg_rank_sort_desc(__local const ulong* a, uint n, __local ulong* out, uint keep) {
  for (uint i = get_local_id(0); i < n; i += get_local_size(0)) {
    const ulong x = a[i];
    uint rank = 0;
    for (uint j = 0; j < n; ++j) rank += a[j] > x;
    if (rank < keep) out[rank] = x;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
