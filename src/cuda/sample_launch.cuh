// nt_sample's plan and launches (cuda/sample.cu), shared with
// nt_sample_logprobs (cuda/sample_logprobs.cu), whose kernels run after the
// sampler's on the same stream and read the row states it leaves in the
// workspace (RowState::keep_cut).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/check.h"
#include "cuda/sample_common.cuh"

namespace nt::cuda {

// Bytes of the sampler's workspace layout from its 256-aligned start (the
// size query's answer without kWorkspaceSlack). `device` must be current.
size_t sample_layout_bytes(const SampleCall& call, int device);
// The backend's own limits (rows, shared memory, cooperative launch where the
// call may flag rows), checked before any launch. `call`'s device must be current.
void check_sample_limits(const char* op, const SampleCall& call);
// nt_sample's kernels on the aligned workspace `ws` (checked by the caller);
// returns the arguments they ran with. `raw_mass`: the filtered scans also sum
// each chunk's raw mass where the logprobs candidates kernel can use it
// (SampleArgs::raw_mass says whether they did). The logits' device must be
// current.
SampleArgs launch_sample(const SampleCall& call, char* ws, cudaStream_t stream, bool raw_mass);

}  // namespace nt::cuda
