// nt_sample on OpenCL: the kernel pipeline of opencl/sample.cl, enqueued in
// order on the caller's queue with the same arguments; each kernel serves the
// rows in its phase and the others return at once. Which kernels can have work
// follows from the scalar parameters, so only those are launched. The
// workspace holds each row's state and candidate list: a fixed size per row.
#include <algorithm>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/sampling.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt::opencl {
namespace {

constexpr const char* kOp = "sample";
constexpr size_t kListCap = 1024;        // the local list's entries
constexpr size_t kStateBytes = 2048;     // a row's state (sample_state.cl checks it fits)
constexpr size_t kRowBytes = kStateBytes + 8 * kListCap;
constexpr size_t kRowWorkGroup = 64;     // the histogram scratch is sized for it
// Level launches per search; rows needing more refine serially in the list kernel.
constexpr int kLevelLaunches = 2;

// Probabilities become integers p * 2^bits: V of them must sum below 2^62.
cl_int mass_bits(int64_t vocab) {
  int bits = 0;
  for (uint64_t v = uint64_t(vocab); v; v >>= 1) ++bits;
  return std::clamp(62 - bits, 24, 40);
}

// Bits of the kernels' flags argument (sample.cl).
enum : cl_uint {
  kPerRowT = 1, kPerRowK = 2, kPerRowP = 4, kPerRowMinP = 8, kPerRowSeed = 16,
  kPerRowOffset = 32, kHasUniform = 64, kJoint = 128, kTokensI32 = 256
};

// The kernels the call needs, in order.
std::vector<const char*> pipeline(const nt_sample_args& a) {
  const bool scalars = !a.temperature.per_row && !a.top_k.per_row && !a.top_p.per_row &&
                       !a.min_p.per_row;
  const nt_row_params p = nt_resolve_row_params(a.temperature.scalar, a.top_k.scalar,
                                                a.top_p.scalar, a.min_p.scalar,
                                                int32_t(a.logits.shape[1]));
  if (scalars && p.greedy) return {"nt_sample_start"};
  const bool explicit_draw = present(a.uniform);
  const char* draw_row = explicit_draw ? "nt_sample_explicit_row" : "nt_sample_gumbel_row";
  const bool cuts = !scalars || p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f;
  if (!cuts) return {"nt_sample_start", draw_row};
  std::vector<const char*> k = {"nt_sample_start", "nt_sample_ladder"};
  // Top-p renormalised on the top-k set may search twice.
  const bool twice =
      !scalars || (p.top_k > 0 && p.top_p < 1.0f && !(a.flags & NT_SAMPLE_TOP_P_JOINT));
  for (int round = 0; round < (twice ? 2 : 1); ++round) {
    for (int i = 0; i < kLevelLaunches; ++i) k.push_back("nt_sample_level");
    k.push_back("nt_sample_list");
  }
  k.push_back(explicit_draw ? "nt_sample_explicit_list" : "nt_sample_gumbel_list");
  k.push_back(draw_row);
  return k;
}

}  // namespace

size_t sample_workspace_size(const nt_sample_args& a) {
  return size_t(a.logits.shape[0]) * kRowBytes;
}

void sample(const nt_sample_args& a, void* workspace, size_t workspace_bytes, void* stream) {
  const Queue q = queue_of(kOp, stream);
  const size_t rows = size_t(a.logits.shape[0]);
  (void)workspace_bytes;  // dispatch checked it against sample_workspace_size
  guarded(kOp, [&] {
    const View logits = view(kOp, "logits", q, a.logits);
    const View tokens = view(kOp, "tokens", q, a.tokens);
    const View uniform = present(a.uniform) ? view(kOp, "uniform", q, a.uniform) : View{};
    const cl::Buffer t = per_row(kOp, "temperature", q, a.temperature.per_row, rows * 4);
    const cl::Buffer k = per_row(kOp, "top_k", q, a.top_k.per_row, rows * 4);
    const cl::Buffer p = per_row(kOp, "top_p", q, a.top_p.per_row, rows * 4);
    const cl::Buffer min_p = per_row(kOp, "min_p", q, a.min_p.per_row, rows * 4);
    const cl::Buffer seed = per_row(kOp, "seed", q, a.seed.per_row, rows * 8);
    const cl::Buffer offset = per_row(kOp, "offset", q, a.offset.per_row, rows * 8);
    if (rows == 0) return;
    const cl::Buffer ws = opencl::workspace(kOp, q, workspace, rows * kRowBytes);
    cl_uint flags = 0;
    if (a.temperature.per_row) flags |= kPerRowT;
    if (a.top_k.per_row) flags |= kPerRowK;
    if (a.top_p.per_row) flags |= kPerRowP;
    if (a.min_p.per_row) flags |= kPerRowMinP;
    if (a.seed.per_row) flags |= kPerRowSeed;
    if (a.offset.per_row) flags |= kPerRowOffset;
    if (present(a.uniform)) flags |= kHasUniform;
    if (a.flags & NT_SAMPLE_TOP_P_JOINT) flags |= kJoint;
    if (a.tokens.dtype == NT_I32) flags |= kTokensI32;
    const ProgramSpec spec{{"sample_state.cl", "sample_passes.cl", "sample_select.cl", "sample.cl"},
                           "-DNT_ELEM=" + std::to_string(int(a.logits.dtype)) +
                               " -DNT_LIST_CAP=" + std::to_string(kListCap) +
                               " -DNT_STATE_BYTES=" + std::to_string(kStateBytes) +
                               " -DNT_ROW_WG=" + std::to_string(kRowWorkGroup)};
    for (const char* name : pipeline(a)) {
      cl::Kernel kern = kernel(kOp, q, spec, name);
      set_args(kern, logits.buffer, logits.offset, cl_ulong(a.logits.row_stride),
               cl_uint(a.logits.shape[1]), t, a.temperature.scalar, k, cl_int(a.top_k.scalar), p,
               a.top_p.scalar, min_p, a.min_p.scalar, seed, cl_ulong(a.seed.scalar), offset,
               cl_ulong(a.offset.scalar), uniform.buffer, uniform.offset, flags,
               mass_bits(a.logits.shape[1]), tokens.buffer, tokens.offset, ws);
      const size_t wg = work_group_size(kern, q, kRowWorkGroup);
      enqueue(kern, q, rows * wg, wg);
    }
  });
}

}  // namespace nt::opencl
