#include "opencl/lm_head_plan.h"

#include <algorithm>

namespace nt::opencl {
namespace {

constexpr size_t kMergeFanIn = 16;
// Candidate buffers of GPUs are limited to this: they grow with the items.
constexpr size_t kCandidateBudget = size_t(256) << 20;

}  // namespace

HeadPlan head_plan(const cl::Device& device, int64_t vocab, int64_t rows, int32_t k,
                   size_t widened_columns) {
  HeadPlan p;
  p.rows_per_launch = std::min<size_t>(size_t(rows), kMaxHeadRows);
  p.cap = 2 * size_t(k);
  const size_t v = size_t(vocab);
  if (device.getInfo<CL_DEVICE_TYPE>() & CL_DEVICE_TYPE_CPU) {
    // A few ranges per core balance the load; each is a long streaming read.
    const size_t cores = device.getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>();
    p.items = std::clamp<size_t>((v + 255) / 256, 1, 8 * cores);
    p.work_group = 1;
  } else {
    // Many short ranges keep a GPU's memory system busy.
    const size_t budget = kCandidateBudget / (p.rows_per_launch * p.cap * 8);
    p.items = std::clamp<size_t>((v + 31) / 32, 1, std::max<size_t>(budget, 1));
    p.work_group = 64;
  }
  p.rows_per_item = (v + p.items - 1) / p.items;
  p.items = (v + p.rows_per_item - 1) / p.rows_per_item;
  // The widened rows are [round4(rows)][widened_columns] floats.
  p.counts_at = round_up(round_up(p.rows_per_launch, 4) * widened_columns * 4, 256);
  p.cand_at = round_up(p.counts_at + p.rows_per_launch * p.items * 4, 256);
  p.bytes = p.cand_at + p.rows_per_launch * p.items * p.cap * 8;
  return p;
}

size_t head_workspace_size(const char* op, void* any_buffer, int64_t vocab, int64_t rows,
                           int32_t k, size_t widened_columns) {
  if (rows == 0) return 0;
  size_t bytes = 0;
  guarded(op, [&] {
    cl_context context = nullptr;
    if (clGetMemObjectInfo(static_cast<cl_mem>(any_buffer), CL_MEM_CONTEXT, sizeof context, &context,
                           nullptr) != CL_SUCCESS)
      fail_argument(op, "weight", "is not a cl_mem buffer");
    const cl::Context c(context, /*retainObject=*/true);
    for (const cl::Device& d : c.getInfo<CL_CONTEXT_DEVICES>())
      bytes = std::max(bytes, head_plan(d, vocab, rows, k, widened_columns).bytes);
  });
  return bytes;
}

void merge_candidates(const cl::Kernel& merge_kernel, const Queue& q, const HeadPlan& plan,
                      const cl::Buffer& ws, int32_t k, size_t rows, size_t row_base,
                      const View& values, int64_t values_stride, const View& indices,
                      int64_t indices_stride) {
  cl::Kernel merge = merge_kernel;
  const size_t wg = work_group_size(merge, q, plan.work_group);
  for (size_t stride = 1;; stride *= kMergeFanIn) {
    const size_t span = stride * kMergeFanIn;
    const bool last = span >= plan.items;
    const size_t groups = (plan.items + span - 1) / span;
    set_args(merge, ws, cl_ulong(plan.counts_at), cl_ulong(plan.cand_at), cl_uint(plan.items),
             cl_uint(plan.cap), cl_uint(k), cl_uint(rows), cl_uint(stride), cl_uint(kMergeFanIn),
             cl_int(last), values, cl_ulong(values_stride), indices, cl_ulong(indices_stride),
             cl_uint(row_base));
    enqueue(merge, q, rows * groups, wg);
    if (last) break;
  }
}

}  // namespace nt::opencl
