// lm_head_sample_dense / _binary on CUDA (docs/SEMANTICS.md, "Fused hidden ->
// token"). The heads' own scoring kernels write every score into the
// workspace (cuda/lm_head_ops.cuh: the kernels and arithmetic of
// lm_head_topk_*, with a sink that stores instead of selecting), the bitmask
// op masks them in place and sample (sample_logprobs for a logprobs request)
// draws from them, all on the call's stream: the token is nt_sample's on
// those masked scores by construction, as on the CPU and OpenCL.
// Workspace: the [M, V] scores (256-byte aligned), then one region that the
// scoring pass's scratch (the binary head's permuted activations) and the
// sampler's workspace share, one after the other on the stream.
// The shard forms (vocabulary-parallel summaries) are not implemented on CUDA.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/fused_sample.h"
#include "cuda/device.cuh"
#include "cuda/lm_head_ops.cuh"
#include "cuda/ops.cuh"

namespace nt::cuda {
namespace {

struct FusedLayout {
  size_t scores_bytes;  // the shared region starts here
  size_t shared_bytes;
  size_t total;
};

nt_sample_args sample_args(float* scores, int64_t rows, int64_t vocab, int device,
                           const nt_lm_head_sampling& s, const nt_tensor& tokens) {
  return fused_sample_args(scores_matrix(scores, rows, vocab, NT_DEVICE_CUDA, device), s, tokens);
}

// The layout for a head whose scoring pass needs `head_bytes` of scratch.
FusedLayout fused_layout(CudaBackend& b, int64_t rows, int64_t vocab, int device, size_t head_bytes,
                         const nt_lm_head_sampling& s, const nt_tensor& tokens, const FusedLogprobs& lp) {
  static float placeholder;
  FusedLayout L;
  L.scores_bytes = align_up(size_t(rows) * size_t(vocab) * 4, 256);
  const size_t draw = b.fused_draw_workspace_size(sample_args(&placeholder, rows, vocab, device, s, tokens), lp);
  L.shared_bytes = align_up(std::max(head_bytes, draw), 256);
  L.total = L.scores_bytes + L.shared_bytes + kWorkspaceSlack;
  return L;
}

[[noreturn]] void no_shards(const char* op) {
  fail(NT_ERROR_UNSUPPORTED, std::string(op) + ": not implemented on the cuda backend "
                             "(vocabulary-parallel summaries are CPU-only for now)");
}

// After the scoring pass: the copy the caller asked for, the mask, the draw.
template <class Args>
void mask_and_sample(CudaBackend& b, const char* op, const Args& a, const FusedLayout& L, char* ws, int64_t rows,
                     int64_t vocab, int device, cudaStream_t stream) {
  float* scores = reinterpret_cast<float*>(ws);
  if (present(a.scores)) {
    const size_t pitch = size_t(std::max<int64_t>(a.scores.row_stride, vocab)) * 4;
    check_cuda(cudaMemcpy2DAsync(a.scores.data, pitch, scores, size_t(vocab) * 4, size_t(vocab) * 4,
                                 size_t(rows), cudaMemcpyDeviceToDevice, stream),
               op);
  }
  b.fused_draw(sample_args(scores, rows, vocab, device, a.sampling, a.tokens), a.bitmask, fused_logprobs(a),
               ws + L.scores_bytes, L.shared_bytes, stream);
}

nt_lm_head_dense_args dense_head(const nt_lm_head_sample_dense_args& a) {
  nt_lm_head_dense_args h{};
  h.hidden = a.hidden;
  h.weight = a.weight;
  h.bias = a.bias;
  h.k = 1;
  return h;
}

nt_lm_head_binary_args binary_head(const nt_lm_head_sample_binary_args& a) {
  nt_lm_head_binary_args h{};
  h.act_q = a.act_q;
  h.act_scale = a.act_scale;
  h.wq = a.wq;
  h.wscale = a.wscale;
  h.bias = a.bias;
  h.group_size = a.group_size;
  h.k = 1;
  return h;
}

}  // namespace

size_t CudaBackend::lm_head_sample_dense_workspace_size(const nt_lm_head_sample_dense_args& a,
                                                        const nt_lm_head_shard* shard) {
  if (shard) no_shards("lm_head_shard_dense");
  const int64_t rows = a.hidden.shape[0];
  if (rows == 0) return 0;
  return fused_layout(*this, rows, a.weight.shape[0], a.weight.device_id, 0, a.sampling, a.tokens,
                      fused_logprobs(a)).total;
}

void CudaBackend::lm_head_sample_dense(const nt_lm_head_sample_dense_args& a, const nt_lm_head_shard* shard,
                                       void* workspace, size_t workspace_bytes, void* stream) {
  const char* op = "lm_head_sample_dense";
  if (shard) no_shards("lm_head_shard_dense");
  const int64_t rows = a.hidden.shape[0], vocab = a.weight.shape[0];
  if (rows == 0) return;
  const int device = a.weight.device_id;
  DeviceScope scope(device, op);
  const FusedLayout L = fused_layout(*this, rows, vocab, device, 0, a.sampling, a.tokens, fused_logprobs(a));
  check_workspace(op, L.total, workspace, workspace_bytes);
  char* ws = aligned_workspace(workspace);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  lm_head_scores_dense(op, dense_head(a), reinterpret_cast<float*>(ws), vocab, s);
  mask_and_sample(*this, op, a, L, ws, rows, vocab, device, s);
}

size_t CudaBackend::lm_head_sample_binary_workspace_size(const nt_lm_head_sample_binary_args& a,
                                                         const nt_lm_head_shard* shard) {
  const char* op = "lm_head_sample_binary";
  if (shard) no_shards("lm_head_shard_binary");
  const int64_t rows = a.act_q.shape[0];
  if (rows == 0) return 0;
  return fused_layout(*this, rows, a.wq.shape[0], a.wq.device_id,
                      lm_head_scores_binary_workspace_size(op, binary_head(a)), a.sampling, a.tokens,
                      fused_logprobs(a)).total;
}

void CudaBackend::lm_head_sample_binary(const nt_lm_head_sample_binary_args& a, const nt_lm_head_shard* shard,
                                        void* workspace, size_t workspace_bytes, void* stream) {
  const char* op = "lm_head_sample_binary";
  if (shard) no_shards("lm_head_shard_binary");
  const int64_t rows = a.act_q.shape[0], vocab = a.wq.shape[0];
  if (rows == 0) return;
  const int device = a.wq.device_id;
  DeviceScope scope(device, op);
  const nt_lm_head_binary_args head = binary_head(a);
  const size_t head_bytes = lm_head_scores_binary_workspace_size(op, head);
  const FusedLayout L = fused_layout(*this, rows, vocab, device, head_bytes, a.sampling, a.tokens, fused_logprobs(a));
  check_workspace(op, L.total, workspace, workspace_bytes);
  char* ws = aligned_workspace(workspace);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  lm_head_scores_binary(op, head, reinterpret_cast<float*>(ws), vocab, ws + L.scores_bytes, head_bytes, s);
  mask_and_sample(*this, op, a, L, ws, rows, vocab, device, s);
}

}  // namespace nt::cuda
