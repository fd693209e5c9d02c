// Registers the CUDA backend. The stream argument of every call is a
// cudaStream_t (nullptr = the legacy default stream); ops launch only on it,
// never synchronize the host and never allocate.
#include <cuda_runtime.h>

#include <string>

#include "backend.h"
#include "cuda/lm_head_ops.cuh"
#include "cuda/ops.cuh"
#include "cuda/penalty_ops.cuh"

namespace nt {
namespace {

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }
  bool available() const override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device" error for later calls
      return false;
    }
    return count > 0;
  }

  void apply_token_bitmask(const nt_apply_token_bitmask_args& a, void* stream) override {
    cuda::apply_token_bitmask(a, static_cast<cudaStream_t>(stream));
  }
  void bitmask_from_allowed(const nt_bitmask_from_allowed_args& a, void* stream) override {
    cuda::bitmask_from_allowed(a, static_cast<cudaStream_t>(stream));
  }
  size_t sample_workspace_size(const nt_sample_args& a) override {
    return cuda::sample_workspace_size(a);
  }
  void sample(const nt_sample_args& a, void* workspace, size_t workspace_bytes,
              void* stream) override {
    cuda::sample(a, workspace, workspace_bytes, static_cast<cudaStream_t>(stream));
  }
  size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a) override {
    return cuda::lm_head_topk_dense_workspace_size(a);
  }
  void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace, size_t workspace_bytes,
                          void* stream) override {
    cuda::lm_head_topk_dense(a, workspace, workspace_bytes, static_cast<cudaStream_t>(stream));
  }
  size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a) override {
    return cuda::lm_head_topk_binary_workspace_size(a);
  }
  void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace,
                           size_t workspace_bytes, void* stream) override {
    cuda::lm_head_topk_binary(a, workspace, workspace_bytes, static_cast<cudaStream_t>(stream));
  }
  void pack_weights(const nt_pack_weights_args& a, void* stream) override {
    cuda::pack_weights(a, static_cast<cudaStream_t>(stream));
  }
  void quantize_activations(const nt_quantize_activations_args& a, void* stream) override {
    cuda::quantize_activations(a, static_cast<cudaStream_t>(stream));
  }
  size_t apply_penalties_workspace_size(const nt_apply_penalties_args& a) override {
    return cuda::apply_penalties_workspace_size(a);
  }
  void apply_penalties(const nt_apply_penalties_args& a, void* workspace, size_t workspace_bytes,
                       void* stream) override {
    cuda::apply_penalties(a, workspace, workspace_bytes, static_cast<cudaStream_t>(stream));
  }
  size_t apply_logit_bias_workspace_size(const nt_apply_logit_bias_args& a) override {
    return cuda::apply_logit_bias_workspace_size(a);
  }
  void apply_logit_bias(const nt_apply_logit_bias_args& a, void* workspace, size_t workspace_bytes,
                        void* stream) override {
    cuda::apply_logit_bias(a, workspace, workspace_bytes, static_cast<cudaStream_t>(stream));
  }
};

}  // namespace

Backend* cuda_backend() {
  static CudaBackend backend;
  return &backend;
}

}  // namespace nt
