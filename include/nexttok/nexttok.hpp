// Thin C++ layer over nexttok.h: views built from pointers and shapes, errors
// as exceptions, and host workspaces owned by RAII. Header-only; it adds no
// semantics of its own.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "nexttok/nexttok.h"

namespace nexttok {

class Error : public std::runtime_error {
 public:
  Error(nt_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  nt_status status() const noexcept { return status_; }

 private:
  nt_status status_;
};

inline void check(nt_status status) {
  if (status != NT_OK) throw Error(status, nt_last_error());
}

struct Device {
  nt_device_type type = NT_DEVICE_CPU;
  int32_t id = 0;
  static Device cpu() { return {NT_DEVICE_CPU, 0}; }
  static Device cuda(int32_t id = 0) { return {NT_DEVICE_CUDA, id}; }
};

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr nt_dtype value = NT_F32; };
template <> struct dtype_of<int8_t> { static constexpr nt_dtype value = NT_I8; };
template <> struct dtype_of<int32_t> { static constexpr nt_dtype value = NT_I32; };
template <> struct dtype_of<int64_t> { static constexpr nt_dtype value = NT_I64; };
template <> struct dtype_of<uint64_t> { static constexpr nt_dtype value = NT_U64; };
template <> struct dtype_of<bool> { static constexpr nt_dtype value = NT_BOOL; };

// A [rows, cols] view; row_stride < 0 means contiguous. f16/bf16 data, which C++17
// has no type for, takes the dtype explicitly.
inline nt_tensor matrix(const void* data, nt_dtype dtype, int64_t rows, int64_t cols,
                        int64_t row_stride = -1, Device device = Device::cpu()) {
  nt_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.row_stride = row_stride < 0 ? cols : row_stride;
  t.device = device.type;
  t.device_id = device.id;
  return t;
}

template <class T>
nt_tensor matrix(const T* data, int64_t rows, int64_t cols, int64_t row_stride = -1,
                 Device device = Device::cpu()) {
  return matrix(data, dtype_of<T>::value, rows, cols, row_stride, device);
}

inline nt_tensor vector(const void* data, nt_dtype dtype, int64_t n,
                        Device device = Device::cpu()) {
  nt_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.ndim = 1;
  t.shape[0] = n;
  t.row_stride = n;
  t.device = device.type;
  t.device_id = device.id;
  return t;
}

template <class T>
nt_tensor vector(const T* data, int64_t n, Device device = Device::cpu()) {
  return vector(data, dtype_of<T>::value, n, device);
}

inline nt_tensor none() { return nt_tensor{}; }

// Parameters of one sampling call; every field a scalar unless its per_row is set.
struct SampleParams {
  nt_param_f32 temperature{nullptr, 1.0f};
  nt_param_i32 top_k{nullptr, 0};
  nt_param_f32 top_p{nullptr, 1.0f};
  nt_param_f32 min_p{nullptr, 0.0f};
  nt_param_u64 seed{nullptr, 0};
  nt_param_u64 offset{nullptr, 0};
  nt_tensor uniform{};
  uint32_t flags = 0;
};

namespace detail {
// The bytes the op's query reports for these arguments.
template <class Args>
size_t workspace_size(nt_status (*query)(const Args*, size_t*), const Args& a) {
  size_t bytes = 0;
  check(query(&a, &bytes));
  return bytes;
}

// The overloads without a workspace allocate it on the host, so they serve CPU
// tensors only: a device op handed host memory would fault, not fail.
template <class Args>
void run_with_host_workspace(const Args& a, nt_device_type device, const char* op,
                             nt_status (*query)(const Args*, size_t*),
                             nt_status (*run)(const Args*, void*, size_t, void*)) {
  if (device != NT_DEVICE_CPU)
    throw Error(NT_ERROR_INVALID_ARGUMENT,
                std::string(op) + ": argument 'workspace' is needed for device tensors; "
                "this overload allocates host memory and serves CPU tensors only");
  std::vector<unsigned char> ws(workspace_size(query, a));
  check(run(&a, ws.data(), ws.size(), nullptr));
}

// Copies SampleParams' sampling parameters (not uniform) into an op's
// arguments, whose fields of the same names take them.
template <class Args>
void set_sampling(Args& a, const SampleParams& p) {
  a.temperature = p.temperature;
  a.top_k = p.top_k;
  a.top_p = p.top_p;
  a.min_p = p.min_p;
  a.seed = p.seed;
  a.offset = p.offset;
  a.flags = p.flags;
}
}  // namespace detail

inline nt_sample_args sample_args(const nt_tensor& logits, const nt_tensor& tokens,
                                  const SampleParams& p) {
  nt_sample_args a{};
  a.logits = logits;
  detail::set_sampling(a, p);
  a.uniform = p.uniform;
  a.tokens = tokens;
  return a;
}

inline void apply_token_bitmask(const nt_tensor& logits, const nt_tensor& bitmask,
                                const nt_tensor& indices = none(), void* stream = nullptr) {
  nt_apply_token_bitmask_args a{logits, bitmask, indices};
  check(nt_apply_token_bitmask(&a, stream));
}

inline void bitmask_from_allowed(const nt_tensor& allowed, const nt_tensor& bitmask,
                                 void* stream = nullptr) {
  nt_bitmask_from_allowed_args a{allowed, bitmask};
  check(nt_bitmask_from_allowed(&a, stream));
}

// Device workspaces are the caller's (they come from its allocator); for CPU
// tensors the overloads without one keep a host workspace alive for the call.
inline size_t sample_workspace_size(const nt_sample_args& a) {
  return detail::workspace_size(nt_sample_workspace_size, a);
}

inline void sample(const nt_sample_args& a, void* workspace, size_t workspace_bytes,
                   void* stream = nullptr) {
  check(nt_sample(&a, workspace, workspace_bytes, stream));
}

inline void sample(const nt_tensor& logits, const nt_tensor& tokens, const SampleParams& p) {
  detail::run_with_host_workspace(sample_args(logits, tokens, p), logits.device, "sample",
                                  nt_sample_workspace_size, nt_sample);
}

// sample() plus logprobs (mode NT_LOGPROBS_RAW or NT_LOGPROBS_PROCESSED).
inline nt_sample_logprobs_args sample_logprobs_args(const nt_sample_args& sample,
                                                    int32_t num_logprobs, uint32_t mode,
                                                    const nt_tensor& logprob_ids,
                                                    const nt_tensor& logprobs,
                                                    const nt_tensor& ranks) {
  nt_sample_logprobs_args a{};
  a.sample = sample;
  a.num_logprobs = num_logprobs;
  a.mode = mode;
  a.logprob_ids = logprob_ids;
  a.logprobs = logprobs;
  a.ranks = ranks;
  return a;
}

inline size_t sample_logprobs_workspace_size(const nt_sample_logprobs_args& a) {
  return detail::workspace_size(nt_sample_logprobs_workspace_size, a);
}

inline void sample_logprobs(const nt_sample_logprobs_args& a, void* workspace,
                            size_t workspace_bytes, void* stream = nullptr) {
  check(nt_sample_logprobs(&a, workspace, workspace_bytes, stream));
}

inline void sample_logprobs(const nt_sample_logprobs_args& a) {
  detail::run_with_host_workspace(a, a.sample.logits.device, "sample_logprobs",
                                  nt_sample_logprobs_workspace_size, nt_sample_logprobs);
}

inline void lm_head_topk_dense(const nt_lm_head_dense_args& a, void* workspace,
                               size_t workspace_bytes, void* stream = nullptr) {
  check(nt_lm_head_topk_dense(&a, workspace, workspace_bytes, stream));
}

inline void lm_head_topk_dense(const nt_lm_head_dense_args& a) {
  detail::run_with_host_workspace(a, a.weight.device, "lm_head_topk_dense",
                                  nt_lm_head_topk_dense_workspace_size, nt_lm_head_topk_dense);
}

inline void lm_head_topk_binary(const nt_lm_head_binary_args& a, void* workspace,
                                size_t workspace_bytes, void* stream = nullptr) {
  check(nt_lm_head_topk_binary(&a, workspace, workspace_bytes, stream));
}

inline void lm_head_topk_binary(const nt_lm_head_binary_args& a) {
  detail::run_with_host_workspace(a, a.wq.device, "lm_head_topk_binary",
                                  nt_lm_head_topk_binary_workspace_size, nt_lm_head_topk_binary);
}

inline void pack_weights(const nt_tensor& signs, const nt_tensor& wq, void* stream = nullptr) {
  nt_pack_weights_args a{signs, wq};
  check(nt_pack_weights(&a, stream));
}

inline void quantize_activations(const nt_tensor& x, const nt_tensor& act_q,
                                 const nt_tensor& act_scale, void* stream = nullptr) {
  nt_quantize_activations_args a{x, act_q, act_scale};
  check(nt_quantize_activations(&a, stream));
}

// ---- penalties and logit bias ---------------------------------------------------
// A CSR list of ids per row (offsets i32 | i64 [B+1], ids i32 [N]); no_tokens(): absent.
inline nt_token_lists token_lists(const nt_tensor& offsets, const nt_tensor& ids) {
  return nt_token_lists{offsets, ids};
}
inline nt_token_lists no_tokens() { return nt_token_lists{}; }

// Parameters of one penalties call; each a scalar unless its per_row is set.
struct PenaltyParams {
  nt_param_f32 repetition{nullptr, 1.0f};
  nt_param_f32 presence{nullptr, 0.0f};
  nt_param_f32 frequency{nullptr, 0.0f};
};

inline nt_apply_penalties_args penalties_args(const nt_tensor& logits, const nt_token_lists& prompt,
                                              const nt_token_lists& output,
                                              const PenaltyParams& p) {
  nt_apply_penalties_args a{};
  a.logits = logits;
  a.prompt = prompt;
  a.output = output;
  a.repetition = p.repetition;
  a.presence = p.presence;
  a.frequency = p.frequency;
  return a;
}

inline size_t apply_penalties_workspace_size(const nt_apply_penalties_args& a) {
  return detail::workspace_size(nt_apply_penalties_workspace_size, a);
}

inline void apply_penalties(const nt_apply_penalties_args& a, void* workspace,
                            size_t workspace_bytes, void* stream = nullptr) {
  check(nt_apply_penalties(&a, workspace, workspace_bytes, stream));
}

// CPU tensors only (the workspace is host memory).
inline void apply_penalties(const nt_apply_penalties_args& a) {
  detail::run_with_host_workspace(a, a.logits.device, "apply_penalties",
                                  nt_apply_penalties_workspace_size, nt_apply_penalties);
}

inline nt_apply_logit_bias_args logit_bias_args(const nt_tensor& logits,
                                                const nt_token_lists& tokens,
                                                const nt_tensor& values) {
  nt_apply_logit_bias_args a{};
  a.logits = logits;
  a.tokens = tokens;
  a.values = values;
  return a;
}

inline size_t apply_logit_bias_workspace_size(const nt_apply_logit_bias_args& a) {
  return detail::workspace_size(nt_apply_logit_bias_workspace_size, a);
}

inline void apply_logit_bias(const nt_apply_logit_bias_args& a, void* workspace,
                             size_t workspace_bytes, void* stream = nullptr) {
  check(nt_apply_logit_bias(&a, workspace, workspace_bytes, stream));
}

// CPU tensors only (the workspace is host memory).
inline void apply_logit_bias(const nt_apply_logit_bias_args& a) {
  detail::run_with_host_workspace(a, a.logits.device, "apply_logit_bias",
                                  nt_apply_logit_bias_workspace_size, nt_apply_logit_bias);
}

// ---- speculative verification -----------------------------------------------------
// Sampling parameters per request (SampleParams: uniform is not used).
inline nt_verify_draft_args verify_draft_args(const nt_tensor& target_logits,
                                              const nt_tensor& draft_ids,
                                              const nt_tensor& cu_num_draft,
                                              const nt_tensor& draft_probs,
                                              const nt_tensor& out_ids,
                                              const nt_tensor& num_emitted,
                                              const SampleParams& p) {
  nt_verify_draft_args a{};
  a.target_logits = target_logits;
  a.draft_ids = draft_ids;
  a.cu_num_draft = cu_num_draft;
  a.draft_probs = draft_probs;
  detail::set_sampling(a, p);
  a.out_ids = out_ids;
  a.num_emitted = num_emitted;
  return a;
}

inline size_t verify_draft_workspace_size(const nt_verify_draft_args& a) {
  return detail::workspace_size(nt_verify_draft_workspace_size, a);
}

inline void verify_draft(const nt_verify_draft_args& a, void* workspace, size_t workspace_bytes,
                         void* stream = nullptr) {
  check(nt_verify_draft(&a, workspace, workspace_bytes, stream));
}

// CPU tensors only (the workspace is host memory).
inline void verify_draft(const nt_verify_draft_args& a) {
  detail::run_with_host_workspace(a, a.target_logits.device, "verify_draft",
                                  nt_verify_draft_workspace_size, nt_verify_draft);
}

inline nt_verify_tree_args verify_tree_args(const nt_tensor& target_logits,
                                            const nt_tensor& candidates,
                                            const nt_tensor& retrieve_next_token,
                                            const nt_tensor& retrieve_next_sibling,
                                            const nt_tensor& out_ids, const nt_tensor& out_nodes,
                                            const nt_tensor& num_emitted, const SampleParams& p) {
  nt_verify_tree_args a{};
  a.target_logits = target_logits;
  a.candidates = candidates;
  a.retrieve_next_token = retrieve_next_token;
  a.retrieve_next_sibling = retrieve_next_sibling;
  detail::set_sampling(a, p);
  a.out_ids = out_ids;
  a.out_nodes = out_nodes;
  a.num_emitted = num_emitted;
  return a;
}

inline size_t verify_tree_workspace_size(const nt_verify_tree_args& a) {
  return detail::workspace_size(nt_verify_tree_workspace_size, a);
}

inline void verify_tree(const nt_verify_tree_args& a, void* workspace, size_t workspace_bytes,
                        void* stream = nullptr) {
  check(nt_verify_tree(&a, workspace, workspace_bytes, stream));
}

// CPU tensors only (the workspace is host memory).
inline void verify_tree(const nt_verify_tree_args& a) {
  detail::run_with_host_workspace(a, a.target_logits.device, "verify_tree",
                                  nt_verify_tree_workspace_size, nt_verify_tree);
}

// ---- hidden -> token (LM head and sampling in one op) ----------------------------
// The sampling parameters of SampleParams (its uniform is not used: the fused ops
// draw by Gumbel-max only).
inline nt_lm_head_sampling lm_head_sampling(const SampleParams& p) {
  nt_lm_head_sampling s{};
  detail::set_sampling(s, p);
  return s;
}

inline size_t lm_head_sample_dense_workspace_size(const nt_lm_head_sample_dense_args& a) {
  return detail::workspace_size(nt_lm_head_sample_dense_workspace_size, a);
}

inline void lm_head_sample_dense(const nt_lm_head_sample_dense_args& a, void* workspace,
                                 size_t workspace_bytes, void* stream = nullptr) {
  check(nt_lm_head_sample_dense(&a, workspace, workspace_bytes, stream));
}

// CPU tensors only (the workspace is host memory).
inline void lm_head_sample_dense(const nt_lm_head_sample_dense_args& a) {
  detail::run_with_host_workspace(a, a.weight.device, "lm_head_sample_dense",
                                  nt_lm_head_sample_dense_workspace_size, nt_lm_head_sample_dense);
}

inline size_t lm_head_sample_binary_workspace_size(const nt_lm_head_sample_binary_args& a) {
  return detail::workspace_size(nt_lm_head_sample_binary_workspace_size, a);
}

inline void lm_head_sample_binary(const nt_lm_head_sample_binary_args& a, void* workspace,
                                  size_t workspace_bytes, void* stream = nullptr) {
  check(nt_lm_head_sample_binary(&a, workspace, workspace_bytes, stream));
}

// CPU tensors only (the workspace is host memory).
inline void lm_head_sample_binary(const nt_lm_head_sample_binary_args& a) {
  detail::run_with_host_workspace(a, a.wq.device, "lm_head_sample_binary",
                                  nt_lm_head_sample_binary_workspace_size, nt_lm_head_sample_binary);
}

inline void lm_head_sample_combine(const nt_lm_head_sample_combine_args& a) {
  check(nt_lm_head_sample_combine(&a));
}

}  // namespace nexttok
