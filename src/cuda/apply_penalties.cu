// nt_apply_penalties on CUDA: one CTA per row (grid B), work in proportion to
// the row's ids. The row's ids that matter (the prompt's only when its
// repetition penalty is on) are inserted into an open-addressing table
// (cuda/token_table.cuh), a slot being a key (id + 1) and a word (bit 31: in
// the prompt, bits 0-30: output count) updated by 32-bit atomics; then one
// pass over the occupied slots reads, penalizes (core/penalties.h) and writes
// each token once. The table is in shared memory when twice the row's ids fit,
// else in the workspace. Nothing is read from the host: CUDA-graph capturable.
//
// Bytes (W7: B = 256, V = 128,256, 2,048 prompt + 512 output ids a row): the
// ids are read once (2.6 MB), the inserts are shared-memory atomics, and each
// of the ~650K distinct tokens is one scattered read-modify-write of a 32-byte
// sector, ~42 MB of sector traffic in all: that traffic is the floor. A thread
// loads its ids in one round (12 a thread) and issues the token reads of a
// batch of 10 slots before using any; 3 CTAs of 256 threads fit an SM (61 KB
// tables, 80 registers), so the 256 rows run in one wave.
#include <cstdint>

#include "core/check.h"
#include "cuda/ops.cuh"
#include "cuda/token_table.cuh"

namespace nt::cuda {
namespace {

constexpr const char* kOp = "apply_penalties";
constexpr int kSlotBytes = 8;  // key + word
constexpr int kInsertUnroll = 12;  // W7 rows (2,560 ids) load their ids in one round
constexpr int kUpdateBatch = 10;

struct PenaltyArgs {
  void* logits;
  int64_t stride;
  int64_t rows;
  uint32_t vocab;
  table::List prompt, output;
  const float* repetition;  // per row, or nullptr: the scalar
  const float* presence;
  const float* frequency;
  float repetition_scalar, presence_scalar, frequency_scalar;
  uint32_t* table;      // workspace: keys[table_slots], then words[table_slots]
  int64_t table_slots;  // 2 x the ids of both lists
  uint32_t shared_slots;
};

// The ids of one row: positions [0, np) of the prompt, then [np, n) of the output.
struct RowIds {
  const int32_t* prompt;
  const int32_t* output;
  uint32_t np, n;
  __device__ __forceinline__ int32_t at(uint32_t q) const {
    return q < np ? __ldg(prompt + q) : __ldg(output + (q - np));
  }
};

struct RowParams {
  float r, f, p;
};

template <nt_dtype DT>
__device__ __forceinline__ void update(table::Elem<DT>* row, uint32_t id, uint32_t count,
                                       const RowParams& q, table::Elem<DT> v) {
  const float x = widen<DT>(v);
  if (nt_f32_is_nan(x)) return;  // NaN logits keep their bits
  row[id] = table::narrow<DT>(nt_penalize_logit(x, count, q.r, q.f, q.p, int(DT)));
}

template <nt_dtype DT, int T, bool SHARED>
__device__ void penalize_with_table(table::Elem<DT>* row, uint32_t vocab, const RowIds& ids,
                                    uint32_t* keys, uint32_t* words, uint32_t cap,
                                    const RowParams& prm) {
  for (uint32_t s = threadIdx.x; s < cap; s += T) {
    keys[s] = 0u;
    words[s] = 0u;
  }
  __syncthreads();
  for (uint32_t q0 = 0; q0 < ids.n; q0 += T * kInsertUnroll) {
    int32_t id[kInsertUnroll];
#pragma unroll
    for (int u = 0; u < kInsertUnroll; ++u) {
      const uint32_t q = q0 + u * T + threadIdx.x;
      id[u] = q < ids.n ? ids.at(q) : -1;
    }
#pragma unroll
    for (int u = 0; u < kInsertUnroll; ++u) {
      if (uint32_t(id[u]) >= vocab) continue;  // out of range (negatives too): skipped
      const uint32_t s = table::claim(keys, cap, uint32_t(id[u]) + 1u);
      if (q0 + u * T + threadIdx.x < ids.np)
        atomicOr(words + s, NT_PENALTY_IN_PROMPT);
      else
        atomicAdd(words + s, 1u);
    }
  }
  __syncthreads();
  for (uint32_t s0 = 0; s0 < cap; s0 += T * kUpdateBatch) {
    uint32_t key[kUpdateBatch], word[kUpdateBatch];
    table::Elem<DT> v[kUpdateBatch];
#pragma unroll
    for (int u = 0; u < kUpdateBatch; ++u) {
      const uint32_t s = s0 + u * T + threadIdx.x;
      key[u] = s < cap ? table::read_slot<SHARED>(keys + s) : 0u;
      word[u] = key[u] ? table::read_slot<SHARED>(words + s) : 0u;
    }
#pragma unroll
    for (int u = 0; u < kUpdateBatch; ++u)
      if (key[u]) v[u] = row[key[u] - 1u];
#pragma unroll
    for (int u = 0; u < kUpdateBatch; ++u)
      if (key[u]) update<DT>(row, key[u] - 1u, word[u] & NT_PENALTY_COUNT_MASK, prm, v[u]);
  }
}

// Lists that are not a valid CSR and a row too long for shared memory: each
// token at its first position counts its output occurrences from there (none
// can come earlier). Exact, O(n^2).
template <nt_dtype DT, int T>
__device__ void penalize_without_table(table::Elem<DT>* row, uint32_t vocab, const RowIds& ids,
                                       const RowParams& prm) {
  for (uint32_t q = threadIdx.x; q < ids.n; q += T) {
    const int32_t id = ids.at(q);
    if (uint32_t(id) >= vocab) continue;
    bool first = true;
    for (uint32_t j = 0; j < q && first; ++j) first = ids.at(j) != id;
    if (!first) continue;
    uint32_t count = 0;
    for (uint32_t j = q > ids.np ? q : ids.np; j < ids.n; ++j) count += ids.at(j) == id;
    update<DT>(row, uint32_t(id), count, prm, row[id]);
  }
}

// At least 3 CTAs an SM (W7: 3 x 61 KB of tables, 256 rows in one wave on 132 SMs).
template <nt_dtype DT, int T>
__global__ void __launch_bounds__(T, 3) apply_penalties_kernel(PenaltyArgs a) {
  extern __shared__ uint32_t shared_table[];  // keys[shared_slots], words[shared_slots]
  const int64_t b = blockIdx.x;
  RowParams prm;
  prm.r = nt_resolve_repetition(a.repetition ? __ldg(a.repetition + b) : a.repetition_scalar);
  prm.p = nt_resolve_additive_penalty(a.presence ? __ldg(a.presence + b) : a.presence_scalar);
  prm.f = nt_resolve_additive_penalty(a.frequency ? __ldg(a.frequency + b) : a.frequency_scalar);
  if (prm.r == 1.0f && prm.f == 0.0f && prm.p == 0.0f) return;  // block-uniform
  int64_t plo, phi, olo, ohi;
  table::row_range(a.prompt, b, &plo, &phi);
  table::row_range(a.output, b, &olo, &ohi);
  if (prm.r == 1.0f) phi = plo;  // the prompt only matters to the repetition penalty
  RowIds ids;
  ids.prompt = a.prompt.ids + plo;
  ids.output = a.output.ids + olo;
  ids.np = uint32_t(phi - plo);
  ids.n = ids.np + uint32_t(ohi - olo);
  if (ids.n == 0) return;
  auto* row = static_cast<table::Elem<DT>*>(a.logits) + b * a.stride;
  const uint32_t cap = 2u * ids.n;  // < 2^32: lists hold < 2^30 ids
  if (cap <= a.shared_slots) {
    penalize_with_table<DT, T, true>(row, a.vocab, ids, shared_table, shared_table + a.shared_slots,
                                     cap, prm);
  } else if (table::lists_valid<T>(a.prompt, a.output, a.rows)) {
    const int64_t base = 2 * (table::row_start(a.prompt, b) + table::row_start(a.output, b));
    penalize_with_table<DT, T, false>(row, a.vocab, ids, a.table + base,
                                      a.table + a.table_slots + base, cap, prm);
  } else {
    penalize_without_table<DT, T>(row, a.vocab, ids, prm);
  }
}

}  // namespace

size_t CudaBackend::apply_penalties_workspace_size(const nt_apply_penalties_args& a) {
  const int64_t ids = list_ids(a.prompt) + list_ids(a.output);
  return ids == 0 ? 0 : kWorkspaceSlack + size_t(ids) * 2 * kSlotBytes;
}

void CudaBackend::apply_penalties(const nt_apply_penalties_args& args, void* workspace,
                                  size_t workspace_bytes, void* stream_handle) {
  check_workspace(kOp, apply_penalties_workspace_size(args), workspace, workspace_bytes);
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  const nt_tensor& logits = args.logits;
  const int64_t rows = logits.shape[0];
  const int64_t ids = list_ids(args.prompt) + list_ids(args.output);
  if (rows == 0 || ids == 0) return;
  const bool per_row = args.repetition.per_row || args.presence.per_row || args.frequency.per_row;
  if (!per_row && args.repetition.scalar == 1.0f && args.presence.scalar == 0.0f &&
      args.frequency.scalar == 0.0f)
    return;
  const int device = logits.device_id;
  DeviceScope scope(device, kOp);
  const bool capturing = table::stream_capturing(stream, kOp);
  table::check_per_row(kOp, "repetition", args.repetition.per_row, device, capturing);
  table::check_per_row(kOp, "presence", args.presence.per_row, device, capturing);
  table::check_per_row(kOp, "frequency", args.frequency.per_row, device, capturing);

  PenaltyArgs a{};
  a.logits = logits.data;
  a.stride = logits.row_stride;
  a.rows = rows;
  a.vocab = uint32_t(logits.shape[1]);
  a.prompt = table::list_of(args.prompt);
  a.output = table::list_of(args.output);
  a.repetition = static_cast<const float*>(args.repetition.per_row);
  a.presence = static_cast<const float*>(args.presence.per_row);
  a.frequency = static_cast<const float*>(args.frequency.per_row);
  a.repetition_scalar = args.repetition.scalar;
  a.presence_scalar = args.presence.scalar;
  a.frequency_scalar = args.frequency.scalar;
  a.table = reinterpret_cast<uint32_t*>(aligned_workspace(workspace));
  a.table_slots = 2 * ids;
  // Rows the shared table is sized for: the prompt counts unless the repetition
  // penalty is a scalar 1 (then no row inserts it).
  const bool prompt_used = args.repetition.per_row || args.repetition.scalar != 1.0f;
  const int64_t used = list_ids(args.output) + (prompt_used ? list_ids(args.prompt) : 0);
  if (used == 0) return;
  a.shared_slots = table::shared_slots(used, rows, kSlotBytes, device_limits(device, kOp));
  auto pick = [](auto dtype, auto threads) {
    return apply_penalties_kernel<decltype(dtype)::value, decltype(threads)::value>;
  };
  table::launch_rows(kOp, logits.dtype, used, rows, size_t(a.shared_slots) * kSlotBytes, device,
                     stream, a, pick);
}

}  // namespace nt::cuda
