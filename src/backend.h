// The one interface every backend implements. Arguments arrive checked, once,
// by the dispatcher (core/check.h); a backend adds only checks of its own
// limits, all before its first launch, and throws nt::Error on failure.
// An op with a workspace makes its plan once per call: the size query makes
// it to answer, the op makes it, checks the caller's workspace against it
// (check_workspace) and hands it to its launches. Every backend implements
// every op but the shard rank counts, whose default reports them as
// unsupported (OpenCL).
#pragma once

#include <cstddef>

#include "core/check.h"
#include "core/error.h"
#include "core/fused_sample.h"
#include "nexttok/nexttok.h"

namespace nt {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Compiled in and has a usable device.
  virtual bool available() const = 0;

  virtual void apply_token_bitmask(const nt_apply_token_bitmask_args&, void* stream) = 0;
  virtual void bitmask_from_allowed(const nt_bitmask_from_allowed_args&, void* stream) = 0;
  virtual size_t sample_workspace_size(const SampleCall&) { return 0; }
  virtual void sample(const SampleCall&, void* workspace, size_t workspace_bytes, void* stream) = 0;
  // sample plus logprobs: the sampler's own passes, then a logprobs pass that
  // reads the keep-set each row was drawn from.
  virtual size_t sample_logprobs_workspace_size(const SampleLogprobsCall&) { return 0; }
  virtual void sample_logprobs(const SampleLogprobsCall&, void* workspace, size_t workspace_bytes,
                               void* stream) = 0;
  virtual size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args&) { return 0; }
  virtual void lm_head_topk_dense(const nt_lm_head_dense_args&, void* workspace,
                                  size_t workspace_bytes, void* stream) = 0;
  virtual size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args&) { return 0; }
  virtual void lm_head_topk_binary(const nt_lm_head_binary_args&, void* workspace,
                                   size_t workspace_bytes, void* stream) = 0;
  virtual void pack_weights(const nt_pack_weights_args&, void* stream) = 0;
  virtual void quantize_activations(const nt_quantize_activations_args&, void* stream) = 0;
  // Penalties and logit bias (in place; workspaces sized from the shapes only).
  virtual size_t apply_penalties_workspace_size(const nt_apply_penalties_args&) { return 0; }
  virtual void apply_penalties(const nt_apply_penalties_args&, void* workspace,
                               size_t workspace_bytes, void* stream) = 0;
  virtual size_t apply_logit_bias_workspace_size(const nt_apply_logit_bias_args&) { return 0; }
  virtual void apply_logit_bias(const nt_apply_logit_bias_args&, void* workspace,
                                size_t workspace_bytes, void* stream) = 0;
  // Speculative verification, chain and tree layouts (VerifyCall says which).
  virtual size_t verify_workspace_size(const VerifyCall&) { return 0; }
  virtual void verify(const VerifyCall& call, void* workspace, size_t workspace_bytes,
                      void* stream) = 0;

  // Hidden -> token: with shard == nullptr the sampled tokens, else the
  // shard's summary (nt_lm_head_shard).
  virtual size_t lm_head_sample_dense_workspace_size(const nt_lm_head_sample_dense_args&,
                                                     const nt_lm_head_shard*) = 0;
  virtual void lm_head_sample_dense(const nt_lm_head_sample_dense_args&, const nt_lm_head_shard* shard,
                                    void* workspace, size_t workspace_bytes, void* stream) = 0;
  virtual size_t lm_head_sample_binary_workspace_size(const nt_lm_head_sample_binary_args&,
                                                      const nt_lm_head_shard*) = 0;
  virtual void lm_head_sample_binary(const nt_lm_head_sample_binary_args&, const nt_lm_head_shard* shard,
                                     void* workspace, size_t workspace_bytes, void* stream) = 0;

  // A shard's rank counts (nt_lm_head_shard_ranks), on the shard's device.
  virtual void lm_head_shard_ranks(const nt_lm_head_shard_ranks_args&, void* stream) {
    (void)stream; unsupported("lm_head_shard_ranks");
  }

  // A fused head's draw on the f32 scores it wrote (sa.logits): the bitmask
  // applied in place, then nt_sample, or nt_sample_logprobs when lp asks for
  // logprobs; and the workspace that draw needs.
  size_t fused_draw_workspace_size(const nt_sample_args& sa, const FusedLogprobs& lp) {
    return lp.requested() ? sample_logprobs_workspace_size(check_sample_logprobs(fused_logprobs_args(sa, lp)))
                          : sample_workspace_size(check_sample(sa));
  }
  void fused_draw(const nt_sample_args& sa, const nt_tensor& bitmask, const FusedLogprobs& lp,
                  void* workspace, size_t workspace_bytes, void* stream) {
    if (present(bitmask)) {
      nt_apply_token_bitmask_args m{};
      m.logits = sa.logits;
      m.bitmask = bitmask;
      apply_token_bitmask(m, stream);
    }
    if (lp.requested())
      sample_logprobs(check_sample_logprobs(fused_logprobs_args(sa, lp)), workspace, workspace_bytes, stream);
    else
      sample(check_sample(sa), workspace, workspace_bytes, stream);
  }

 protected:
  [[noreturn]] void unsupported(const char* op) const {
    fail(NT_ERROR_UNSUPPORTED, std::string(op) + ": not implemented on the " + name() + " backend");
  }
};

// The combine of vocabulary-parallel summaries: host data, one implementation
// (cpu/lm_head_combine.cpp).
void lm_head_sample_combine(const nt_lm_head_sample_combine_args& a);

// Each returns the backend's singleton, or nullptr when it is not compiled in.
Backend* cpu_backend();
Backend* cuda_backend();
Backend* opencl_backend();

}  // namespace nt
