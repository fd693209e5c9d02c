/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy
 * as 1, 2, 3", SC'11) and the mapping of its words to uniform floats in (0, 1).
 * Counter-based: any token's draw is a pure function of (seed, row, offset, i),
 * which is what makes sampling replayable and batch-position independent. */
#ifndef NEXTTOK_CORE_PHILOX_H
#define NEXTTOK_CORE_PHILOX_H

#include "portable.h"

#define NT_PHILOX_M0 0xD2511F53u
#define NT_PHILOX_M1 0xCD9E8D57u
#define NT_PHILOX_W0 0x9E3779B9u
#define NT_PHILOX_W1 0xBB67AE85u

typedef struct nt_philox_block { nt_u32 v[4]; } nt_philox_block;

/* Each round's products as a low multiply and a high one, which nvcc fuses
 * into one wide multiply with no extra instruction (Philox is most of a
 * plainly sampled token's cost). */
NT_FN nt_philox_block nt_philox4x32_10(nt_u32 c0, nt_u32 c1, nt_u32 c2, nt_u32 c3,
                                       nt_u32 k0, nt_u32 k1) {
  for (int round = 0; round < 10; ++round) {
    const nt_u32 hi0 = nt_mulhi_u32(NT_PHILOX_M0, c0), lo0 = NT_PHILOX_M0 * c0;
    const nt_u32 hi1 = nt_mulhi_u32(NT_PHILOX_M1, c2), lo1 = NT_PHILOX_M1 * c2;
    const nt_u32 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += NT_PHILOX_W0; k1 += NT_PHILOX_W1;
  }
  nt_philox_block out;
  out.v[0] = c0; out.v[1] = c1; out.v[2] = c2; out.v[3] = c3;
  return out;
}

/* ((x >> 9) + 0.5) * 2^-23: 2^23 evenly spaced values, each exact in fp32,
 * never 0 and never 1, so both logs of the Gumbel transform stay finite. */
NT_FN float nt_uniform_from_bits(nt_u32 x) {
  return ((float)(x >> 9) + 0.5f) * 1.1920928955078125e-7f;
}

/* The four uniforms of one Philox block serve tokens 4c .. 4c+3 of a row. */
NT_FN nt_philox_block nt_token_block(nt_u64 seed, nt_u64 offset, nt_u32 row_tag,
                                     nt_u32 block_index) {
  return nt_philox4x32_10(block_index, row_tag, (nt_u32)offset, (nt_u32)(offset >> 32),
                          (nt_u32)seed, (nt_u32)(seed >> 32));
}

NT_FN float nt_token_uniform(nt_u64 seed, nt_u64 offset, nt_u32 row_tag, nt_u32 token) {
  nt_philox_block b = nt_token_block(seed, offset, row_tag, token >> 2);
  return nt_uniform_from_bits(b.v[token & 3u]);
}

#endif /* NEXTTOK_CORE_PHILOX_H */
