// nt_apply_logit_bias on CUDA: one CTA per row (grid B). The row's valid
// entries go into an open-addressing table (cuda/token_table.cuh), a slot
// being a key (id + 1), the token's first entry position (atomicMin) and its
// entry count (atomicAdd); then one pass over the occupied slots adds each
// token's values in entry order (a token with one entry adds it directly;
// repeats walk the row's entries from the first one) and writes the token
// once, every add rounded to the logits' dtype as on every backend. The table
// is in shared memory when twice the row's entries fit, else in the workspace.
// Nothing is read from the host: CUDA-graph capturable.
#include <cstdint>

#include "core/check.h"
#include "cuda/ops.cuh"
#include "cuda/token_table.cuh"

namespace nt::cuda {
namespace {

constexpr const char* kOp = "apply_logit_bias";
constexpr int kSlotBytes = 12;  // key, first entry, entry count
constexpr int kInsertUnroll = 4;
constexpr int kUpdateBatch = 8;

struct BiasArgs {
  void* logits;
  int64_t stride;
  int64_t rows;
  uint32_t vocab;
  table::List tokens;
  const float* values;
  uint32_t* table;      // workspace: keys, firsts, counts, table_slots each
  int64_t table_slots;  // 2 x the ids
  uint32_t shared_slots;
};

// Adds the c entries of token id, from position first on, in entry order.
template <nt_dtype DT>
__device__ __forceinline__ void update(table::Elem<DT>* row, const int32_t* ids,
                                       const float* values, uint32_t id, uint32_t first,
                                       uint32_t c, table::Elem<DT> v) {
  float x = widen<DT>(v);
  if (nt_f32_is_nan(x)) return;  // NaN logits keep their bits
  if (c == 1u) {
    x = nt_bias_logit(x, __ldg(values + first), int(DT));
  } else {
    for (uint32_t j = first, found = 0; found < c; ++j) {
      if (__ldg(ids + j) != int32_t(id)) continue;
      x = nt_bias_logit(x, __ldg(values + j), int(DT));
      ++found;
    }
  }
  row[id] = table::narrow<DT>(x);
}

template <nt_dtype DT, int T, bool SHARED>
__device__ void bias_with_table(table::Elem<DT>* row, uint32_t vocab, const int32_t* ids,
                                const float* values, uint32_t n, uint32_t* keys, uint32_t* firsts,
                                uint32_t* counts, uint32_t cap) {
  for (uint32_t s = threadIdx.x; s < cap; s += T) {
    keys[s] = 0u;
    firsts[s] = 0xFFFFFFFFu;
    counts[s] = 0u;
  }
  __syncthreads();
  for (uint32_t q0 = 0; q0 < n; q0 += T * kInsertUnroll) {
    int32_t id[kInsertUnroll];
#pragma unroll
    for (int u = 0; u < kInsertUnroll; ++u) {
      const uint32_t q = q0 + u * T + threadIdx.x;
      id[u] = q < n ? __ldg(ids + q) : -1;
    }
#pragma unroll
    for (int u = 0; u < kInsertUnroll; ++u) {
      if (uint32_t(id[u]) >= vocab) continue;  // out of range (negatives too): skipped
      const uint32_t s = table::claim(keys, cap, uint32_t(id[u]) + 1u);
      atomicMin(firsts + s, q0 + u * T + threadIdx.x);
      atomicAdd(counts + s, 1u);
    }
  }
  __syncthreads();
  for (uint32_t s0 = 0; s0 < cap; s0 += T * kUpdateBatch) {
    uint32_t key[kUpdateBatch];
    table::Elem<DT> v[kUpdateBatch];
#pragma unroll
    for (int u = 0; u < kUpdateBatch; ++u) {
      const uint32_t s = s0 + u * T + threadIdx.x;
      key[u] = s < cap ? table::read_slot<SHARED>(keys + s) : 0u;
    }
#pragma unroll
    for (int u = 0; u < kUpdateBatch; ++u)
      if (key[u]) v[u] = row[key[u] - 1u];
#pragma unroll
    for (int u = 0; u < kUpdateBatch; ++u) {
      if (!key[u]) continue;
      const uint32_t s = s0 + u * T + threadIdx.x;
      update<DT>(row, ids, values, key[u] - 1u, table::read_slot<SHARED>(firsts + s),
                 table::read_slot<SHARED>(counts + s), v[u]);
    }
  }
}

// Lists that are not a valid CSR and a row too long for shared memory: each
// token at its first position walks the rest of the row. Exact, O(n^2).
template <nt_dtype DT, int T>
__device__ void bias_without_table(table::Elem<DT>* row, uint32_t vocab, const int32_t* ids,
                                   const float* values, uint32_t n) {
  for (uint32_t q = threadIdx.x; q < n; q += T) {
    const int32_t id = __ldg(ids + q);
    if (uint32_t(id) >= vocab) continue;
    bool first = true;
    for (uint32_t j = 0; j < q && first; ++j) first = __ldg(ids + j) != id;
    if (!first) continue;
    uint32_t c = 0;
    for (uint32_t j = q; j < n; ++j) c += __ldg(ids + j) == id;
    update<DT>(row, ids, values, uint32_t(id), q, c, row[id]);
  }
}

template <nt_dtype DT, int T>
__global__ void __launch_bounds__(T) apply_logit_bias_kernel(BiasArgs a) {
  extern __shared__ uint32_t shared_table[];  // keys, firsts, counts: shared_slots each
  const int64_t b = blockIdx.x;
  int64_t lo, hi;
  table::row_range(a.tokens, b, &lo, &hi);
  const uint32_t n = uint32_t(hi - lo);
  if (n == 0) return;  // block-uniform
  auto* row = static_cast<table::Elem<DT>*>(a.logits) + b * a.stride;
  const int32_t* ids = a.tokens.ids + lo;
  const float* values = a.values + lo;
  const uint32_t cap = 2u * n;
  if (cap <= a.shared_slots) {
    bias_with_table<DT, T, true>(row, a.vocab, ids, values, n, shared_table,
                                 shared_table + a.shared_slots, shared_table + 2 * a.shared_slots,
                                 cap);
  } else if (table::lists_valid<T>(a.tokens, table::List{}, a.rows)) {
    const int64_t base = 2 * table::row_start(a.tokens, b);
    bias_with_table<DT, T, false>(row, a.vocab, ids, values, n, a.table + base,
                                  a.table + a.table_slots + base,
                                  a.table + 2 * a.table_slots + base, cap);
  } else {
    bias_without_table<DT, T>(row, a.vocab, ids, values, n);
  }
}

}  // namespace

size_t CudaBackend::apply_logit_bias_workspace_size(const nt_apply_logit_bias_args& a) {
  const int64_t ids = a.tokens.ids.shape[0];
  return ids == 0 ? 0 : kWorkspaceSlack + size_t(ids) * 2 * kSlotBytes;
}

void CudaBackend::apply_logit_bias(const nt_apply_logit_bias_args& args, void* workspace,
                                   size_t workspace_bytes, void* stream_handle) {
  check_workspace(kOp, apply_logit_bias_workspace_size(args), workspace, workspace_bytes);
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  const nt_tensor& logits = args.logits;
  const int64_t rows = logits.shape[0], ids = args.tokens.ids.shape[0];
  if (rows == 0 || ids == 0) return;
  const int device = logits.device_id;
  DeviceScope scope(device, kOp);
  BiasArgs a{};
  a.logits = logits.data;
  a.stride = logits.row_stride;
  a.rows = rows;
  a.vocab = uint32_t(logits.shape[1]);
  a.tokens = table::list_of(args.tokens);
  a.values = static_cast<const float*>(args.values.data);
  a.table = reinterpret_cast<uint32_t*>(aligned_workspace(workspace));
  a.table_slots = 2 * ids;
  a.shared_slots = table::shared_slots(ids, rows, kSlotBytes, device_limits(device, kOp));
  auto pick = [](auto dtype, auto threads) {
    return apply_logit_bias_kernel<decltype(dtype)::value, decltype(threads)::value>;
  };
  table::launch_rows(kOp, logits.dtype, ids, rows, size_t(a.shared_slots) * kSlotBytes, device,
                     stream, a, pick);
}

}  // namespace nt::cuda
