/* What the kernels of nt_sample share: a row's resolved parameters, its state
 * between kernels (kept in the workspace, a fixed size per row whatever V),
 * and the arithmetic every pass uses. */

/* From the host (opencl/sample.cpp), which sizes the workspace with them:
 * NT_LIST_CAP, the list's entries; NT_STATE_BYTES, the state's bytes per row
 * (then come NT_LIST_CAP stored composites); NT_ROW_WG, the largest
 * work-group (the histogram reduction's scratch). */
#define NT_BINS 32
#define NT_ROW_BYTES (NT_STATE_BYTES + 8 * NT_LIST_CAP)

typedef struct {
  nt_row_params p;
  int joint, has_u;
  float u;
  ulong seed, offset;
  uint tag;
  int mass_bits; /* probabilities as integers p * 2^bits, so sums are exact in any order */
} nt_row_cfg;

/* Where a row stands; each kernel works on the rows in its phase. */
#define NT_PHASE_DONE 0u
#define NT_PHASE_LADDER 1u    /* the first histogram, over every finite score */
#define NT_PHASE_LEVEL 2u     /* a finer histogram of one bin */
#define NT_PHASE_LIST 3u      /* a bin small enough to list */
#define NT_PHASE_DRAW_LIST 4u /* the keep-set is the row's stored list */
#define NT_PHASE_DRAW_ROW 5u  /* the keep-set is a threshold over the row */

/* A cut: the shortest prefix of the order whose count reaches count_target
 * or (need_mass) whose mass reaches mass_target. */
typedef struct {
  ulong count_target, mass_target;
  int need_mass; /* masses matter to the search (else only to the list) */
  int full_only; /* only a list of the whole prefix will do */
} nt_need;

/* Level kinds: the ladder bins every finite score by d = s_max - s in
 * half-octaves; keys: the keys [klo, khi] in NT_BINS equal ranges; indices:
 * the tokens whose key is klo, indices [ilo, ihi] in NT_BINS equal ranges.
 * Bin 0 always holds the tokens that rank first. */
#define NT_LEVEL_LADDER 0
#define NT_LEVEL_KEYS 1
#define NT_LEVEL_INDICES 2

typedef struct {
  int kind;
  uint klo, khi, ilo, ihi;
} nt_level;

/* One level's histogram: per bin the tokens, their mass, and the lowest and
 * highest key (index, for index levels) seen, which is where a finer level
 * over that bin starts and ends; n_min_p counts p >= min_p (ladder only). */
typedef struct {
  uint count[NT_BINS], lo[NT_BINS], hi[NT_BINS];
  uint n_min_p;
  ulong mass[NT_BINS];
} nt_hist;

typedef struct {
  nt_row_cfg c;
  uint phase;
  int top_k_first; /* searching the top-k set (its mass renormalises top-p) first */
  float s_max;
  uint s_max_key, first, n_finite;
  int inf_rule;  /* +inf scores: the keep-set is those, drawn uniformly */
  nt_need need;  /* the cut searched now */
  nt_need keep;  /* the keep-set's cut, once the top-k set is known */
  nt_level level;
  ulong above_count, above_mass; /* tokens ranked before the level's */
  ulong list_lo, list_hi;        /* composites to list */
  int list_full;                 /* ... which are the order's first ones */
  uint list_count;               /* draw from the stored list's first entries */
  ulong cut;                     /* draw over the row: composites >= cut */
  nt_hist ladder;
} nt_row_state;

typedef char nt_row_state_fits[sizeof(nt_row_state) <= NT_STATE_BYTES ? 1 : -1];

static inline __global nt_row_state* nt_state_of(__global uchar* ws, uint row) {
  return (__global nt_row_state*)(ws + (ulong)row * NT_ROW_BYTES);
}
static inline __global ulong* nt_stored_list(__global uchar* ws, uint row) {
  return (__global ulong*)(ws + (ulong)row * NT_ROW_BYTES + NT_STATE_BYTES);
}

static inline float4 nt_scores4(float4 x, float t) {
  const float4 s = x / t;
  return select(s, (float4)(-INFINITY), isnan(s));
}

/* exp(d) for d <= 0, four lanes at a time: the core's nt_portable_exp
 * (core/portable_exp.h) per lane, the CPU backend's exp, so probabilities are
 * the CPU's bit for bit on every device (a driver's exp may differ in the last
 * ulp, and PoCL's is slow). */
static inline float4 nt_exp4(float4 d) {
  return (float4)(nt_portable_exp(d.s0), nt_portable_exp(d.s1), nt_portable_exp(d.s2),
                  nt_portable_exp(d.s3));
}

static inline ulong nt_composite_mass(ulong cv, float s_max, int bits) {
  return nt_mass_of(nt_key_to_float(nt_composite_key(cv)), s_max, bits);
}

/* The explicit u of a row: NaN or negative counts as 0. */
static inline float nt_explicit_u(const nt_row_cfg* c) { return c->u >= 0.0f ? c->u : 0.0f; }
