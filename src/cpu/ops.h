// The CPU backend: its operations are its methods, one source file each
// (cpu/<op>.cpp). The stream argument is ignored: CPU ops run on the calling
// thread (and the pool, cpu/thread_pool.h) and are complete when they return.
#pragma once

#include <cstddef>

#include "backend.h"

namespace nt::cpu {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  bool available() const override { return true; }

  void apply_token_bitmask(const nt_apply_token_bitmask_args& a, void* stream) override;
  void bitmask_from_allowed(const nt_bitmask_from_allowed_args& a, void* stream) override;
  size_t sample_workspace_size(const SampleCall& call) override;
  void sample(const SampleCall& call, void* workspace, size_t workspace_bytes,
              void* stream) override;
  size_t sample_logprobs_workspace_size(const SampleLogprobsCall& call) override;
  void sample_logprobs(const SampleLogprobsCall& call, void* workspace, size_t workspace_bytes,
                       void* stream) override;
  size_t lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args& a) override;
  void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace, size_t workspace_bytes,
                          void* stream) override;
  size_t lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args& a) override;
  void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace,
                           size_t workspace_bytes, void* stream) override;
  void pack_weights(const nt_pack_weights_args& a, void* stream) override;
  void quantize_activations(const nt_quantize_activations_args& a, void* stream) override;
  size_t lm_head_sample_dense_workspace_size(const nt_lm_head_sample_dense_args& a,
                                             const nt_lm_head_shard* shard) override;
  void lm_head_sample_dense(const nt_lm_head_sample_dense_args& a, const nt_lm_head_shard* shard,
                            void* workspace, size_t workspace_bytes, void* stream) override;
  size_t lm_head_sample_binary_workspace_size(const nt_lm_head_sample_binary_args& a,
                                              const nt_lm_head_shard* shard) override;
  void lm_head_sample_binary(const nt_lm_head_sample_binary_args& a, const nt_lm_head_shard* shard,
                             void* workspace, size_t workspace_bytes, void* stream) override;
  void lm_head_shard_ranks(const nt_lm_head_shard_ranks_args& a, void* stream) override;
  // No workspace (the base class's size query answers 0).
  void apply_penalties(const nt_apply_penalties_args& a, void* workspace, size_t workspace_bytes,
                       void* stream) override;
  void apply_logit_bias(const nt_apply_logit_bias_args& a, void* workspace, size_t workspace_bytes,
                        void* stream) override;
  size_t verify_workspace_size(const VerifyCall& call) override;
  void verify(const VerifyCall& call, void* workspace, size_t workspace_bytes,
              void* stream) override;
};

}  // namespace nt::cpu
