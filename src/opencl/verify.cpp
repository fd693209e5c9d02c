// verify_draft / verify_tree on OpenCL: one work-item per request
// (verify.cl); the workspace holds the tried children of tree walks.
#include <string>

#include "core/check.h"
#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt::opencl {
namespace {

// The kernel's flags besides the NT_PER_ROW_* bits (verify.cl's NT_V_JOINT ...).
constexpr cl_uint kJoint = 64, kTree = 128, kProbs = 256, kNodes = 512;

}  // namespace

size_t OpenclBackend::verify_workspace_size(const VerifyCall& c) {
  return c.tree ? size_t(c.requests * c.nodes) * sizeof(cl_long) : 0;
}

void OpenclBackend::verify(const VerifyCall& c, void* workspace_handle, size_t workspace_bytes,
                           void* stream) {
  const char* op = c.op;
  const size_t bytes = verify_workspace_size(c);
  check_workspace(op, bytes, workspace_handle, workspace_bytes);
  const Queue q = queue_of(op, stream);
  const size_t B = size_t(c.requests);
  guarded(op, [&] {
    const View target = view(op, "target_logits", q, c.target);
    const View out_ids = view(op, "out_ids", q, c.out_ids);
    const View num = view(op, "num_emitted", q, c.num_emitted);
    const View out_nodes = c.out_nodes.data ? view(op, "out_nodes", q, c.out_nodes) : View{};
    View drafts, cu, probs, cand, next, sib;
    if (c.tree) {
      cand = view(op, "candidates", q, c.candidates);
      next = view(op, "retrieve_next_token", q, c.next_token);
      sib = view(op, "retrieve_next_sibling", q, c.next_sibling);
    } else {
      if (c.drafts > 0) drafts = view(op, "draft_ids", q, c.draft_ids);
      cu = view(op, "cu_num_draft", q, c.cu_num_draft);
      if (c.draft_probs.data) probs = view(op, "draft_probs", q, c.draft_probs);
    }
    const RowParams params = row_params(op, q, B, c);
    if (B == 0) return;
    const cl::Buffer tried =
        bytes ? opencl::workspace(op, q, workspace_handle, workspace_bytes, bytes) : cl::Buffer();
    cl_uint flags = params.per_row_flags;
    if (c.joint) flags |= kJoint;
    if (c.tree) flags |= kTree;
    if (c.draft_probs.data) flags |= kProbs;
    if (c.out_nodes.data) flags |= kNodes;
    cl::Kernel kern = kernel(op, q, {{"verify.cl"}, "-DNT_ELEM=" + std::to_string(int(c.target.dtype))},
                             "nt_verify");
    set_args(kern, target, cl_ulong(c.target.row_stride), cl_uint(c.vocab), cl_uint(B),
             cl_uint(c.width), flags, cl_int(c.mass_bits), params, drafts, cl_uint(c.drafts), cu,
             probs, cl_ulong(c.draft_probs.row_stride), cand, cl_ulong(c.candidates.row_stride),
             next, cl_ulong(c.next_token.row_stride), sib, cl_ulong(c.next_sibling.row_stride),
             cl_uint(c.nodes), out_ids, cl_ulong(c.out_ids.row_stride), out_nodes,
             cl_ulong(c.out_nodes.row_stride), num, tried);
    enqueue(kern, q, B, 1);
  });
}

}  // namespace nt::opencl
