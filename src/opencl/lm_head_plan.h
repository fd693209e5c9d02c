// How the OpenCL LM heads split their work (kernels in topk_select.cl): work-
// items over contiguous vocabulary ranges, each with a candidate buffer per
// hidden row, hidden rows in launches of at most kMaxHeadRows (the weights are
// read once per launch), then merge stages of kMergeFanIn lists per item. The
// workspace holds the dense head's widened hidden rows (none for the binary
// head), the candidate counts and the candidate buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "opencl/runtime.h"

namespace nt::opencl {

constexpr size_t kMaxHeadRows = 64;

struct HeadPlan {
  size_t rows_per_launch = 0;
  size_t items = 0, rows_per_item = 0, cap = 0;
  size_t counts_at = 0, cand_at = 0, bytes = 0;  // workspace layout
  size_t work_group = 1;
};

inline size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// widened_columns: floats per widened hidden row (0: none are kept).
HeadPlan head_plan(const cl::Device& device, int64_t vocab, int64_t rows, int32_t k,
                   size_t widened_columns);

// The largest plan over the devices of the buffer's context: what a workspace
// query answers before any queue is known.
size_t head_workspace_size(const char* op, void* any_buffer, int64_t vocab, int64_t rows,
                           int32_t k, size_t widened_columns);

// The merge stages of one launch's rows [row_base, row_base + rows).
void merge_candidates(const cl::Kernel& merge, const Queue& q, const HeadPlan& plan,
                      const cl::Buffer& ws, int32_t k, size_t rows, size_t row_base,
                      const View& values, int64_t values_stride, const View& indices,
                      int64_t indices_stride);

}  // namespace nt::opencl
