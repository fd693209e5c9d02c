// What the host side of verify_draft / verify_tree on CUDA (cuda/verify.cu)
// shares with its kernels (cuda/verify_kernels.cuh): the row records in the
// workspace, the kernels' arguments and their launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/block_select.cuh"  // u32, u64
#include "nexttok/nexttok.h"

namespace nt::cuda::verify_kernels {

constexpr int kListCap = 1024;  // keep-sets listed for the walk; top-k fast path bound

struct RowInfo {
  u64 cut, z;
  float s_max;
  int32_t argmax;  // greedy rows
  int32_t state;   // kFinite, kEmpty, kInfRow, kGreedy
  int32_t n_list;  // members listed (in no particular order), -1: none
};

struct VerifyArgs {
  const void* target;
  int64_t stride;
  u32 vocab;
  u32 requests, width;
  bool tree;
  u32 nodes;
  int64_t drafts;
  const int32_t* draft_ids;
  const int32_t* cu;
  const float* probs;
  int64_t probs_stride;
  const int64_t* cand;
  int64_t cand_stride;
  const int64_t* next;
  int64_t next_stride;
  const int64_t* sib;
  int64_t sib_stride;
  nt_param_f32 temperature, top_p, min_p;  // as the call gave them
  nt_param_i32 top_k;
  nt_param_u64 seed, offset;
  bool joint;
  int bits;
  int32_t* out_ids;
  int64_t out_stride;
  int32_t* out_nodes;
  int64_t nodes_stride;
  int32_t* num_emitted;
  RowInfo* info;
  int32_t* lists;
  int64_t* tried;
};

// The two kernels for the target logits' dtype, in order. Each dtype's are
// compiled in a translation unit of their own: the build generates one per
// dtype from cuda/verify_kernels.cuh.
template <nt_dtype DT>
struct VerifyKernels {
  static void launch(const VerifyArgs& a, dim3 rows_grid, cudaStream_t stream, const char* op);
};

}  // namespace nt::cuda::verify_kernels
