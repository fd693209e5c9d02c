// The C entry points: check the arguments, pick the backend that owns the
// tensors, check the workspace, run. Nothing here knows how an op is computed.
#include <string>

#include "backend.h"
#include "core/check.h"
#include "core/error.h"
#include "nexttok/nexttok.h"

namespace nt {
const char* last_error_message();

namespace {

Backend* backend_for(nt_device_type device) {
  Backend* b = nullptr;
  switch (device) {
    case NT_DEVICE_CPU: b = cpu_backend(); break;
    case NT_DEVICE_CUDA: b = cuda_backend(); break;
    case NT_DEVICE_OPENCL: b = opencl_backend(); break;
  }
  if (b == nullptr)
    fail(NT_ERROR_BACKEND_UNAVAILABLE,
         std::string("the ") + device_name(device) + " backend is not compiled into this nexttok");
  if (!b->available())
    fail(NT_ERROR_BACKEND_UNAVAILABLE,
         std::string("the ") + device_name(device) + " backend has no usable device");
  return b;
}

template <class Args>
void null_check(const char* op, const Args* args) {
  if (args == nullptr) fail_argument(op, "args", "is a null pointer");
}

void check_workspace(const char* op, size_t needed, void* workspace, size_t bytes) {
  if (needed == 0) return;
  if (workspace == nullptr)
    fail(NT_ERROR_WORKSPACE, std::string(op) + ": argument 'workspace' is null but " +
                                 std::to_string(needed) + " bytes are needed");
  if (bytes < needed)
    fail(NT_ERROR_WORKSPACE, std::string(op) + ": argument 'workspace_bytes' is " +
                                 std::to_string(bytes) + " but " + std::to_string(needed) +
                                 " bytes are needed");
}

}  // namespace
}  // namespace nt

using nt::guarded;

extern "C" {

nt_status nt_apply_token_bitmask(const nt_apply_token_bitmask_args* args, void* stream) {
  return guarded([&] {
    nt::null_check("apply_token_bitmask", args);
    nt::check_apply_token_bitmask(*args);
    nt::backend_for(args->logits.device)->apply_token_bitmask(*args, stream);
  });
}

nt_status nt_bitmask_from_allowed(const nt_bitmask_from_allowed_args* args, void* stream) {
  return guarded([&] {
    nt::null_check("bitmask_from_allowed", args);
    nt::check_bitmask_from_allowed(*args);
    nt::backend_for(args->allowed.device)->bitmask_from_allowed(*args, stream);
  });
}

nt_status nt_sample_workspace_size(const nt_sample_args* args, size_t* bytes) {
  return guarded([&] {
    nt::null_check("sample", args);
    if (bytes == nullptr) nt::fail_argument("sample_workspace_size", "bytes", "is a null pointer");
    nt::check_sample(*args);
    *bytes = nt::backend_for(args->logits.device)->sample_workspace_size(*args);
  });
}

nt_status nt_sample(const nt_sample_args* args, void* workspace, size_t workspace_bytes,
                    void* stream) {
  return guarded([&] {
    nt::null_check("sample", args);
    nt::check_sample(*args);
    nt::Backend* b = nt::backend_for(args->logits.device);
    nt::check_workspace("sample", b->sample_workspace_size(*args), workspace, workspace_bytes);
    b->sample(*args, workspace, workspace_bytes, stream);
  });
}

nt_status nt_lm_head_topk_dense_workspace_size(const nt_lm_head_dense_args* args, size_t* bytes) {
  return guarded([&] {
    nt::null_check("lm_head_topk_dense", args);
    if (bytes == nullptr)
      nt::fail_argument("lm_head_topk_dense_workspace_size", "bytes", "is a null pointer");
    nt::check_lm_head_dense(*args);
    *bytes = nt::backend_for(args->weight.device)->lm_head_topk_dense_workspace_size(*args);
  });
}

nt_status nt_lm_head_topk_dense(const nt_lm_head_dense_args* args, void* workspace,
                                size_t workspace_bytes, void* stream) {
  return guarded([&] {
    nt::null_check("lm_head_topk_dense", args);
    nt::check_lm_head_dense(*args);
    nt::Backend* b = nt::backend_for(args->weight.device);
    nt::check_workspace("lm_head_topk_dense", b->lm_head_topk_dense_workspace_size(*args),
                        workspace, workspace_bytes);
    b->lm_head_topk_dense(*args, workspace, workspace_bytes, stream);
  });
}

nt_status nt_lm_head_topk_binary_workspace_size(const nt_lm_head_binary_args* args,
                                                size_t* bytes) {
  return guarded([&] {
    nt::null_check("lm_head_topk_binary", args);
    if (bytes == nullptr)
      nt::fail_argument("lm_head_topk_binary_workspace_size", "bytes", "is a null pointer");
    nt::check_lm_head_binary(*args);
    *bytes = nt::backend_for(args->wq.device)->lm_head_topk_binary_workspace_size(*args);
  });
}

nt_status nt_lm_head_topk_binary(const nt_lm_head_binary_args* args, void* workspace,
                                 size_t workspace_bytes, void* stream) {
  return guarded([&] {
    nt::null_check("lm_head_topk_binary", args);
    nt::check_lm_head_binary(*args);
    nt::Backend* b = nt::backend_for(args->wq.device);
    nt::check_workspace("lm_head_topk_binary", b->lm_head_topk_binary_workspace_size(*args),
                        workspace, workspace_bytes);
    b->lm_head_topk_binary(*args, workspace, workspace_bytes, stream);
  });
}

nt_status nt_pack_weights(const nt_pack_weights_args* args, void* stream) {
  return guarded([&] {
    nt::null_check("pack_weights", args);
    nt::check_pack_weights(*args);
    nt::backend_for(args->signs.device)->pack_weights(*args, stream);
  });
}

nt_status nt_quantize_activations(const nt_quantize_activations_args* args, void* stream) {
  return guarded([&] {
    nt::null_check("quantize_activations", args);
    nt::check_quantize_activations(*args);
    nt::backend_for(args->x.device)->quantize_activations(*args, stream);
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

const char* nt_version_string(void) { return "0.1.0"; }

int nt_backend_available(nt_device_type device) {
  nt::Backend* b = nullptr;
  switch (device) {
    case NT_DEVICE_CPU: b = nt::cpu_backend(); break;
    case NT_DEVICE_CUDA: b = nt::cuda_backend(); break;
    case NT_DEVICE_OPENCL: b = nt::opencl_backend(); break;
  }
  return b != nullptr && b->available() ? 1 : 0;
}

// ---- penalties and logit bias --------------------------------------------------
nt_status nt_apply_penalties_workspace_size(const nt_apply_penalties_args* args, size_t* bytes) {
  return guarded([&] {
    nt::null_check("apply_penalties", args);
    if (bytes == nullptr)
      nt::fail_argument("apply_penalties_workspace_size", "bytes", "is a null pointer");
    nt::check_apply_penalties(*args);
    *bytes = nt::backend_for(args->logits.device)->apply_penalties_workspace_size(*args);
  });
}

nt_status nt_apply_penalties(const nt_apply_penalties_args* args, void* workspace,
                             size_t workspace_bytes, void* stream) {
  return guarded([&] {
    nt::null_check("apply_penalties", args);
    nt::check_apply_penalties(*args);
    nt::Backend* b = nt::backend_for(args->logits.device);
    nt::check_workspace("apply_penalties", b->apply_penalties_workspace_size(*args), workspace,
                        workspace_bytes);
    b->apply_penalties(*args, workspace, workspace_bytes, stream);
  });
}

nt_status nt_apply_logit_bias_workspace_size(const nt_apply_logit_bias_args* args, size_t* bytes) {
  return guarded([&] {
    nt::null_check("apply_logit_bias", args);
    if (bytes == nullptr)
      nt::fail_argument("apply_logit_bias_workspace_size", "bytes", "is a null pointer");
    nt::check_apply_logit_bias(*args);
    *bytes = nt::backend_for(args->logits.device)->apply_logit_bias_workspace_size(*args);
  });
}

nt_status nt_apply_logit_bias(const nt_apply_logit_bias_args* args, void* workspace,
                              size_t workspace_bytes, void* stream) {
  return guarded([&] {
    nt::null_check("apply_logit_bias", args);
    nt::check_apply_logit_bias(*args);
    nt::Backend* b = nt::backend_for(args->logits.device);
    nt::check_workspace("apply_logit_bias", b->apply_logit_bias_workspace_size(*args), workspace,
                        workspace_bytes);
    b->apply_logit_bias(*args, workspace, workspace_bytes, stream);
  });
}

}  // extern "C"
