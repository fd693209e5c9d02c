/* Total order used by every selection in nexttok: scores descending, then token
 * index ascending. Selections work on 32-bit ordering keys so that radix select
 * and histogram refinement can treat floats as unsigned integers. */
#ifndef NEXTTOK_CORE_ORDERING_H
#define NEXTTOK_CORE_ORDERING_H

#include "portable.h"

/* Monotone map float -> u32: a < b (as floats) iff key(a) < key(b). NaN maps to
 * the key of -inf (NaN scores never win) and -0 to the key of +0 (they compare
 * equal, so the tie rule, not the sign bit, must decide between them). */
NT_FN nt_u32 nt_order_key(float x) {
  nt_u32 u = nt_as_u32(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) u = 0xFF800000u; /* NaN -> -inf */
  if (u == 0x80000000u) u = 0u;                          /* -0 -> +0 */
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

NT_FN float nt_key_to_float(nt_u32 k) {
  return nt_as_f32((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

/* Key of -inf: every NaN or -inf score has this key and is never selectable. */
#define NT_KEY_NEG_INF 0x007FFFFFu
/* Key of +inf, and the smallest key of a finite score. */
#define NT_KEY_POS_INF 0xFF800000u
#define NT_KEY_FIRST_FINITE (NT_KEY_NEG_INF + 1u)

/* True when (key_a, a) comes before (key_b, b): higher key first, lower index on ties. */
NT_FN int nt_ranks_before(nt_u32 key_a, nt_i32 a, nt_u32 key_b, nt_i32 b) {
  return key_a > key_b || (key_a == key_b && a < b);
}

/* The same order as one integer: (key << 32) | ~index, larger first (key
 * descending, then index ascending); distinct for distinct tokens. */
NT_FN nt_u64 nt_composite(nt_u32 key, nt_u32 index) { return ((nt_u64)key << 32) | (nt_u64)(~index); }
NT_FN nt_u32 nt_composite_key(nt_u64 c) { return (nt_u32)(c >> 32); }
NT_FN nt_u32 nt_composite_index(nt_u64 c) { return ~(nt_u32)c; }

#endif /* NEXTTOK_CORE_ORDERING_H */
