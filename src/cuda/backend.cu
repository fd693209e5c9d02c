// Registers the CUDA backend (cuda/ops.cuh) and forwards the LM-head ops.
#include <cuda_runtime.h>

#include "cuda/lm_head_ops.cuh"
#include "cuda/ops.cuh"

namespace nt {
namespace cuda {
namespace {

cudaStream_t cuda_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

bool CudaBackend::available() const {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error for later calls
    return false;
  }
  return count > 0;
}

size_t CudaBackend::lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a) {
  return cuda::lm_head_topk_dense_workspace_size(a);
}
void CudaBackend::lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace,
                                     size_t workspace_bytes, void* stream) {
  cuda::lm_head_topk_dense(a, workspace, workspace_bytes, cuda_stream(stream));
}
size_t CudaBackend::lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a) {
  return cuda::lm_head_topk_binary_workspace_size(a);
}
void CudaBackend::lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace,
                                      size_t workspace_bytes, void* stream) {
  cuda::lm_head_topk_binary(a, workspace, workspace_bytes, cuda_stream(stream));
}
void CudaBackend::pack_weights(const nt_pack_weights_args& a, void* stream) {
  cuda::pack_weights(a, cuda_stream(stream));
}
void CudaBackend::quantize_activations(const nt_quantize_activations_args& a, void* stream) {
  cuda::quantize_activations(a, cuda_stream(stream));
}

}  // namespace cuda

Backend* cuda_backend() {
  static cuda::CudaBackend backend;
  return &backend;
}

}  // namespace nt
