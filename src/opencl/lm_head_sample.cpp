// lm_head_sample_dense / _binary on OpenCL: the head's scores written into the
// workspace by one work-item a score, with the arithmetic of the top-k heads
// (lm_head_sample_*.cl), then masked in place by apply_token_bitmask and
// sampled by sample (by sample_logprobs when logprobs are requested), all on
// the call's in-order queue. The token is therefore the one nt_sample returns
// on those masked scores, as on the CPU. Workspace (one cl_mem): from offset 0
// first the dense head's hidden rows widened to f32 (read by the scoring
// kernel only), later the sampler's workspace; then the [M, V] scores (copied
// to the `scores` output when one is given). The shard form
// (vocabulary-parallel summaries) is not implemented on OpenCL.
#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/fused_sample.h"
#include "opencl/lm_head_plan.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt::opencl {
namespace {

struct FusedLayout {
  size_t sample_bytes, scores_at, bytes;
};

// The sample call on the scores, which fused_draw masks in place and samples
// into the tokens (and the logprobs when requested).
nt_sample_args sample_args(void* ws, size_t scores_at, const nt_tensor& like, int64_t rows,
                           int64_t vocab, const nt_lm_head_sampling& s, const nt_tensor& tokens) {
  return fused_sample_args(
      scores_matrix(ws, rows, vocab, NT_DEVICE_OPENCL, like.device_id, int64_t(scores_at)), s,
      tokens);
}

FusedLayout fused_layout(OpenclBackend& b, const nt_tensor& like, int64_t rows, int64_t vocab,
                         size_t widened_floats, const nt_lm_head_sampling& s, const nt_tensor& tokens,
                         const FusedLogprobs& lp) {
  FusedLayout L;
  L.sample_bytes = b.fused_draw_workspace_size(
      sample_args(placeholder_scores(), 0, like, rows, vocab, s, tokens), lp);
  L.scores_at = round_up(std::max(L.sample_bytes, widened_floats * 4), 256);
  L.bytes = L.scores_at + size_t(rows) * size_t(vocab) * 4;
  return L;
}

[[noreturn]] void no_shards(const char* op) {
  fail(NT_ERROR_UNSUPPORTED, std::string(op) + ": not implemented on the opencl backend "
                             "(vocabulary-parallel summaries: CPU and CUDA)");
}

// The scores, before the mask, into the caller's `scores` output when given.
void copy_scores(const char* op, const Queue& q, const cl::Buffer& ws, const FusedLayout& L,
                 const nt_tensor& out, size_t rows, size_t vocab) {
  if (!present(out)) return;
  const View dst = view(op, "scores", q, out);
  const size_t row_bytes = vocab * 4;
  const size_t dst_pitch = std::max(size_t(out.row_stride), vocab) * 4;
  q.queue.enqueueCopyBufferRect(ws, dst.buffer, {L.scores_at, 0, 0}, {size_t(dst.offset) * 4, 0, 0},
                                {row_bytes, rows, 1}, row_bytes, 0, dst_pitch, 0);
}

}  // namespace

size_t OpenclBackend::lm_head_sample_dense_workspace_size(const nt_lm_head_sample_dense_args& a,
                                                          const nt_lm_head_shard* shard) {
  if (shard) no_shards("lm_head_shard_dense");
  const int64_t rows = a.hidden.shape[0];
  if (rows == 0) return 0;
  const size_t widened = round_up(size_t(rows), 4) * round_up(size_t(a.weight.shape[1]), 8);
  return fused_layout(*this, a.weight, rows, a.weight.shape[0], widened, a.sampling, a.tokens,
                      fused_logprobs(a)).bytes;
}

void OpenclBackend::lm_head_sample_dense(const nt_lm_head_sample_dense_args& a,
                                         const nt_lm_head_shard* shard, void* workspace,
                                         size_t workspace_bytes, void* stream) {
  const char* op = "lm_head_sample_dense";
  if (shard) no_shards("lm_head_shard_dense");
  const Queue q = queue_of(op, stream);
  const size_t rows = size_t(a.hidden.shape[0]), columns = size_t(a.weight.shape[1]);
  const size_t vocab = size_t(a.weight.shape[0]), h8 = round_up(columns, 8);
  const FusedLayout L = fused_layout(*this, a.weight, int64_t(rows), int64_t(vocab),
                                     round_up(rows, 4) * h8, a.sampling, a.tokens, fused_logprobs(a));
  guarded(op, [&] {
    const View hidden = view(op, "hidden", q, a.hidden);
    const View weight = view(op, "weight", q, a.weight);
    const View bias = present(a.bias) ? view(op, "bias", q, a.bias) : View{};
    if (rows == 0) return;
    const cl::Buffer ws = opencl::workspace(op, q, workspace, workspace_bytes, L.bytes);
    const ProgramSpec spec{{"topk_select.cl", "lm_head_topk_dense.cl", "lm_head_sample_dense.cl"},
                           "-DNT_ELEM=" + std::to_string(int(a.weight.dtype)) +
                               " -DNT_MB_MAX=" + std::to_string(kMaxHeadRows)};
    cl::Kernel widen = kernel(op, q, spec, "nt_dense_widen_hidden");
    cl::Kernel scores = kernel(op, q, spec, "nt_dense_write_scores");
    set_args(widen, hidden, cl_ulong(a.hidden.row_stride), cl_uint(columns), cl_uint(h8),
             cl_uint(rows), cl_uint(0), cl_uint(round_up(rows, 4)), ws);
    enqueue(widen, q, round_up(rows, 4) * h8, work_group_size(widen, q, 256));
    const cl_int bias_dtype = present(a.bias) ? cl_int(a.bias.dtype) : -1;
    set_args(scores, weight, cl_ulong(a.weight.row_stride), cl_uint(vocab), cl_uint(columns),
             cl_uint(h8), cl_uint(rows), bias, bias_dtype, ws, cl_ulong(L.scores_at));
    enqueue(scores, q, rows * vocab, work_group_size(scores, q, 256));
    copy_scores(op, q, ws, L, a.scores, rows, vocab);
  });
  if (rows == 0) return;
  fused_draw(sample_args(workspace, L.scores_at, a.weight, rows, vocab, a.sampling, a.tokens),
             a.bitmask, fused_logprobs(a), workspace, L.sample_bytes, stream);
}

size_t OpenclBackend::lm_head_sample_binary_workspace_size(const nt_lm_head_sample_binary_args& a,
                                                           const nt_lm_head_shard* shard) {
  if (shard) no_shards("lm_head_shard_binary");
  const int64_t rows = a.act_q.shape[0];
  if (rows == 0) return 0;
  return fused_layout(*this, a.wq, rows, a.wq.shape[0], 0, a.sampling, a.tokens,
                      fused_logprobs(a)).bytes;
}

void OpenclBackend::lm_head_sample_binary(const nt_lm_head_sample_binary_args& a,
                                          const nt_lm_head_shard* shard, void* workspace,
                                          size_t workspace_bytes, void* stream) {
  const char* op = "lm_head_sample_binary";
  if (shard) no_shards("lm_head_shard_binary");
  const Queue q = queue_of(op, stream);
  const size_t rows = size_t(a.act_q.shape[0]), vocab = size_t(a.wq.shape[0]);
  const FusedLayout L = fused_layout(*this, a.wq, int64_t(rows), int64_t(vocab), 0, a.sampling, a.tokens,
                                     fused_logprobs(a));
  guarded(op, [&] {
    const View act_q = view(op, "act_q", q, a.act_q);
    const View act_scale = view(op, "act_scale", q, a.act_scale);
    const View wq = view(op, "wq", q, a.wq);
    const View wscale = view(op, "wscale", q, a.wscale);
    const View bias = present(a.bias) ? view(op, "bias", q, a.bias) : View{};
    if (rows == 0) return;
    const cl::Buffer ws = opencl::workspace(op, q, workspace, workspace_bytes, L.bytes);
    const ProgramSpec spec{{"topk_select.cl", "lm_head_topk_binary.cl", "lm_head_sample_binary.cl"},
                           "-DNT_MB_MAX=" + std::to_string(kMaxHeadRows)};
    cl::Kernel scores = kernel(op, q, spec, "nt_binary_write_scores");
    const cl_int bias_dtype = present(a.bias) ? cl_int(a.bias.dtype) : -1;
    set_args(scores, act_q, cl_ulong(a.act_q.row_stride), act_scale, wq, cl_ulong(a.wq.row_stride),
             wscale, cl_ulong(a.wscale.row_stride), cl_uint(vocab), cl_uint(a.act_q.shape[1]),
             cl_uint(a.group_size), cl_uint(rows), bias, bias_dtype, ws, cl_ulong(L.scores_at));
    enqueue(scores, q, rows * vocab, work_group_size(scores, q, 256));
    copy_scores(op, q, ws, L, a.scores, rows, vocab);
  });
  if (rows == 0) return;
  fused_draw(sample_args(workspace, L.scores_at, a.wq, rows, vocab, a.sampling, a.tokens),
             a.bitmask, fused_logprobs(a), workspace, L.sample_bytes, stream);
}

}  // namespace nt::opencl
