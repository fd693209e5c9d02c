/* nexttok: hidden state -> vocabulary scores -> grammar mask -> next token.
 *
 * The stable C ABI. Every operation takes a parameter struct of tensor views,
 * runs on the backend that owns the tensors (CPU, CUDA or OpenCL), checks every
 * argument before it launches anything, and returns a status code. On failure
 * nt_last_error() gives a message for the calling thread that names the argument.
 *
 * The semantics of each operation are fixed by docs/SEMANTICS.md.
 */
#ifndef NEXTTOK_NEXTTOK_H
#define NEXTTOK_NEXTTOK_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(NEXTTOK_BUILDING)
#    define NT_API __declspec(dllexport)
#  else
#    define NT_API
#  endif
#else
#  define NT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define NT_VERSION_MAJOR 0
#define NT_VERSION_MINOR 2
#define NT_VERSION_PATCH 0

/* ---- status codes ------------------------------------------------------ */
typedef enum nt_status {
  NT_OK = 0,
  NT_ERROR_INVALID_ARGUMENT = 1,  /* shape, dtype, stride, range: names the argument */
  NT_ERROR_UNSUPPORTED = 2,       /* valid request this backend does not implement */
  NT_ERROR_BACKEND_UNAVAILABLE = 3, /* backend not compiled in or no device/platform */
  NT_ERROR_WORKSPACE = 4,         /* workspace missing or too small */
  NT_ERROR_BACKEND = 5,           /* the CUDA / OpenCL runtime reported an error */
  NT_ERROR_INTERNAL = 6
} nt_status;

/* ---- tensors ------------------------------------------------------------- */
typedef enum nt_dtype {
  NT_F32 = 0,
  NT_F16 = 1,
  NT_BF16 = 2,
  NT_I8 = 3,
  NT_I32 = 4,
  NT_I64 = 5,
  NT_U64 = 6,
  NT_BOOL = 7 /* one byte, 0 or 1 */
} nt_dtype;

/* Values follow DLPack's DLDeviceType where one exists. */
typedef enum nt_device_type {
  NT_DEVICE_CPU = 1,
  NT_DEVICE_CUDA = 2,
  NT_DEVICE_OPENCL = 4
} nt_device_type;

/* A view of a 1-D or 2-D tensor. The last dimension is contiguous; rows may be
 * strided (row_stride in elements, >= shape[1]). For 1-D tensors shape[1] and
 * row_stride are ignored. data == NULL marks an absent optional tensor.
 * On OpenCL, data is a cl_mem and byte_offset is the view's offset in it; on CPU
 * and CUDA byte_offset must be 0 (point data at the first element instead). */
typedef struct nt_tensor {
  void* data;
  int64_t byte_offset;
  nt_dtype dtype;
  int32_t ndim;
  int64_t shape[2];
  int64_t row_stride;
  nt_device_type device;
  int32_t device_id;
} nt_tensor;

/* A sampling parameter: one scalar for every row, or a contiguous length-B array
 * resident on the logits' device (CUDA-graph friendly: the values are read at
 * run time). per_row == NULL means "use scalar". On OpenCL per_row is a cl_mem. */
typedef struct nt_param_f32 { const void* per_row; float scalar; } nt_param_f32;
typedef struct nt_param_i32 { const void* per_row; int32_t scalar; } nt_param_i32;
typedef struct nt_param_u64 { const void* per_row; uint64_t scalar; } nt_param_u64;

/* ---- grammar mask ---------------------------------------------------------- */
typedef struct nt_apply_token_bitmask_args {
  nt_tensor logits;   /* f32 | f16 | bf16 [B, V], modified in place */
  nt_tensor bitmask;  /* i32 [B', W'], bit j of word w = token 32w+j, 1 = allowed */
  nt_tensor indices;  /* optional i32 | i64 [N]: rows to mask; NULL = all rows */
} nt_apply_token_bitmask_args;

NT_API nt_status nt_apply_token_bitmask(const nt_apply_token_bitmask_args* args, void* stream);

typedef struct nt_bitmask_from_allowed_args {
  nt_tensor allowed;  /* bool [B, V] */
  nt_tensor bitmask;  /* i32 [B, ceil(V/32)], written; padding bits 0 */
} nt_bitmask_from_allowed_args;

NT_API nt_status nt_bitmask_from_allowed(const nt_bitmask_from_allowed_args* args, void* stream);

/* ---- sampling ------------------------------------------------------------ */
enum {
  NT_SAMPLE_TOP_P_JOINT = 1 /* top-p mass measured on the full distribution */
};

typedef struct nt_sample_args {
  nt_tensor logits;          /* f32 | f16 | bf16 [B, V] */
  nt_param_f32 temperature;  /* <= 0 or NaN: greedy */
  nt_param_i32 top_k;        /* <= 0 or >= V: off; 1: greedy */
  nt_param_f32 top_p;        /* >= 1 or NaN: off; <= 0: keep the top token */
  nt_param_f32 min_p;        /* <= 0 or NaN: off */
  nt_param_u64 seed;         /* per-row seeds make draws batch-position free */
  nt_param_u64 offset;       /* Philox counter offset: advance it every step */
  nt_tensor uniform;         /* optional f32 [B]: explicit inverse-CDF draw */
  uint32_t flags;            /* NT_SAMPLE_* */
  nt_tensor tokens;          /* i64 | i32 [B], written; -1 for an empty keep-set */
} nt_sample_args;

/* Bytes of workspace nt_sample needs for these arguments (may be 0): it depends
 * on the shapes and, on CUDA, on whether a row may keep more tokens than its
 * candidate lists hold (per-row parameters, or scalar top-p / min-p / explicit
 * draws without a top-k of at most 1024: about 40 KB more per row). Query with
 * per-row parameters to size one workspace for every call of a shape. The
 * workspace lives on the logits' device; nothing is allocated by the call itself. On
 * OpenCL a workspace is a cl_mem of at least that many bytes (used from offset
 * 0) in the queue's context, as for every op that takes one. */
NT_API nt_status nt_sample_workspace_size(const nt_sample_args* args, size_t* bytes);
NT_API nt_status nt_sample(const nt_sample_args* args, void* workspace,
                           size_t workspace_bytes, void* stream);

/* ---- logprobs with sample ------------------------------------------------ */
#define NT_MAX_LOGPROBS 20

enum {
  NT_LOGPROBS_RAW = 0,      /* log_softmax of the logits as given (before temperature) */
  NT_LOGPROBS_PROCESSED = 1 /* log of the distribution the token was drawn from */
};

/* nt_sample plus the log-probabilities of the sampled token and of the row's
 * num_logprobs most likely tokens (docs/SEMANTICS.md, "Logprobs"). The tokens
 * are nt_sample's for the same `sample` arguments, bit for bit. Column 0 of
 * logprob_ids / logprobs is the sampled token; columns 1..n the first n tokens
 * of the logits' order (value desc, index asc; NaN as -inf), the same ids in
 * both modes (columns past V: id -1, -inf). ranks[b]: the tokens whose
 * log-probability is >= the sampled token's. A row whose token is -1: ids -1
 * in column 0, every value -inf, rank 0. */
typedef struct nt_sample_logprobs_args {
  nt_sample_args sample;
  int32_t num_logprobs;  /* n, 0..NT_MAX_LOGPROBS */
  uint32_t mode;         /* NT_LOGPROBS_RAW | NT_LOGPROBS_PROCESSED */
  nt_tensor logprob_ids; /* i32 [B, n+1], written */
  nt_tensor logprobs;    /* f32 [B, n+1], written */
  nt_tensor ranks;       /* i32 [B], written */
} nt_sample_logprobs_args;

/* Bytes of workspace nt_sample_logprobs needs (nt_sample's for the same
 * sample arguments, plus what the logprobs pass keeps per row). */
NT_API nt_status nt_sample_logprobs_workspace_size(const nt_sample_logprobs_args* args,
                                                   size_t* bytes);
NT_API nt_status nt_sample_logprobs(const nt_sample_logprobs_args* args, void* workspace,
                                    size_t workspace_bytes, void* stream);

/* ---- LM head with exact top-k ------------------------------------------- */
typedef struct nt_lm_head_dense_args {
  nt_tensor hidden;   /* f32 | f16 | bf16 [M, H] */
  nt_tensor weight;   /* same dtype as hidden, [V, H] */
  nt_tensor bias;     /* optional f32 | f16 | bf16 [V] */
  int32_t k;          /* 1 <= k <= min(2048, V) */
  nt_tensor values;   /* f32 [M, k], written, sorted descending */
  nt_tensor indices;  /* i64 [M, k], written; ties to the lower index */
} nt_lm_head_dense_args;

NT_API nt_status nt_lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args* args,
                                                      size_t* bytes);
NT_API nt_status nt_lm_head_topk_dense(const nt_lm_head_dense_args* args, void* workspace,
                                       size_t workspace_bytes, void* stream);

typedef struct nt_lm_head_binary_args {
  nt_tensor act_q;      /* i8 [M, H] */
  nt_tensor act_scale;  /* f32 [M] */
  nt_tensor wq;         /* i32 [V, H/32], bit j of word w: sign of column 32w+j is + */
  nt_tensor wscale;     /* f16 [V, H/G] */
  nt_tensor bias;       /* optional f32 | f16 | bf16 [V] */
  int32_t group_size;   /* G in {32, 64, 128, 256}, H % G == 0 */
  int32_t k;
  nt_tensor values;     /* f32 [M, k] */
  nt_tensor indices;    /* i64 [M, k] */
} nt_lm_head_binary_args;

NT_API nt_status nt_lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args* args,
                                                       size_t* bytes);
NT_API nt_status nt_lm_head_topk_binary(const nt_lm_head_binary_args* args, void* workspace,
                                        size_t workspace_bytes, void* stream);

typedef struct nt_pack_weights_args {
  nt_tensor signs;  /* i8 [V, H], every entry -1 or +1, H % 32 == 0 */
  nt_tensor wq;     /* i32 [V, H/32], written */
} nt_pack_weights_args;

NT_API nt_status nt_pack_weights(const nt_pack_weights_args* args, void* stream);

typedef struct nt_quantize_activations_args {
  nt_tensor x;          /* f32 | f16 | bf16 [M, H] */
  nt_tensor act_q;      /* i8 [M, H], written */
  nt_tensor act_scale;  /* f32 [M], written */
} nt_quantize_activations_args;

NT_API nt_status nt_quantize_activations(const nt_quantize_activations_args* args, void* stream);

/* ---- LM head and sampling in one op (hidden -> token) ----------------------
 * The token that nt_sample returns on the head's own scores (the same
 * accumulation as nt_lm_head_topk_*) after the bitmask, for the same sampling
 * parameters, seed and offset (docs/SEMANTICS.md, "Fused hidden -> token").
 * CPU, CUDA and OpenCL. The optional `scores` output receives those scores
 * (before the bitmask), so that a caller can check the token against nt_sample. */

/* Sampling parameters of the fused op: as in nt_sample_args, per-row arrays of
 * length M on the head's device. */
typedef struct nt_lm_head_sampling {
  nt_param_f32 temperature;  /* <= 0 or NaN: greedy */
  nt_param_i32 top_k;        /* <= 0 or >= V: off; 1: greedy */
  nt_param_f32 top_p;        /* >= 1 or NaN: off; <= 0: keep the top token */
  nt_param_f32 min_p;        /* <= 0 or NaN: off */
  nt_param_u64 seed;
  nt_param_u64 offset;
  uint32_t flags;            /* NT_SAMPLE_* */
} nt_lm_head_sampling;

typedef struct nt_lm_head_sample_dense_args {
  nt_tensor hidden;             /* f32 | f16 | bf16 [M, H] */
  nt_tensor weight;             /* same dtype as hidden, [V, H] */
  nt_tensor bias;               /* optional f32 | f16 | bf16 [V] */
  nt_tensor bitmask;            /* optional i32 [M, W'], 1 = allowed, tokens >= 32*W' disallowed */
  nt_lm_head_sampling sampling;
  nt_tensor tokens;             /* i64 | i32 [M], written; -1 when a row allows no token */
  /* Optional logprobs, as nt_sample_logprobs returns them for the masked scores
   * (absent when logprob_ids.data is NULL; the single call only). The shard
   * ops take their request in nt_lm_head_shard instead and refuse these fields
   * (NT_ERROR_INVALID_ARGUMENT). */
  int32_t num_logprobs;         /* n, 0..NT_MAX_LOGPROBS */
  uint32_t logprobs_mode;       /* NT_LOGPROBS_RAW | NT_LOGPROBS_PROCESSED */
  nt_tensor logprob_ids;        /* i32 [M, n+1], written */
  nt_tensor logprobs;           /* f32 [M, n+1], written */
  nt_tensor ranks;              /* i32 [M], written */
  /* Optional: the head's f32 scores [M, V] (V_shard for the shard ops) before
   * the bitmask, written when data is not NULL. */
  nt_tensor scores;
} nt_lm_head_sample_dense_args;

typedef struct nt_lm_head_sample_binary_args {
  nt_tensor act_q;              /* i8 [M, H] */
  nt_tensor act_scale;          /* f32 [M] */
  nt_tensor wq;                 /* i32 [V, H/32] */
  nt_tensor wscale;             /* f16 [V, H/G] */
  nt_tensor bias;               /* optional f32 | f16 | bf16 [V] */
  int32_t group_size;           /* G in {32, 64, 128, 256}, H % G == 0 */
  nt_tensor bitmask;            /* optional i32 [M, W'] */
  nt_lm_head_sampling sampling;
  nt_tensor tokens;             /* i64 | i32 [M], written */
  /* Optional logprobs, as in nt_lm_head_sample_dense_args. */
  int32_t num_logprobs;
  uint32_t logprobs_mode;
  nt_tensor logprob_ids;        /* i32 [M, n+1], written */
  nt_tensor logprobs;           /* f32 [M, n+1], written */
  nt_tensor ranks;              /* i32 [M], written */
  nt_tensor scores;             /* optional f32 [M, V], as in nt_lm_head_sample_dense_args */
} nt_lm_head_sample_binary_args;

NT_API nt_status nt_lm_head_sample_dense_workspace_size(const nt_lm_head_sample_dense_args* args,
                                                        size_t* bytes);
NT_API nt_status nt_lm_head_sample_dense(const nt_lm_head_sample_dense_args* args, void* workspace,
                                         size_t workspace_bytes, void* stream);
NT_API nt_status nt_lm_head_sample_binary_workspace_size(const nt_lm_head_sample_binary_args* args,
                                                         size_t* bytes);
NT_API nt_status nt_lm_head_sample_binary(const nt_lm_head_sample_binary_args* args,
                                          void* workspace, size_t workspace_bytes, void* stream);

/* Vocabulary-parallel sampling. The head's rows are split over shards
 * (ranks) in contiguous ranges; shard r holds global ids [vocab_start,
 * vocab_start + V_r) and rows past vocab_size (padding) are never tokens. Each
 * shard writes a summary of every row (its candidates, maxima, mass and Gumbel
 * maximum: O(K) words), the summaries of all shards are gathered, and
 * nt_lm_head_sample_combine resolves the token every shard agrees on.
 * The summary is opaque: i64 [M, NT_LM_HEAD_SUMMARY_WORDS + K], K >= 1 the
 * candidates a row keeps. Here `bitmask` is the full vocabulary's mask (word w
 * holds global ids 32w..32w+31) and per-row parameters have length M. The
 * shard ops run on the CPU and CUDA backends (OpenCL answers NT_ERROR_UNSUPPORTED).
 *
 * Logprobs (optional): a shard call with a request (nt_lm_head_shard.scores
 * given) appends NT_LM_HEAD_LOGPROBS_WORDS(n) words to each summary row (its
 * normalizer, +inf count and first n tokens by score: O(n) words) and writes
 * its masked scores; the combine with the same request writes the logprobs and
 * the part of each rank the summaries settle, plus a rank key per row; each
 * shard counts its scores against those keys (nt_lm_head_shard_ranks) and the
 * counts summed over the shards (one all-reduce of M words) complete the ranks:
 * ranks[m] += sum over shards of counts[m]. */
#define NT_LM_HEAD_SUMMARY_WORDS 8
#define NT_LM_HEAD_LOGPROBS_WORDS(n) (4 + (n))

typedef struct nt_lm_head_shard {
  int64_t vocab_start;  /* global id of the shard's row 0 */
  int64_t vocab_size;   /* V of the whole (unpadded) vocabulary */
  int64_t first_row;    /* batch index of the call's row 0: the Philox row tag of a
                           scalar seed is first_row + m (0 for a whole batch) */
  nt_tensor summary;    /* i64 [M, NT_LM_HEAD_SUMMARY_WORDS + K], written; with a
                           logprobs request [M, NT_LM_HEAD_SUMMARY_WORDS + K +
                           NT_LM_HEAD_LOGPROBS_WORDS(num_logprobs)] */
  /* Optional logprobs request, absent when scores.data is NULL. */
  int32_t num_logprobs;   /* n, 0..NT_MAX_LOGPROBS */
  uint32_t logprobs_mode; /* NT_LOGPROBS_RAW | NT_LOGPROBS_PROCESSED */
  nt_tensor scores;       /* f32 [M, V_shard], written: the shard's masked scores (-inf
                             where the bitmask disallows and for padding ids), for
                             nt_lm_head_shard_ranks (on the CPU the workspace then holds no copy) */
} nt_lm_head_shard;

/* The tokens argument of `args` is ignored (may be absent); its logprobs fields
 * must be absent (NT_ERROR_INVALID_ARGUMENT naming logprob_ids): a shard's
 * request is in `shard`. */
NT_API nt_status nt_lm_head_shard_dense_workspace_size(const nt_lm_head_sample_dense_args* args,
                                                       const nt_lm_head_shard* shard,
                                                       size_t* bytes);
NT_API nt_status nt_lm_head_shard_dense(const nt_lm_head_sample_dense_args* args,
                                        const nt_lm_head_shard* shard, void* workspace,
                                        size_t workspace_bytes, void* stream);
NT_API nt_status nt_lm_head_shard_binary_workspace_size(const nt_lm_head_sample_binary_args* args,
                                                        const nt_lm_head_shard* shard,
                                                        size_t* bytes);
NT_API nt_status nt_lm_head_shard_binary(const nt_lm_head_sample_binary_args* args,
                                         const nt_lm_head_shard* shard, void* workspace,
                                         size_t workspace_bytes, void* stream);

/* A token that the gathered candidates cannot settle: the row's keep-set may
 * reach past a shard's K candidates (e.g. top-p alone on a flat row). Redo that
 * row's shards with K = the shard's rows (every token a candidate) and combine again. */
#define NT_TOKEN_NEEDS_ALL_CANDIDATES (-2)

typedef struct nt_lm_head_sample_combine_args {
  nt_tensor summaries;          /* i64 [R * M, S]: shard r's row m at r * M + m (host memory) */
  int32_t shards;               /* R >= 1 */
  int64_t vocab_size;           /* V of the whole vocabulary */
  int64_t first_row;            /* as in nt_lm_head_shard */
  nt_lm_head_sampling sampling; /* per-row arrays in host memory */
  nt_tensor tokens;             /* i64 | i32 [M], written (host memory) */
  /* Optional logprobs (absent when logprob_ids.data is NULL), host memory: the
   * summaries must come from shard calls with the same request. Layout and
   * meaning as nt_lm_head_sample_dense's. A row whose token is
   * NT_TOKEN_NEEDS_ALL_CANDIDATES gets id -2 in column 0, values -inf, rank 0
   * and rank key -1 (its fallback combine writes them). */
  int32_t num_logprobs;         /* n, 0..NT_MAX_LOGPROBS */
  uint32_t logprobs_mode;       /* NT_LOGPROBS_RAW | NT_LOGPROBS_PROCESSED */
  nt_tensor logprob_ids;        /* i32 [M, n+1], written */
  nt_tensor logprobs;           /* f32 [M, n+1], written */
  nt_tensor ranks;              /* i32 [M], written: the part of the rank the summaries
                                   settle; add every shard's nt_lm_head_shard_ranks count */
  nt_tensor rank_keys;          /* i64 [M], written: what the shards count (-1: nothing) */
} nt_lm_head_sample_combine_args;

NT_API nt_status nt_lm_head_sample_combine(const nt_lm_head_sample_combine_args* args);

/* A shard's part of the ranks: counts[m] = the entries of scores row m whose
 * ordering key (docs/SEMANTICS.md, "Ordering and ties") lies in
 * [(uint64_t)rank_keys[m] & 0xFFFFFFFF, (uint64_t)rank_keys[m] >> 32] (-1 counts
 * nothing). All three on the shard's device (CPU and CUDA), on `stream`. */
typedef struct nt_lm_head_shard_ranks_args {
  nt_tensor scores;     /* f32 [M, V_shard]: the shard call's nt_lm_head_shard.scores */
  nt_tensor rank_keys;  /* i64 [M]: the combine's */
  nt_tensor counts;     /* i32 [M], written */
} nt_lm_head_shard_ranks_args;

NT_API nt_status nt_lm_head_shard_ranks(const nt_lm_head_shard_ranks_args* args, void* stream);

/* ---- penalties and logit bias (in place, before sampling) --------------------
 * Work is proportional to the ids, never to V. Order of a decode step: bitmask,
 * logit bias, penalties, sample. Semantics: docs/SEMANTICS.md. */

/* Token ids per row in CSR form: row b's ids are ids[offsets[b] .. offsets[b+1]).
 * The offsets live on the logits' device and are read at run time, so they are
 * never checked on the host: offsets outside [0, N] are clamped and a row whose
 * offsets decrease is empty. Ids outside [0, V) are skipped. A list is absent
 * when offsets.data == NULL (ids.data must then be NULL too). */
typedef struct nt_token_lists {
  nt_tensor offsets;  /* i32 | i64 [B+1] */
  nt_tensor ids;      /* i32 [N], N < 2^30 */
} nt_token_lists;

typedef struct nt_apply_penalties_args {
  nt_tensor logits;         /* f32 | f16 | bf16 [B, V], modified in place */
  nt_token_lists prompt;    /* optional: the prompt's ids of each row */
  nt_token_lists output;    /* optional: the ids generated so far, repeats included */
  nt_param_f32 repetition;  /* finite, > 0; 1 = off. On prompt or output tokens:
                               x > 0 ? x / r : x * r (once per token) */
  nt_param_f32 presence;    /* finite; 0 = off. x -= presence if count_out > 0 */
  nt_param_f32 frequency;   /* finite; 0 = off. x -= frequency * count_out */
} nt_apply_penalties_args;

/* Bytes of workspace (from the shapes only: the ids' lengths; 0 on the CPU).
 * Rows whose ids do not fit the device's on-chip table use it. */
NT_API nt_status nt_apply_penalties_workspace_size(const nt_apply_penalties_args* args,
                                                   size_t* bytes);
NT_API nt_status nt_apply_penalties(const nt_apply_penalties_args* args, void* workspace,
                                    size_t workspace_bytes, void* stream);

typedef struct nt_apply_logit_bias_args {
  nt_tensor logits;       /* f32 | f16 | bf16 [B, V], modified in place */
  nt_token_lists tokens;  /* the biased ids of each row (required) */
  nt_tensor values;       /* f32 [N]: x[b, ids[i]] += values[i]; repeats add in entry order */
} nt_apply_logit_bias_args;

NT_API nt_status nt_apply_logit_bias_workspace_size(const nt_apply_logit_bias_args* args,
                                                    size_t* bytes);
NT_API nt_status nt_apply_logit_bias(const nt_apply_logit_bias_args* args, void* workspace,
                                     size_t workspace_bytes, void* stream);

/* ---- speculative verification -------------------------------------------------
 * Which draft tokens the target model accepts, and the token after them, so
 * that every emitted token follows the target's sampling distribution
 * (temperature, top-k, top-p, min-p) at its position. Parameters are per
 * request (a scalar or a [B] array on the target's device). Semantics, Philox
 * streams and the safe meaning of malformed offsets and trees:
 * docs/SEMANTICS.md, "Speculative verification". */

/* Chains of drafts, vLLM's layout: request b owns draft rows cu[b] .. cu[b+1]-1
 * and target rows cu[b]+b .. cu[b+1]+b (its draft positions and a bonus row). */
typedef struct nt_verify_draft_args {
  nt_tensor target_logits;   /* f32 | f16 | bf16 [Td + B, V] */
  nt_tensor draft_ids;       /* i32 [Td] */
  nt_tensor cu_num_draft;    /* i32 [B+1]: request b's drafts are cu[b] .. cu[b+1]-1 */
  nt_tensor draft_probs;     /* optional f32 [Td, V]; absent: q one-hot (n-gram drafts) */
  nt_param_f32 temperature;  /* <= 0 or NaN: greedy (accept while draft == argmax) */
  nt_param_i32 top_k;
  nt_param_f32 top_p;
  nt_param_f32 min_p;
  nt_param_u64 seed;         /* per-request seeds make results batch-position free */
  nt_param_u64 offset;
  uint32_t flags;            /* NT_SAMPLE_TOP_P_JOINT */
  nt_tensor out_ids;         /* i32 [B, max_draft + 1], written: emitted tokens, then -1 */
  nt_tensor num_emitted;     /* i32 [B], written */
} nt_verify_draft_args;

/* Bytes of workspace (from the shapes; on the target's device). */
NT_API nt_status nt_verify_draft_workspace_size(const nt_verify_draft_args* args, size_t* bytes);
NT_API nt_status nt_verify_draft(const nt_verify_draft_args* args, void* workspace,
                                 size_t workspace_bytes, void* stream);

/* Token trees, EAGLE / SGLang's layout: node d of request b holds token
 * candidates[b, d] (node 0 is the root, already emitted); target row b*D + d is
 * the distribution of the token after node d. The walk accepts, level by level,
 * the first child that verifies. */
typedef struct nt_verify_tree_args {
  nt_tensor target_logits;          /* f32 | f16 | bf16 [B*D, V] */
  nt_tensor candidates;             /* i64 [B, D] */
  nt_tensor retrieve_next_token;    /* i64 [B, D]: first child of node d, -1 none */
  nt_tensor retrieve_next_sibling;  /* i64 [B, D]: next sibling of node d, -1 none */
  nt_param_f32 temperature;
  nt_param_i32 top_k;
  nt_param_f32 top_p;
  nt_param_f32 min_p;
  nt_param_u64 seed;
  nt_param_u64 offset;
  uint32_t flags;                   /* NT_SAMPLE_TOP_P_JOINT */
  nt_tensor out_ids;                /* i32 [B, S], written: emitted tokens, then -1 */
  nt_tensor out_nodes;              /* optional i32 [B, S]: node of each accepted token, else -1 */
  nt_tensor num_emitted;            /* i32 [B], written */
} nt_verify_tree_args;

NT_API nt_status nt_verify_tree_workspace_size(const nt_verify_tree_args* args, size_t* bytes);
NT_API nt_status nt_verify_tree(const nt_verify_tree_args* args, void* workspace,
                                size_t workspace_bytes, void* stream);

/* ---- library ------------------------------------------------------------- */
/* The message of the last failed call on this thread ("" after a success). */
NT_API const char* nt_last_error(void);
NT_API const char* nt_status_string(nt_status status);
NT_API const char* nt_version_string(void);

/* Whether a backend is compiled in and has a usable device. */
NT_API int nt_backend_available(nt_device_type device);

/* CPU backend threads (0 = hardware concurrency). Not thread-safe with running ops. */
NT_API nt_status nt_cpu_set_num_threads(int32_t n);
NT_API int32_t nt_cpu_num_threads(void);

/* OpenCL: every call takes a cl_command_queue as its stream and runs on that
 * queue's device; every tensor, per-row array and workspace is a cl_mem of the
 * queue's context (device_id need only agree between tensors). Kernels are built from sources
 * compiled into the library at first use in a context, with
 * -cl-fp32-correctly-rounded-divide-sqrt; a device without correctly rounded
 * division is refused with NT_ERROR_UNSUPPORTED. */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NEXTTOK_NEXTTOK_H */
