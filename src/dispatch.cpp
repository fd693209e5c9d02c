// The C entry points: check the arguments, pick the backend that owns the
// tensors, run. Nothing here knows how an op is computed or what workspace it
// needs (backend.h).
#include <string>

#include "backend.h"
#include "core/check.h"
#include "core/error.h"
#include "nexttok/nexttok.h"

namespace nt {
const char* last_error_message();

namespace {

// The backend of a device type, or nullptr when it is not compiled in.
Backend* compiled_backend(nt_device_type device) {
  switch (device) {
    case NT_DEVICE_CPU: return cpu_backend();
    case NT_DEVICE_CUDA: return cuda_backend();
    case NT_DEVICE_OPENCL: return opencl_backend();
  }
  return nullptr;
}

Backend* backend_for(nt_device_type device) {
  Backend* b = compiled_backend(device);
  if (b == nullptr)
    fail(NT_ERROR_BACKEND_UNAVAILABLE,
         std::string("the ") + device_name(device) + " backend is not compiled into this nexttok");
  if (!b->available())
    fail(NT_ERROR_BACKEND_UNAVAILABLE,
         std::string("the ") + device_name(device) + " backend has no usable device");
  return b;
}

// body(args) with its errors turned into a status; a null args is op's error.
template <class Args, class Body>
nt_status entry(const char* op, const Args* args, Body&& body) {
  return guarded([&] {
    if (args == nullptr) fail_argument(op, "args", "is a null pointer");
    body(*args);
  });
}

// The workspace-size query "<op>_workspace_size": size(a) checks the arguments
// and returns the bytes op's run needs.
template <class Args, class Size>
nt_status query(const char* op, const Args* args, size_t* bytes, Size&& size) {
  return entry(op, args, [&](const Args& a) {
    if (bytes == nullptr)
      fail_argument((std::string(op) + "_workspace_size").c_str(), "bytes", "is a null pointer");
    *bytes = size(a);
  });
}

void require_shard(const char* op, const nt_lm_head_shard* shard) {
  if (shard == nullptr) fail_argument(op, "shard", "is a null pointer");
}

}  // namespace
}  // namespace nt

extern "C" {

nt_status nt_apply_token_bitmask(const nt_apply_token_bitmask_args* args, void* stream) {
  return nt::entry("apply_token_bitmask", args, [&](const nt_apply_token_bitmask_args& a) {
    nt::check_apply_token_bitmask(a);
    nt::backend_for(a.logits.device)->apply_token_bitmask(a, stream);
  });
}

nt_status nt_bitmask_from_allowed(const nt_bitmask_from_allowed_args* args, void* stream) {
  return nt::entry("bitmask_from_allowed", args, [&](const nt_bitmask_from_allowed_args& a) {
    nt::check_bitmask_from_allowed(a);
    nt::backend_for(a.allowed.device)->bitmask_from_allowed(a, stream);
  });
}

nt_status nt_sample_workspace_size(const nt_sample_args* args, size_t* bytes) {
  return nt::query("sample", args, bytes, [&](const nt_sample_args& a) {
    const nt::SampleCall call = nt::check_sample(a);
    return nt::backend_for(a.logits.device)->sample_workspace_size(call);
  });
}

nt_status nt_sample(const nt_sample_args* args, void* workspace, size_t workspace_bytes,
                    void* stream) {
  return nt::entry("sample", args, [&](const nt_sample_args& a) {
    const nt::SampleCall call = nt::check_sample(a);
    nt::backend_for(a.logits.device)->sample(call, workspace, workspace_bytes, stream);
  });
}

nt_status nt_sample_logprobs_workspace_size(const nt_sample_logprobs_args* args, size_t* bytes) {
  return nt::query("sample_logprobs", args, bytes, [&](const nt_sample_logprobs_args& a) {
    const nt::SampleLogprobsCall call = nt::check_sample_logprobs(a);
    return nt::backend_for(a.sample.logits.device)->sample_logprobs_workspace_size(call);
  });
}

nt_status nt_sample_logprobs(const nt_sample_logprobs_args* args, void* workspace,
                             size_t workspace_bytes, void* stream) {
  return nt::entry("sample_logprobs", args, [&](const nt_sample_logprobs_args& a) {
    const nt::SampleLogprobsCall call = nt::check_sample_logprobs(a);
    nt::backend_for(a.sample.logits.device)->sample_logprobs(call, workspace, workspace_bytes,
                                                             stream);
  });
}

nt_status nt_lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args* args, size_t* bytes) {
  return nt::query("lm_head_topk_dense", args, bytes, [&](const nt_lm_head_dense_args& a) {
    nt::check_lm_head_dense(a);
    return nt::backend_for(a.weight.device)->lm_head_topk_dense_workspace_size(a);
  });
}

nt_status nt_lm_head_topk_dense(const nt_lm_head_dense_args* args, void* workspace,
                                size_t workspace_bytes, void* stream) {
  return nt::entry("lm_head_topk_dense", args, [&](const nt_lm_head_dense_args& a) {
    nt::check_lm_head_dense(a);
    nt::backend_for(a.weight.device)->lm_head_topk_dense(a, workspace, workspace_bytes, stream);
  });
}

nt_status nt_lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args* args,
                                                size_t* bytes) {
  return nt::query("lm_head_topk_binary", args, bytes, [&](const nt_lm_head_binary_args& a) {
    nt::check_lm_head_binary(a);
    return nt::backend_for(a.wq.device)->lm_head_topk_binary_workspace_size(a);
  });
}

nt_status nt_lm_head_topk_binary(const nt_lm_head_binary_args* args, void* workspace,
                                 size_t workspace_bytes, void* stream) {
  return nt::entry("lm_head_topk_binary", args, [&](const nt_lm_head_binary_args& a) {
    nt::check_lm_head_binary(a);
    nt::backend_for(a.wq.device)->lm_head_topk_binary(a, workspace, workspace_bytes, stream);
  });
}

nt_status nt_lm_head_sample_dense_workspace_size(const nt_lm_head_sample_dense_args* args,
                                                 size_t* bytes) {
  return nt::query("lm_head_sample_dense", args, bytes, [&](const nt_lm_head_sample_dense_args& a) {
    nt::check_lm_head_sample_dense(a, nullptr);
    return nt::backend_for(a.weight.device)->lm_head_sample_dense_workspace_size(a, nullptr);
  });
}

nt_status nt_lm_head_sample_dense(const nt_lm_head_sample_dense_args* args, void* workspace,
                                  size_t workspace_bytes, void* stream) {
  return nt::entry("lm_head_sample_dense", args, [&](const nt_lm_head_sample_dense_args& a) {
    nt::check_lm_head_sample_dense(a, nullptr);
    nt::backend_for(a.weight.device)->lm_head_sample_dense(a, nullptr, workspace, workspace_bytes, stream);
  });
}

nt_status nt_lm_head_sample_binary_workspace_size(const nt_lm_head_sample_binary_args* args,
                                                  size_t* bytes) {
  return nt::query("lm_head_sample_binary", args, bytes, [&](const nt_lm_head_sample_binary_args& a) {
    nt::check_lm_head_sample_binary(a, nullptr);
    return nt::backend_for(a.wq.device)->lm_head_sample_binary_workspace_size(a, nullptr);
  });
}

nt_status nt_lm_head_sample_binary(const nt_lm_head_sample_binary_args* args, void* workspace,
                                   size_t workspace_bytes, void* stream) {
  return nt::entry("lm_head_sample_binary", args, [&](const nt_lm_head_sample_binary_args& a) {
    nt::check_lm_head_sample_binary(a, nullptr);
    nt::backend_for(a.wq.device)->lm_head_sample_binary(a, nullptr, workspace, workspace_bytes, stream);
  });
}

nt_status nt_lm_head_shard_dense_workspace_size(const nt_lm_head_sample_dense_args* args,
                                                const nt_lm_head_shard* shard, size_t* bytes) {
  return nt::query("lm_head_shard_dense", args, bytes, [&](const nt_lm_head_sample_dense_args& a) {
    nt::require_shard("lm_head_shard_dense", shard);
    nt::check_lm_head_sample_dense(a, shard);
    return nt::backend_for(a.weight.device)->lm_head_sample_dense_workspace_size(a, shard);
  });
}

nt_status nt_lm_head_shard_dense(const nt_lm_head_sample_dense_args* args,
                                 const nt_lm_head_shard* shard, void* workspace,
                                 size_t workspace_bytes, void* stream) {
  return nt::entry("lm_head_shard_dense", args, [&](const nt_lm_head_sample_dense_args& a) {
    nt::require_shard("lm_head_shard_dense", shard);
    nt::check_lm_head_sample_dense(a, shard);
    nt::backend_for(a.weight.device)->lm_head_sample_dense(a, shard, workspace, workspace_bytes, stream);
  });
}

nt_status nt_lm_head_shard_binary_workspace_size(const nt_lm_head_sample_binary_args* args,
                                                 const nt_lm_head_shard* shard, size_t* bytes) {
  return nt::query("lm_head_shard_binary", args, bytes, [&](const nt_lm_head_sample_binary_args& a) {
    nt::require_shard("lm_head_shard_binary", shard);
    nt::check_lm_head_sample_binary(a, shard);
    return nt::backend_for(a.wq.device)->lm_head_sample_binary_workspace_size(a, shard);
  });
}

nt_status nt_lm_head_shard_binary(const nt_lm_head_sample_binary_args* args,
                                  const nt_lm_head_shard* shard, void* workspace,
                                  size_t workspace_bytes, void* stream) {
  return nt::entry("lm_head_shard_binary", args, [&](const nt_lm_head_sample_binary_args& a) {
    nt::require_shard("lm_head_shard_binary", shard);
    nt::check_lm_head_sample_binary(a, shard);
    nt::backend_for(a.wq.device)->lm_head_sample_binary(a, shard, workspace, workspace_bytes, stream);
  });
}

nt_status nt_lm_head_sample_combine(const nt_lm_head_sample_combine_args* args) {
  return nt::entry("lm_head_sample_combine", args, [&](const nt_lm_head_sample_combine_args& a) {
    nt::check_lm_head_sample_combine(a);
    nt::lm_head_sample_combine(a);
  });
}

nt_status nt_lm_head_shard_ranks(const nt_lm_head_shard_ranks_args* args, void* stream) {
  return nt::entry("lm_head_shard_ranks", args, [&](const nt_lm_head_shard_ranks_args& a) {
    nt::check_lm_head_shard_ranks(a);
    nt::backend_for(a.scores.device)->lm_head_shard_ranks(a, stream);
  });
}

nt_status nt_pack_weights(const nt_pack_weights_args* args, void* stream) {
  return nt::entry("pack_weights", args, [&](const nt_pack_weights_args& a) {
    nt::check_pack_weights(a);
    nt::backend_for(a.signs.device)->pack_weights(a, stream);
  });
}

nt_status nt_quantize_activations(const nt_quantize_activations_args* args, void* stream) {
  return nt::entry("quantize_activations", args, [&](const nt_quantize_activations_args& a) {
    nt::check_quantize_activations(a);
    nt::backend_for(a.x.device)->quantize_activations(a, stream);
  });
}

nt_status nt_apply_penalties_workspace_size(const nt_apply_penalties_args* args, size_t* bytes) {
  return nt::query("apply_penalties", args, bytes, [&](const nt_apply_penalties_args& a) {
    nt::check_apply_penalties(a);
    return nt::backend_for(a.logits.device)->apply_penalties_workspace_size(a);
  });
}

nt_status nt_apply_penalties(const nt_apply_penalties_args* args, void* workspace,
                             size_t workspace_bytes, void* stream) {
  return nt::entry("apply_penalties", args, [&](const nt_apply_penalties_args& a) {
    nt::check_apply_penalties(a);
    nt::backend_for(a.logits.device)->apply_penalties(a, workspace, workspace_bytes, stream);
  });
}

nt_status nt_apply_logit_bias_workspace_size(const nt_apply_logit_bias_args* args, size_t* bytes) {
  return nt::query("apply_logit_bias", args, bytes, [&](const nt_apply_logit_bias_args& a) {
    nt::check_apply_logit_bias(a);
    return nt::backend_for(a.logits.device)->apply_logit_bias_workspace_size(a);
  });
}

nt_status nt_apply_logit_bias(const nt_apply_logit_bias_args* args, void* workspace,
                              size_t workspace_bytes, void* stream) {
  return nt::entry("apply_logit_bias", args, [&](const nt_apply_logit_bias_args& a) {
    nt::check_apply_logit_bias(a);
    nt::backend_for(a.logits.device)->apply_logit_bias(a, workspace, workspace_bytes, stream);
  });
}

nt_status nt_verify_draft_workspace_size(const nt_verify_draft_args* args, size_t* bytes) {
  return nt::query("verify_draft", args, bytes, [&](const nt_verify_draft_args& a) {
    const nt::VerifyCall call = nt::check_verify_draft(a);
    return nt::backend_for(a.target_logits.device)->verify_workspace_size(call);
  });
}

nt_status nt_verify_draft(const nt_verify_draft_args* args, void* workspace,
                          size_t workspace_bytes, void* stream) {
  return nt::entry("verify_draft", args, [&](const nt_verify_draft_args& a) {
    const nt::VerifyCall call = nt::check_verify_draft(a);
    nt::backend_for(a.target_logits.device)->verify(call, workspace, workspace_bytes, stream);
  });
}

nt_status nt_verify_tree_workspace_size(const nt_verify_tree_args* args, size_t* bytes) {
  return nt::query("verify_tree", args, bytes, [&](const nt_verify_tree_args& a) {
    const nt::VerifyCall call = nt::check_verify_tree(a);
    return nt::backend_for(a.target_logits.device)->verify_workspace_size(call);
  });
}

nt_status nt_verify_tree(const nt_verify_tree_args* args, void* workspace, size_t workspace_bytes,
                         void* stream) {
  return nt::entry("verify_tree", args, [&](const nt_verify_tree_args& a) {
    const nt::VerifyCall call = nt::check_verify_tree(a);
    nt::backend_for(a.target_logits.device)->verify(call, workspace, workspace_bytes, stream);
  });
}

const char* nt_last_error(void) { return nt::last_error_message(); }

const char* nt_status_string(nt_status status) {
  switch (status) {
    case NT_OK: return "ok";
    case NT_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case NT_ERROR_UNSUPPORTED: return "unsupported";
    case NT_ERROR_BACKEND_UNAVAILABLE: return "backend unavailable";
    case NT_ERROR_WORKSPACE: return "workspace missing or too small";
    case NT_ERROR_BACKEND: return "backend runtime error";
    case NT_ERROR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

#define NT_STRINGIFY_(x) #x
#define NT_STRINGIFY(x) NT_STRINGIFY_(x)
const char* nt_version_string(void) {
  return NT_STRINGIFY(NT_VERSION_MAJOR) "." NT_STRINGIFY(NT_VERSION_MINOR) "." NT_STRINGIFY(NT_VERSION_PATCH);
}

int nt_backend_available(nt_device_type device) {
  const nt::Backend* b = nt::compiled_backend(device);
  return b != nullptr && b->available() ? 1 : 0;
}

}  // extern "C"
