#include "core/check.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <initializer_list>
#include <string>

#include "core/error.h"
#include "core/fused_sample.h"
#include "core/lm_head_summary.h"
#include "core/verify.h"

namespace nt {

const char* dtype_name(nt_dtype dtype) {
  switch (dtype) {
    case NT_F32: return "float32";
    case NT_F16: return "float16";
    case NT_BF16: return "bfloat16";
    case NT_I8: return "int8";
    case NT_I32: return "int32";
    case NT_I64: return "int64";
    case NT_U64: return "uint64";
    case NT_BOOL: return "bool";
  }
  return "unknown dtype";
}

size_t dtype_size(nt_dtype dtype) {
  switch (dtype) {
    case NT_F32: case NT_I32: return 4;
    case NT_F16: case NT_BF16: return 2;
    case NT_I8: case NT_BOOL: return 1;
    case NT_I64: case NT_U64: return 8;
  }
  return 0;
}

const char* device_name(nt_device_type device) {
  switch (device) {
    case NT_DEVICE_CPU: return "cpu";
    case NT_DEVICE_CUDA: return "cuda";
    case NT_DEVICE_OPENCL: return "opencl";
  }
  return "unknown device";
}

namespace {

std::string dims(const nt_tensor& t) {
  if (t.ndim == 1) return "[" + std::to_string(t.shape[0]) + "]";
  return "[" + std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[1]) + "]";
}

// Checks of one tensor argument of one operation, its device first.
class TensorCheck {
 public:
  TensorCheck(const char* op, const char* arg, const nt_tensor& t) : op_(op), arg_(arg), t_(t) {
    // Compared as int: a C caller can pass any value, and an enum outside its
    // enumerators must not reach a switch.
    const int device = static_cast<int>(t.device);
    if (device != NT_DEVICE_CPU && device != NT_DEVICE_CUDA && device != NT_DEVICE_OPENCL)
      fail_argument(op, arg, "has an unknown device type " + std::to_string(device));
    if (t.device != NT_DEVICE_OPENCL && t.byte_offset != 0)
      fail_argument(op, arg, "has byte_offset != 0; byte offsets are for OpenCL buffers only");
    if (t.byte_offset < 0) fail_argument(op, arg, "has a negative byte_offset");
  }

  TensorCheck& required() {
    if (t_.data == nullptr) fail_argument(op_, arg_, "is required but its data pointer is null");
    return *this;
  }
  TensorCheck& rank(int ndim) {
    if (t_.ndim != ndim)
      fail_argument(op_, arg_, "must be " + std::to_string(ndim) + "-D, got ndim=" +
                                   std::to_string(t_.ndim));
    if (t_.shape[0] < 0 || (ndim == 2 && t_.shape[1] < 0))
      fail_argument(op_, arg_, "has a negative dimension: " + dims(t_));
    if (ndim == 2 && t_.shape[0] > 1 && t_.row_stride < t_.shape[1])
      fail_argument(op_, arg_, "row_stride " + std::to_string(t_.row_stride) +
                                   " is smaller than its row length " + std::to_string(t_.shape[1]) +
                                   " (rows may be strided, the last dimension must be contiguous)");
    return *this;
  }
  TensorCheck& dtype(std::initializer_list<nt_dtype> allowed) {
    for (nt_dtype d : allowed)
      if (d == t_.dtype) return *this;
    std::string names;  // built only on failure: a valid call allocates nothing here
    for (nt_dtype d : allowed) {
      names += (names.empty() ? "" : " or ");
      names += dtype_name(d);
    }
    fail_argument(op_, arg_, "must be " + names + ", got " + dtype_name(t_.dtype));
  }
  TensorCheck& dim(int axis, int64_t expected, const char* meaning) {
    if (t_.shape[axis] != expected)
      fail_argument(op_, arg_, "has shape " + dims(t_) + ", expected dimension " +
                                   std::to_string(axis) + " = " + std::to_string(expected) + " (" +
                                   meaning + ")");
    return *this;
  }
  TensorCheck& same_device(const nt_tensor& ref, const char* ref_name) {
    if (t_.device != ref.device || t_.device_id != ref.device_id)
      fail_argument(op_, arg_, std::string("is on ") + device_name(t_.device) + ":" +
                                   std::to_string(t_.device_id) + " but '" + ref_name + "' is on " +
                                   device_name(ref.device) + ":" + std::to_string(ref.device_id));
    return *this;
  }

 private:
  const char* op_;
  const char* arg_;
  const nt_tensor& t_;
};

// The top-k ops' k and outputs (Args is nt_lm_head_dense_args or
// _binary_args), the outputs [M, k] on the device of the head's weights `ref`
// (argument ref_name).
template <class Args>
void check_topk(const char* op, const Args& a, const nt_tensor& ref, const char* ref_name,
                int64_t rows, int64_t vocab) {
  const int64_t limit = vocab < kMaxTopK ? vocab : kMaxTopK;
  if (a.k < 1 || a.k > limit)
    fail_argument(op, "k", "must be in [1, min(2048, V) = " + std::to_string(limit) + "], got " +
                               std::to_string(a.k));
  TensorCheck(op, "values", a.values).required().rank(2).dtype({NT_F32})
      .same_device(ref, ref_name).dim(0, rows, "M, the rows of the input").dim(1, a.k, "k");
  TensorCheck(op, "indices", a.indices).required().rank(2).dtype({NT_I64})
      .same_device(ref, ref_name).dim(0, rows, "M, the rows of the input").dim(1, a.k, "k");
}

void check_bias(const char* op, const nt_tensor& bias, const nt_tensor& ref, const char* ref_name,
                int64_t vocab) {
  if (!present(bias)) return;
  TensorCheck(op, "bias", bias).rank(1).dtype({NT_F32, NT_F16, NT_BF16}).same_device(ref, ref_name)
      .dim(0, vocab, "V");
}

// A scalar parameter in [lo, hi] ((lo, hi] when lo_open); `meaning` completes
// "must be ..." in the error. Per-row arrays are device data, never checked.
void check_scalar_f32(const char* op, const char* arg, const nt_param_f32& p, float lo,
                      bool lo_open, float hi, const char* meaning) {
  if (p.per_row != nullptr) return;
  const float v = p.scalar;
  const bool ok = !std::isnan(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  if (!ok) fail_argument(op, arg, std::string("must be ") + meaning + ", got " + std::to_string(v));
}

// The scalar sampling parameters (temperature, top_k, top_p, min_p, flags) of
// sample, verification and the fused heads: S is any of their argument structs.
template <class S>
void check_sampling(const char* op, const S& s) {
  if (s.temperature.per_row == nullptr && !(std::isfinite(s.temperature.scalar) && s.temperature.scalar >= 0.0f))
    fail_argument(op, "temperature", "must be finite and >= 0 (0 = greedy), got " +
                                         std::to_string(s.temperature.scalar));
  if (s.top_k.per_row == nullptr && s.top_k.scalar < -1)
    fail_argument(op, "top_k", "must be >= -1 (0 or -1 = off, >= V = off), got " +
                                   std::to_string(s.top_k.scalar));
  check_scalar_f32(op, "top_p", s.top_p, 0.0f, true, 1.0f, "in (0, 1] (1 = off)");
  check_scalar_f32(op, "min_p", s.min_p, 0.0f, false, 1.0f, "in [0, 1] (0 = off)");
  if ((s.flags & ~uint32_t(NT_SAMPLE_TOP_P_JOINT)) != 0)
    fail_argument(op, "flags", "has unknown bits set: " + std::to_string(s.flags));
}

// The dense head's weight [V, H], hidden [M, H] (at most 2^32-1 rows when
// rows_fit_u32) and optional bias (Args is the arguments of a dense op);
// returns V.
template <class Args>
int64_t check_dense_head(const char* op, const Args& a, bool rows_fit_u32) {
  TensorCheck(op, "weight", a.weight).required().rank(2).dtype({NT_F32, NT_F16, NT_BF16});
  const int64_t vocab = a.weight.shape[0], hidden = a.weight.shape[1];
  if (vocab < 1) fail_argument(op, "weight", "must have at least one row (V >= 1)");
  if (vocab > INT32_MAX) fail_argument(op, "weight", "has more than 2^31-1 rows");
  if (hidden < 1) fail_argument(op, "weight", "must have at least one column (H >= 1)");
  TensorCheck(op, "hidden", a.hidden).required().rank(2).dtype({a.weight.dtype})
      .same_device(a.weight, "weight").dim(1, hidden, "H, the columns of weight");
  if (rows_fit_u32 && a.hidden.shape[0] > UINT32_MAX)
    fail_argument(op, "hidden", "has more than 2^32-1 rows");
  check_bias(op, a.bias, a.weight, "weight", vocab);
  return vocab;
}

// The binary head's group_size, act_q [M, H] (at most 2^32-1 rows when
// rows_fit_u32), wq [V, H/32], act_scale [M], wscale [V, H/group_size] and
// optional bias (Args is the arguments of a binary op); returns V.
template <class Args>
int64_t check_binary_head(const char* op, const Args& a, bool rows_fit_u32) {
  const int32_t g = a.group_size;
  if (g != 32 && g != 64 && g != 128 && g != 256)
    fail_argument(op, "group_size", "must be 32, 64, 128 or 256, got " + std::to_string(g));
  TensorCheck(op, "act_q", a.act_q).required().rank(2).dtype({NT_I8});
  const int64_t rows = a.act_q.shape[0], hidden = a.act_q.shape[1];
  if (rows_fit_u32 && rows > UINT32_MAX) fail_argument(op, "act_q", "has more than 2^32-1 rows");
  if (hidden < 1 || hidden % g != 0)
    fail_argument(op, "act_q", "has H = " + std::to_string(hidden) +
                                   " columns; H must be a positive multiple of group_size " +
                                   std::to_string(g));
  TensorCheck(op, "wq", a.wq).required().rank(2).dtype({NT_I32}).same_device(a.act_q, "act_q")
      .dim(1, hidden / 32, "H/32 packed sign words");
  const int64_t vocab = a.wq.shape[0];
  if (vocab < 1) fail_argument(op, "wq", "must have at least one row (V >= 1)");
  if (vocab > INT32_MAX) fail_argument(op, "wq", "has more than 2^31-1 rows");
  TensorCheck(op, "act_scale", a.act_scale).required().rank(1).dtype({NT_F32})
      .same_device(a.act_q, "act_q").dim(0, rows, "M, the rows of act_q");
  TensorCheck(op, "wscale", a.wscale).required().rank(2).dtype({NT_F16})
      .same_device(a.act_q, "act_q").dim(0, vocab, "V, the rows of wq")
      .dim(1, hidden / g, "H/group_size");
  check_bias(op, a.bias, a.wq, "wq", vocab);
  return vocab;
}

// A logprobs request's count n and mode; `n_arg` and `mode_arg` name them.
void check_logprobs_count_mode(const char* op, int32_t n, uint32_t mode, const char* n_arg,
                               const char* mode_arg) {
  if (n < 0 || n > NT_MAX_LOGPROBS)
    fail_argument(op, n_arg, "must be in [0, " + std::to_string(NT_MAX_LOGPROBS) + "], got " + std::to_string(n));
  if (mode != NT_LOGPROBS_RAW && mode != NT_LOGPROBS_PROCESSED)
    fail_argument(op, mode_arg, "must be NT_LOGPROBS_RAW (0) or NT_LOGPROBS_PROCESSED (1), got " +
                                    std::to_string(mode));
}

// A logprobs request's count, mode and outputs (sample_logprobs, the fused
// heads and the combine): rows of the outputs = `rows`, on the device of `ref`;
// `mode_arg` names the mode.
void check_logprobs_request(const char* op, const nt_tensor& ref, const char* ref_name,
                            int64_t rows, const char* rows_name, const FusedLogprobs& lp,
                            const char* mode_arg) {
  check_logprobs_count_mode(op, lp.n, lp.mode, "num_logprobs", mode_arg);
  const int64_t columns = int64_t(lp.n) + 1;
  TensorCheck(op, "logprob_ids", lp.ids).required().rank(2).dtype({NT_I32})
      .same_device(ref, ref_name).dim(0, rows, rows_name).dim(1, columns, "num_logprobs + 1");
  TensorCheck(op, "logprobs", lp.logprobs).required().rank(2).dtype({NT_F32})
      .same_device(ref, ref_name).dim(0, rows, rows_name).dim(1, columns, "num_logprobs + 1");
  TensorCheck(op, "ranks", lp.ranks).required().rank(1).dtype({NT_I32}).same_device(ref, ref_name)
      .dim(0, rows, rows_name);
}

// Float logits [rows, V] with 1 <= V <= 2^31-1.
void check_logits(const char* op, const char* arg, const nt_tensor& t) {
  TensorCheck(op, arg, t).required().rank(2).dtype({NT_F32, NT_F16, NT_BF16});
  if (t.shape[1] < 1) fail_argument(op, arg, "must have at least one column (V >= 1)");
  if (t.shape[1] > INT32_MAX) fail_argument(op, arg, "has more than 2^31-1 columns");
}

void check_in_place_logits(const char* op, const nt_tensor& logits) {
  check_logits(op, "logits", logits);
  if (logits.shape[0] > INT32_MAX) fail_argument(op, "logits", "has more than 2^31-1 rows");
}

// A CSR list of ids per row: offsets [B+1] (i32 | i64) and ids i32 [N], or
// absent (both null) unless required. The arguments' names are literals
// ("prompt.offsets", "prompt.ids"): a valid call builds no string.
void check_token_lists(const char* op, const char* offsets, const char* ids,
                       const nt_token_lists& l, const nt_tensor& logits, bool required) {
  if (!present(l.offsets)) {
    if (required) fail_argument(op, offsets, "is required but its data pointer is null");
    if (present(l.ids))
      fail_argument(op, offsets, std::string("is null but '") + ids +
                                     "' is given (a list is absent only when both are null)");
    return;
  }
  TensorCheck(op, offsets, l.offsets).rank(1).dtype({NT_I32, NT_I64})
      .same_device(logits, "logits").dim(0, logits.shape[0] + 1, "B+1, one more than the rows of logits");
  TensorCheck(op, ids, l.ids).required().rank(1).dtype({NT_I32}).same_device(logits, "logits");
  if (l.ids.shape[0] >= kMaxListIds)
    fail_argument(op, ids, "has " + std::to_string(l.ids.shape[0]) +
                               " ids; a list holds fewer than 2^30");
}

// What both layouts (nt_verify_draft_args, nt_verify_tree_args) share: the
// target logits, sampling parameters, outputs.
template <class Args>
VerifyCall check_verify_common(const char* op, bool tree, const Args& a) {
  VerifyCall c{};
  c.op = op;
  c.tree = tree;
  const nt_tensor& target = a.target_logits;
  const nt_tensor& out_ids = a.out_ids;
  const nt_tensor& num_emitted = a.num_emitted;
  check_logits(op, "target_logits", target);
  c.vocab = target.shape[1];
  TensorCheck(op, "out_ids", out_ids).required().rank(2).dtype({NT_I32})
      .same_device(target, "target_logits");
  c.requests = out_ids.shape[0];
  c.width = out_ids.shape[1];
  if (c.requests >= NT_VERIFY_MAX_REQUESTS)
    fail_argument(op, "out_ids", "has " + std::to_string(c.requests) +
                                     " rows (requests); at most 2^19 - 1 are supported");
  if (c.width < 1 || c.width > NT_VERIFY_MAX_POSITIONS)
    fail_argument(op, "out_ids", "must have between 1 and 4096 columns, got " +
                                     std::to_string(c.width));
  TensorCheck(op, "num_emitted", num_emitted).required().rank(1).dtype({NT_I32})
      .same_device(target, "target_logits").dim(0, c.requests, "B, the rows of out_ids");
  check_sampling(op, a);
  c.target = target;
  c.temperature = a.temperature;
  c.top_k = a.top_k;
  c.top_p = a.top_p;
  c.min_p = a.min_p;
  c.seed = a.seed;
  c.offset = a.offset;
  c.joint = (a.flags & NT_SAMPLE_TOP_P_JOINT) != 0;
  c.mass_bits = nt_mass_bits(uint64_t(c.vocab));
  c.out_ids = out_ids;
  c.num_emitted = num_emitted;
  return c;
}

// The optional logprobs request, checked as sample_logprobs checks its own.
// The shard forms take theirs in the shard and refuse these fields.
void check_fused_logprobs(const char* op, const nt_tensor& ref, const char* ref_name, int64_t rows,
                          const FusedLogprobs& lp, const nt_lm_head_shard* shard) {
  if (!lp.requested()) {
    if (present(lp.logprobs) || present(lp.ranks))
      fail_argument(op, present(lp.logprobs) ? "logprobs" : "ranks",
                    "is given without logprob_ids (a logprobs request needs all three outputs)");
    return;
  }
  if (shard != nullptr)
    fail_argument(op, "logprob_ids", "must be absent in a shard call: its logprobs request is "
                                     "shard.num_logprobs / logprobs_mode / scores, and the "
                                     "combine writes the logprobs");
  check_logprobs_request(op, ref, ref_name, rows, "M, the rows of the input", lp, "logprobs_mode");
}

// The scalars every vocabulary-parallel call shares: the whole vocabulary's
// size, and the first row of `rows` (the Philox row tags).
void check_shard_rows(const char* op, int64_t vocab_size, int64_t first_row, int64_t rows) {
  if (vocab_size < 1 || vocab_size > INT32_MAX)
    fail_argument(op, "vocab_size", "must be in [1, 2^31-1], got " + std::to_string(vocab_size));
  if (first_row < 0 || first_row + rows > int64_t(UINT32_MAX) + 1)
    fail_argument(op, "first_row", "must be >= 0 with first_row + M <= 2^32, got " +
                                       std::to_string(first_row));
}

// A summary's columns: NT_LM_HEAD_SUMMARY_WORDS, K >= 1 candidates, then the
// `logprobs_words` of a logprobs request.
void check_summary_columns(const char* op, const char* name, const nt_tensor& summary,
                           int64_t logprobs_words = 0) {
  if (summary_candidates(summary, logprobs_words) >= 1) return;
  const std::string got = " columns with K >= 1, got " + std::to_string(summary.shape[1]);
  if (logprobs_words == 0) fail_argument(op, name, "must have NT_LM_HEAD_SUMMARY_WORDS + K" + got);
  fail_argument(op, name, "must have NT_LM_HEAD_SUMMARY_WORDS + K + "
                          "NT_LM_HEAD_LOGPROBS_WORDS(num_logprobs) = " +
                              std::to_string(NT_LM_HEAD_SUMMARY_WORDS) + " + K + " +
                              std::to_string(logprobs_words) + got);
}

// What the fused ops share past the head's inputs (Args is
// nt_lm_head_sample_dense_args or _binary_args, whose tensors must be on the
// device of the head's `ref`, named `ref_name`): the bitmask, the sampling
// parameters, the logprobs request, either the tokens or the shard and its
// summary, and the optional copy of the head's scores, f32 [M, V].
template <class Args>
void check_fused_rest(const char* op, const Args& a, const nt_tensor& ref, const char* ref_name,
                      int64_t rows, int64_t vocab, const nt_lm_head_shard* shard) {
  if (present(a.bitmask)) {
    TensorCheck(op, "bitmask", a.bitmask).rank(2).dtype({NT_I32}).same_device(ref, ref_name)
        .dim(0, rows, "M, the rows of the input");
    if (a.bitmask.shape[1] < 1) fail_argument(op, "bitmask", "must have at least one word per row");
  }
  check_sampling(op, a.sampling);
  check_fused_logprobs(op, ref, ref_name, rows, fused_logprobs(a), shard);
  if (shard == nullptr) {
    TensorCheck(op, "tokens", a.tokens).required().rank(1).dtype({NT_I64, NT_I32})
        .same_device(ref, ref_name).dim(0, rows, "M, the rows of the input");
  } else {
    check_shard_rows(op, shard->vocab_size, shard->first_row, rows);
    if (shard->vocab_start < 0 || shard->vocab_start > INT32_MAX - vocab)
      fail_argument(op, "vocab_start", "must be >= 0 with vocab_start + V_shard < 2^31, got " +
                                           std::to_string(shard->vocab_start));
    TensorCheck(op, "summary", shard->summary).required().rank(2).dtype({NT_I64})
        .same_device(ref, ref_name).dim(0, rows, "M, the rows of the input");
    if (shard_logprobs(*shard)) {
      check_logprobs_count_mode(op, shard->num_logprobs, shard->logprobs_mode,
                                "shard.num_logprobs", "shard.logprobs_mode");
      TensorCheck(op, "shard.scores", shard->scores).required().rank(2).dtype({NT_F32})
          .same_device(ref, ref_name).dim(0, rows, "M, the rows of the input")
          .dim(1, vocab, "V_shard, the rows of the shard's head");
    }
    check_summary_columns(op, "summary", shard->summary, shard_logprobs_words(*shard));
  }
  if (present(a.scores)) {
    TensorCheck(op, "scores", a.scores).rank(2).dtype({NT_F32}).same_device(ref, ref_name)
        .dim(0, rows, "M, the rows of the input").dim(1, vocab, "V, the rows of the head");
  }
}

}  // namespace

void check_apply_token_bitmask(const nt_apply_token_bitmask_args& a) {
  const char* op = "apply_token_bitmask";
  check_logits(op, "logits", a.logits);
  TensorCheck(op, "bitmask", a.bitmask).required().rank(2).dtype({NT_I32})
      .same_device(a.logits, "logits").dim(0, a.logits.shape[0], "B, the rows of logits");
  if (a.bitmask.shape[1] < 1) fail_argument(op, "bitmask", "must have at least one word per row");
  if (present(a.indices)) {
    TensorCheck(op, "indices", a.indices).rank(1).dtype({NT_I32, NT_I64})
        .same_device(a.logits, "logits");
  }
}

void check_bitmask_from_allowed(const nt_bitmask_from_allowed_args& a) {
  const char* op = "bitmask_from_allowed";
  TensorCheck(op, "allowed", a.allowed).required().rank(2).dtype({NT_BOOL});
  TensorCheck(op, "bitmask", a.bitmask).required().rank(2).dtype({NT_I32})
      .same_device(a.allowed, "allowed").dim(0, a.allowed.shape[0], "B")
      .dim(1, bitmask_words(a.allowed.shape[1]), "ceil(V/32)");
}

SampleCall check_sample(const nt_sample_args& a) {
  const char* op = "sample";
  check_logits(op, "logits", a.logits);
  const int64_t rows = a.logits.shape[0], vocab = a.logits.shape[1];
  if (rows > UINT32_MAX) fail_argument(op, "logits", "has more than 2^32-1 rows");
  TensorCheck(op, "tokens", a.tokens).required().rank(1).dtype({NT_I64, NT_I32})
      .same_device(a.logits, "logits").dim(0, rows, "B, the rows of logits");
  if (present(a.uniform)) {
    TensorCheck(op, "uniform", a.uniform).rank(1).dtype({NT_F32}).same_device(a.logits, "logits")
        .dim(0, rows, "B, the rows of logits");
  }
  check_sampling(op, a);

  const bool per_row = a.temperature.per_row || a.top_k.per_row || a.top_p.per_row || a.min_p.per_row;
  const nt_row_params scalar = nt_resolve_row_params(a.temperature.scalar, a.top_k.scalar,
                                                     a.top_p.scalar, a.min_p.scalar, int32_t(vocab));
  return SampleCall{a, rows, vocab, per_row, scalar, nt_row_class(scalar, present(a.uniform)),
                    present(a.uniform), (a.flags & NT_SAMPLE_TOP_P_JOINT) != 0,
                    a.tokens.dtype == NT_I32, nt_mass_bits(uint64_t(vocab))};
}

SampleLogprobsCall check_sample_logprobs(const nt_sample_logprobs_args& a) {
  const char* op = "sample_logprobs";
  const SampleCall sample = check_sample(a.sample);
  check_logprobs_request(op, a.sample.logits, "sample.logits", sample.rows, "B, the rows of logits",
                         FusedLogprobs{a.num_logprobs, a.mode, a.logprob_ids, a.logprobs, a.ranks},
                         "mode");
  return SampleLogprobsCall{sample, a, a.num_logprobs, a.mode == NT_LOGPROBS_PROCESSED};
}

void check_lm_head_dense(const nt_lm_head_dense_args& a) {
  const char* op = "lm_head_topk_dense";
  const int64_t vocab = check_dense_head(op, a, false);
  check_topk(op, a, a.weight, "weight", a.hidden.shape[0], vocab);
}

void check_lm_head_binary(const nt_lm_head_binary_args& a) {
  const char* op = "lm_head_topk_binary";
  const int64_t vocab = check_binary_head(op, a, false);
  check_topk(op, a, a.wq, "wq", a.act_q.shape[0], vocab);
}

void check_lm_head_sample_dense(const nt_lm_head_sample_dense_args& a, const nt_lm_head_shard* shard) {
  const char* op = shard ? "lm_head_shard_dense" : "lm_head_sample_dense";
  const int64_t vocab = check_dense_head(op, a, true);
  check_fused_rest(op, a, a.weight, "weight", a.hidden.shape[0], vocab, shard);
}

void check_lm_head_sample_binary(const nt_lm_head_sample_binary_args& a, const nt_lm_head_shard* shard) {
  const char* op = shard ? "lm_head_shard_binary" : "lm_head_sample_binary";
  const int64_t vocab = check_binary_head(op, a, true);
  check_fused_rest(op, a, a.act_q, "act_q", a.act_q.shape[0], vocab, shard);
}

void check_lm_head_sample_combine(const nt_lm_head_sample_combine_args& a) {
  const char* op = "lm_head_sample_combine";
  if (a.shards < 1) fail_argument(op, "shards", "must be >= 1, got " + std::to_string(a.shards));
  TensorCheck(op, "summaries", a.summaries).required().rank(2).dtype({NT_I64});
  if (a.summaries.device != NT_DEVICE_CPU)
    fail_argument(op, "summaries", "must be in host memory (device cpu)");
  if (a.summaries.shape[0] % a.shards != 0)
    fail_argument(op, "summaries", "has " + std::to_string(a.summaries.shape[0]) +
                                       " rows, not a multiple of shards = " + std::to_string(a.shards));
  const bool lp = present(a.logprob_ids);
  if (!lp && (present(a.logprobs) || present(a.ranks) || present(a.rank_keys)))
    fail_argument(op, present(a.logprobs) ? "logprobs" : present(a.ranks) ? "ranks" : "rank_keys",
                  "is given without logprob_ids (a logprobs request needs all four outputs)");
  const int64_t lp_words = lp ? NT_LM_HEAD_LOGPROBS_WORDS(int64_t(a.num_logprobs)) : 0;
  if (lp) check_logprobs_count_mode(op, a.num_logprobs, a.logprobs_mode, "num_logprobs", "logprobs_mode");
  check_summary_columns(op, "summaries", a.summaries, lp_words);
  check_sampling(op, a.sampling);
  const int64_t rows = a.summaries.shape[0] / a.shards;
  check_shard_rows(op, a.vocab_size, a.first_row, rows);
  TensorCheck(op, "tokens", a.tokens).required().rank(1).dtype({NT_I64, NT_I32})
      .same_device(a.summaries, "summaries").dim(0, rows, "M, the rows of summaries / shards");
  if (lp) {
    check_logprobs_request(op, a.summaries, "summaries", rows, "M, the rows of summaries / shards",
                           fused_logprobs(a), "logprobs_mode");
    TensorCheck(op, "rank_keys", a.rank_keys).required().rank(1).dtype({NT_I64})
        .same_device(a.summaries, "summaries").dim(0, rows, "M, the rows of summaries / shards");
  }
  // Every row must have been written with this call's request (word 7), so
  // that its candidates and logprobs words are where this call reads them.
  const int64_t want = summary::request_word(lp, a.num_logprobs, a.logprobs_mode);
  for (int64_t r = 0; r < a.summaries.shape[0]; ++r) {
    const int64_t got = static_cast<const int64_t*>(a.summaries.data)[r * a.summaries.row_stride +
                                                                        NT_LM_HEAD_SUMMARY_WORDS - 1];
    if (got != want)
      fail_argument(op, "summaries", "row " + std::to_string(r) + " was written " +
                                         (got == 0 ? std::string("without a logprobs request")
                                                   : "with another logprobs request (word 7 = " +
                                                         std::to_string(got) + ")") +
                                         (lp ? ", not this call's (num_logprobs " +
                                                   std::to_string(a.num_logprobs) + ", mode " +
                                                   std::to_string(a.logprobs_mode) + ")"
                                             : ", but this call has none"));
  }
}

void check_lm_head_shard_ranks(const nt_lm_head_shard_ranks_args& a) {
  const char* op = "lm_head_shard_ranks";
  TensorCheck(op, "scores", a.scores).required().rank(2).dtype({NT_F32});
  const int64_t rows = a.scores.shape[0];
  TensorCheck(op, "rank_keys", a.rank_keys).required().rank(1).dtype({NT_I64})
      .same_device(a.scores, "scores").dim(0, rows, "M, the rows of scores");
  TensorCheck(op, "counts", a.counts).required().rank(1).dtype({NT_I32})
      .same_device(a.scores, "scores").dim(0, rows, "M, the rows of scores");
}

void check_pack_weights(const nt_pack_weights_args& a) {
  const char* op = "pack_weights";
  TensorCheck(op, "signs", a.signs).required().rank(2).dtype({NT_I8});
  if (a.signs.shape[1] < 1 || a.signs.shape[1] % 32 != 0)
    fail_argument(op, "signs", "has H = " + std::to_string(a.signs.shape[1]) +
                                   " columns; H must be a positive multiple of 32");
  TensorCheck(op, "wq", a.wq).required().rank(2).dtype({NT_I32}).same_device(a.signs, "signs")
      .dim(0, a.signs.shape[0], "V").dim(1, a.signs.shape[1] / 32, "H/32");
}

void check_quantize_activations(const nt_quantize_activations_args& a) {
  const char* op = "quantize_activations";
  TensorCheck(op, "x", a.x).required().rank(2).dtype({NT_F32, NT_F16, NT_BF16});
  TensorCheck(op, "act_q", a.act_q).required().rank(2).dtype({NT_I8}).same_device(a.x, "x")
      .dim(0, a.x.shape[0], "M").dim(1, a.x.shape[1], "H");
  TensorCheck(op, "act_scale", a.act_scale).required().rank(1).dtype({NT_F32})
      .same_device(a.x, "x").dim(0, a.x.shape[0], "M");
}

void check_workspace(const char* op, size_t needed, const void* workspace, size_t bytes) {
  if (needed == 0) return;
  if (workspace == nullptr)
    fail(NT_ERROR_WORKSPACE, std::string(op) + ": argument 'workspace' is null but " +
                                 std::to_string(needed) + " bytes are needed");
  if (bytes < needed)
    fail(NT_ERROR_WORKSPACE, std::string(op) + ": argument 'workspace_bytes' is " +
                                 std::to_string(bytes) + " but " + std::to_string(needed) +
                                 " bytes are needed");
}

// ---- penalties and logit bias -------------------------------------------------
void check_apply_penalties(const nt_apply_penalties_args& a) {
  const char* op = "apply_penalties";
  check_in_place_logits(op, a.logits);
  check_token_lists(op, "prompt.offsets", "prompt.ids", a.prompt, a.logits, false);
  check_token_lists(op, "output.offsets", "output.ids", a.output, a.logits, false);
  check_scalar_f32(op, "repetition", a.repetition, 0.0f, true, FLT_MAX, "finite and > 0 (1 = off)");
  check_scalar_f32(op, "presence", a.presence, -FLT_MAX, false, FLT_MAX, "finite (0 = off)");
  check_scalar_f32(op, "frequency", a.frequency, -FLT_MAX, false, FLT_MAX, "finite (0 = off)");
}

void check_apply_logit_bias(const nt_apply_logit_bias_args& a) {
  const char* op = "apply_logit_bias";
  check_in_place_logits(op, a.logits);
  check_token_lists(op, "tokens.offsets", "tokens.ids", a.tokens, a.logits, true);
  TensorCheck(op, "values", a.values).required().rank(1).dtype({NT_F32})
      .same_device(a.logits, "logits").dim(0, a.tokens.ids.shape[0], "N, the length of 'tokens.ids'");
}

// ---- speculative verification ------------------------------------------------
VerifyCall check_verify_draft(const nt_verify_draft_args& a) {
  VerifyCall c = check_verify_common("verify_draft", false, a);
  const char* op = c.op;
  TensorCheck(op, "draft_ids", a.draft_ids).rank(1).dtype({NT_I32})
      .same_device(a.target_logits, "target_logits");
  c.drafts = a.draft_ids.shape[0];
  if (c.drafts > 0 && a.draft_ids.data == nullptr)
    fail_argument(op, "draft_ids", "has " + std::to_string(c.drafts) + " entries but a null data pointer");
  TensorCheck(op, "cu_num_draft", a.cu_num_draft).required().rank(1).dtype({NT_I32})
      .same_device(a.target_logits, "target_logits").dim(0, c.requests + 1, "B+1, the rows of out_ids plus one");
  TensorCheck(op, "target_logits", a.target_logits)
      .dim(0, c.drafts + c.requests, "Td + B: every draft position plus one bonus row per request");
  if (present(a.draft_probs)) {
    TensorCheck(op, "draft_probs", a.draft_probs).rank(2).dtype({NT_F32})
        .same_device(a.target_logits, "target_logits").dim(0, c.drafts, "Td, the length of draft_ids")
        .dim(1, c.vocab, "V, the columns of target_logits");
  }
  c.draft_ids = a.draft_ids;
  c.cu_num_draft = a.cu_num_draft;
  c.draft_probs = a.draft_probs;
  return c;
}

VerifyCall check_verify_tree(const nt_verify_tree_args& a) {
  VerifyCall c = check_verify_common("verify_tree", true, a);
  const char* op = c.op;
  TensorCheck(op, "candidates", a.candidates).required().rank(2).dtype({NT_I64})
      .same_device(a.target_logits, "target_logits").dim(0, c.requests, "B, the rows of out_ids");
  c.nodes = a.candidates.shape[1];
  if (c.nodes < 1 || c.nodes > NT_VERIFY_MAX_POSITIONS)
    fail_argument(op, "candidates", "must have between 1 and 4096 nodes per request, got " +
                                        std::to_string(c.nodes));
  TensorCheck(op, "retrieve_next_token", a.retrieve_next_token).required().rank(2).dtype({NT_I64})
      .same_device(a.target_logits, "target_logits").dim(0, c.requests, "B, the rows of out_ids")
      .dim(1, c.nodes, "D, the columns of candidates");
  TensorCheck(op, "retrieve_next_sibling", a.retrieve_next_sibling).required().rank(2)
      .dtype({NT_I64}).same_device(a.target_logits, "target_logits")
      .dim(0, c.requests, "B, the rows of out_ids").dim(1, c.nodes, "D, the columns of candidates");
  TensorCheck(op, "target_logits", a.target_logits)
      .dim(0, c.requests * c.nodes, "B*D: one row per tree node");
  if (present(a.out_nodes)) {
    TensorCheck(op, "out_nodes", a.out_nodes).rank(2).dtype({NT_I32})
        .same_device(a.target_logits, "target_logits").dim(0, c.requests, "B, the rows of out_ids")
        .dim(1, c.width, "S, the columns of out_ids");
  }
  c.candidates = a.candidates;
  c.next_token = a.retrieve_next_token;
  c.next_sibling = a.retrieve_next_sibling;
  c.out_nodes = a.out_nodes;
  return c;
}

}  // namespace nt
