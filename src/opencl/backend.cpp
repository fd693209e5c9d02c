// Registers the OpenCL backend. Every call's stream is a cl_command_queue; the
// device is the queue's, and tensors are cl_mem buffers of its context.
// available() says whether any platform has a device, so callers get a clear
// error on a machine with no OpenCL platform.
#include <atomic>
#include <vector>

#include "backend.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt {
namespace {

bool any_opencl_device() {
  try {
    std::vector<cl::Platform> platforms;
    cl::Platform::get(&platforms);
    for (auto& p : platforms) {
      std::vector<cl::Device> devices;
      try {
        p.getDevices(CL_DEVICE_TYPE_ALL, &devices);
      } catch (const cl::Error&) {
        continue;  // CL_DEVICE_NOT_FOUND on this platform
      }
      if (!devices.empty()) return true;
    }
  } catch (const cl::Error&) {
  }
  return false;
}

class OpenclBackend final : public Backend {
 public:
  const char* name() const override { return "opencl"; }
  // Asked on every call: a found device is remembered, a missing one re-probed.
  bool available() const override {
    if (found_.load(std::memory_order_relaxed)) return true;
    const bool found = any_opencl_device();
    if (found) found_.store(true, std::memory_order_relaxed);
    return found;
  }

  void apply_token_bitmask(const nt_apply_token_bitmask_args& a, void* stream) override {
    opencl::apply_token_bitmask(a, stream);
  }
  void bitmask_from_allowed(const nt_bitmask_from_allowed_args& a, void* stream) override {
    opencl::bitmask_from_allowed(a, stream);
  }
  size_t sample_workspace_size(const nt_sample_args& a) override {
    return opencl::sample_workspace_size(a);
  }
  void sample(const nt_sample_args& a, void* ws, size_t bytes, void* stream) override {
    opencl::sample(a, ws, bytes, stream);
  }
  size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a) override {
    return opencl::lm_head_topk_dense_workspace_size(a);
  }
  void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* ws, size_t bytes,
                          void* stream) override {
    opencl::lm_head_topk_dense(a, ws, bytes, stream);
  }
  size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a) override {
    return opencl::lm_head_topk_binary_workspace_size(a);
  }
  void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* ws, size_t bytes,
                           void* stream) override {
    opencl::lm_head_topk_binary(a, ws, bytes, stream);
  }
  void pack_weights(const nt_pack_weights_args& a, void* stream) override {
    opencl::pack_weights(a, stream);
  }
  void quantize_activations(const nt_quantize_activations_args& a, void* stream) override {
    opencl::quantize_activations(a, stream);
  }
  size_t apply_penalties_workspace_size(const nt_apply_penalties_args& a) override {
    return opencl::apply_penalties_workspace_size(a);
  }
  void apply_penalties(const nt_apply_penalties_args& a, void* ws, size_t bytes,
                       void* stream) override {
    opencl::apply_penalties(a, ws, bytes, stream);
  }
  size_t apply_logit_bias_workspace_size(const nt_apply_logit_bias_args& a) override {
    return opencl::apply_logit_bias_workspace_size(a);
  }
  void apply_logit_bias(const nt_apply_logit_bias_args& a, void* ws, size_t bytes,
                        void* stream) override {
    opencl::apply_logit_bias(a, ws, bytes, stream);
  }

 private:
  mutable std::atomic<bool> found_{false};
};

}  // namespace

Backend* opencl_backend() {
  static OpenclBackend backend;
  return &backend;
}

}  // namespace nt
