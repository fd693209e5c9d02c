// nt_sample's kernel pipeline (opencl/sample.cpp), shared with
// nt_sample_logprobs (opencl/sample_logprobs.cpp), whose pass reads the row
// states the pipeline leaves in the workspace (sample_state.cl).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "core/check.h"
#include "opencl/runtime.h"

namespace nt::opencl {

// The work-group of the sampler's row kernels and of the logprobs kernel
// (NT_ROW_WG: their local arrays are sized for it).
constexpr size_t kSampleRowWorkGroup = 64;

// The -D options the sampler's programs are built with for logits of this
// dtype (element type, list capacity, row-state size, work-group size).
std::string sample_program_defines(nt_dtype logits_dtype);
// The workspace: one row state and list per row, rows x a fixed size.
size_t sample_workspace_bytes(const SampleCall& call);
// Checks the sample's tensors against their buffers, then runs `checks` (the
// caller's checks of its own arguments, or nullptr), then the workspace check;
// only then enqueues the pipeline on q. Errors name `op`.
void enqueue_sample(const char* op, const SampleCall& call, void* workspace,
                    size_t workspace_bytes, const Queue& q, const std::function<void()>& checks);

}  // namespace nt::opencl
