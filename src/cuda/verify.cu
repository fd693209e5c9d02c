// verify_draft / verify_tree on CUDA: the workspace layout, the checks of
// per-request arrays and the launch of the kernels of cuda/verify_kernels.cuh
// (which describes them).
#include "cuda/ops.cuh"
#include "cuda/token_table.cuh"  // check_per_row, stream_capturing
#include "cuda/verify_launch.cuh"

namespace nt::cuda {
namespace {

using verify_kernels::kListCap;
using verify_kernels::RowInfo;
using verify_kernels::VerifyArgs;
using verify_kernels::VerifyKernels;

// Workspace: a RowInfo and a list of kListCap ids per (request, position)
// slot (chain: width positions; tree: nodes), then the tried children of tree walks.
struct Layout {
  int64_t rows;
  size_t info_bytes, list_bytes, tried_bytes;
  explicit Layout(const VerifyCall& c)
      : rows(c.target.shape[0] == 0 ? 0 : c.requests * (c.tree ? c.nodes : c.width)),
        info_bytes(align_up(size_t(rows) * sizeof(RowInfo), 256)),
        list_bytes(align_up(size_t(rows) * kListCap * sizeof(int32_t), 256)),
        tried_bytes(c.tree ? align_up(size_t(c.requests * c.nodes) * sizeof(int64_t), 256) : 0) {}
  size_t bytes() const {
    return rows == 0 ? 0 : kWorkspaceSlack + info_bytes + list_bytes + tried_bytes;
  }
};

}  // namespace

size_t CudaBackend::verify_workspace_size(const VerifyCall& c) { return Layout(c).bytes(); }

void CudaBackend::verify(const VerifyCall& c, void* workspace, size_t workspace_bytes,
                         void* stream_handle) {
  const Layout L(c);
  check_workspace(c.op, L.bytes(), workspace, workspace_bytes);
  if (c.requests == 0) return;
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  DeviceScope scope(c.target.device_id, c.op);
  // Per-request arrays in host memory would fault in the kernels: refused
  // (outside graph capture, where the driver may be asked).
  const bool capturing = table::stream_capturing(stream, c.op);
  table::check_per_row(c.op, "temperature", c.temperature.per_row, c.target.device_id, capturing);
  table::check_per_row(c.op, "top_k", c.top_k.per_row, c.target.device_id, capturing);
  table::check_per_row(c.op, "top_p", c.top_p.per_row, c.target.device_id, capturing);
  table::check_per_row(c.op, "min_p", c.min_p.per_row, c.target.device_id, capturing);
  table::check_per_row(c.op, "seed", c.seed.per_row, c.target.device_id, capturing);
  table::check_per_row(c.op, "offset", c.offset.per_row, c.target.device_id, capturing);
  VerifyArgs a{};
  a.target = c.target.data;
  a.stride = c.target.row_stride;
  a.vocab = u32(c.vocab);
  a.requests = u32(c.requests);
  a.width = u32(c.width);
  a.tree = c.tree;
  a.nodes = u32(c.nodes);
  a.drafts = c.drafts;
  a.draft_ids = static_cast<const int32_t*>(c.draft_ids.data);
  a.cu = static_cast<const int32_t*>(c.cu_num_draft.data);
  a.probs = static_cast<const float*>(c.draft_probs.data);
  a.probs_stride = c.draft_probs.row_stride;
  a.cand = static_cast<const int64_t*>(c.candidates.data);
  a.cand_stride = c.candidates.row_stride;
  a.next = static_cast<const int64_t*>(c.next_token.data);
  a.next_stride = c.next_token.row_stride;
  a.sib = static_cast<const int64_t*>(c.next_sibling.data);
  a.sib_stride = c.next_sibling.row_stride;
  a.temperature = c.temperature;
  a.top_k = c.top_k;
  a.top_p = c.top_p;
  a.min_p = c.min_p;
  a.seed = c.seed;
  a.offset = c.offset;
  a.joint = c.joint;
  a.bits = c.mass_bits;
  a.out_ids = static_cast<int32_t*>(c.out_ids.data);
  a.out_stride = c.out_ids.row_stride;
  a.out_nodes = static_cast<int32_t*>(c.out_nodes.data);
  a.nodes_stride = c.out_nodes.row_stride;
  a.num_emitted = static_cast<int32_t*>(c.num_emitted.data);
  char* base = aligned_workspace(workspace);
  a.info = reinterpret_cast<RowInfo*>(base);
  a.lists = reinterpret_cast<int32_t*>(base + L.info_bytes);
  a.tried = c.tree ? reinterpret_cast<int64_t*>(base + L.info_bytes + L.list_bytes) : nullptr;
  const dim3 rows_grid(u32(c.requests), u32(c.tree ? c.nodes : c.width));
  switch (c.target.dtype) {
    case NT_F32: VerifyKernels<NT_F32>::launch(a, rows_grid, stream, c.op); break;
    case NT_F16: VerifyKernels<NT_F16>::launch(a, rows_grid, stream, c.op); break;
    case NT_BF16: VerifyKernels<NT_BF16>::launch(a, rows_grid, stream, c.op); break;
    default: fail_argument(c.op, "target_logits", "has an unsupported dtype");
  }
}

}  // namespace nt::cuda
