// Registers the CPU backend. The stream argument is ignored: CPU ops run on
// the calling thread (and the pool) and are complete when they return.
#include "backend.h"
#include "cpu/ops.h"

namespace nt {
namespace {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  bool available() const override { return true; }

  void apply_token_bitmask(const nt_apply_token_bitmask_args& a, void*) override {
    cpu::apply_token_bitmask(a);
  }
  void bitmask_from_allowed(const nt_bitmask_from_allowed_args& a, void*) override {
    cpu::bitmask_from_allowed(a);
  }
  size_t sample_workspace_size(const nt_sample_args& a) override {
    return cpu::sample_workspace_size(a);
  }
  void sample(const nt_sample_args& a, void* ws, size_t bytes, void*) override {
    cpu::sample(a, ws, bytes);
  }
  size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a) override {
    return cpu::lm_head_topk_dense_workspace_size(a);
  }
  void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* ws, size_t bytes, void*) override {
    cpu::lm_head_topk_dense(a, ws, bytes);
  }
  size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a) override {
    return cpu::lm_head_topk_binary_workspace_size(a);
  }
  void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* ws, size_t bytes,
                           void*) override {
    cpu::lm_head_topk_binary(a, ws, bytes);
  }
  void pack_weights(const nt_pack_weights_args& a, void*) override { cpu::pack_weights(a); }
  void quantize_activations(const nt_quantize_activations_args& a, void*) override {
    cpu::quantize_activations(a);
  }
  void apply_penalties(const nt_apply_penalties_args& a, void*, size_t, void*) override {
    cpu::apply_penalties(a);
  }
  void apply_logit_bias(const nt_apply_logit_bias_args& a, void*, size_t, void*) override {
    cpu::apply_logit_bias(a);
  }
};

}  // namespace

Backend* cpu_backend() {
  static CpuBackend backend;
  return &backend;
}

}  // namespace nt
