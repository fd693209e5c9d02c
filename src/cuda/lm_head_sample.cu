// lm_head_sample_dense / _binary and their shard forms on CUDA
// (docs/SEMANTICS.md, "Fused hidden -> token"). The heads' own scoring kernels
// write every score into the workspace (cuda/lm_head_ops.cuh: the kernels and
// arithmetic of lm_head_topk_*, with a sink that stores instead of selecting).
// Single call: the bitmask op masks the scores in place and sample
// (sample_logprobs for a logprobs request) draws from them, all on the call's
// stream, so the token is nt_sample's on those masked scores by construction,
// as on the CPU and OpenCL. Shard call: summary_kernel writes each row's
// summary (the words of core/lm_head_summary.h) from the shard's scores, one
// CTA a row, for nt_lm_head_sample_combine on the host.
// Workspace: the [M, V] scores (256-byte aligned), then one region that the
// scoring pass's scratch (the binary head's permuted activations) and then the
// sampler's workspace, or the summaries' lists, share.
#include <cuda_runtime.h>

#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <string>

#include "core/bitmask.h"
#include "core/check.h"
#include "core/fused_sample.h"
#include "core/lm_head_summary.h"
#include "core/ordering.h"
#include "core/portable_exp.h"
#include "core/sampling.h"
#include "cuda/block_select.cuh"
#include "cuda/device.cuh"
#include "cuda/lm_head_ops.cuh"
#include "cuda/load.cuh"
#include "cuda/ops.cuh"
#include "cuda/sample_common.cuh"
#include "cuda/sample_launch.cuh"

namespace nt::cuda {
namespace {

struct FusedLayout {
  size_t scores_bytes;  // the shared region starts here
  size_t shared_bytes;
  size_t total;
};

FusedLayout fused_layout(int64_t rows, int64_t vocab, size_t head_bytes, size_t after_bytes) {
  FusedLayout L;
  L.scores_bytes = align_up(size_t(rows) * size_t(vocab) * 4, 256);
  L.shared_bytes = align_up(std::max(head_bytes, after_bytes), 256);
  L.total = L.scores_bytes + L.shared_bytes + kWorkspaceSlack;
  return L;
}

nt_sample_args sample_args(void* scores, int64_t rows, int64_t vocab, int device,
                           const nt_lm_head_sampling& s, const nt_tensor& tokens) {
  return fused_sample_args(scores_matrix(scores, rows, vocab, NT_DEVICE_CUDA, device), s, tokens);
}

// ---- the shard summary ------------------------------------------------------------

constexpr int kSummaryThreads = 512;
constexpr int kSummaryWarps = kSummaryThreads / 32;

// K, the candidates a shard's summary row keeps (its logprobs words excluded).
int64_t shard_candidates(const nt_lm_head_shard& shard) {
  return summary_candidates(shard.summary, shard_logprobs_words(shard));
}

// Per row: the finite tokens' composites (any order), then the K best of them,
// sorted, in a power-of-two list.
struct SummaryLists {
  int64_t sorted_stride;
  size_t sorted_at, bytes;
};

SummaryLists summary_lists(int64_t rows, int64_t vocab, int64_t candidates) {
  SummaryLists L;
  L.sorted_stride = 1;
  while (L.sorted_stride < std::min(candidates, vocab)) L.sorted_stride *= 2;
  L.sorted_at = align_up(size_t(rows) * size_t(vocab) * 8, 256);
  L.bytes = L.sorted_at + size_t(rows) * size_t(L.sorted_stride) * 8;
  return L;
}

struct SummaryArgs {
  const float* scores;  // [M, V_r]
  int64_t vocab;        // V_r
  int64_t vocab_start, vocab_size, first_row;
  const uint32_t* mask;  // null: none
  int64_t mask_stride, mask_words;
  nt_lm_head_sampling sampling;
  int64_t* summary;
  int64_t summary_stride, candidates;
  u64* items;   // [M][V_r]
  u64* sorted;  // [M][sorted_stride]
  int64_t sorted_stride;
  // The logprobs request (n_lp < 0: none): its words after the candidates, and
  // the masked scores for nt_lm_head_shard_ranks.
  int32_t n_lp;
  uint32_t lp_mode;
  float* masked;
  int64_t masked_stride;
};

using SummaryMax = cub::BlockReduce<u64, kSummaryThreads>;
using SummaryCount = cub::BlockReduce<u32, kSummaryThreads>;

struct SummaryShared {
  SelectScratch select;
  SummaryMax::TempStorage max[3];  // s_max and the two draws reduce at once, with no barrier between
  SummaryCount::TempStorage count;
  double mass[kSummaryWarps];
  u32 finite, gathered;
  int64_t header[NT_LM_HEAD_SUMMARY_WORDS];
  u64 top[32];  // the logprobs' first n tokens, sorted (one warp's bitonic sort)
};
static_assert(NT_MAX_LOGPROBS <= 32, "SummaryShared::top holds the logprobs' first n tokens");

// The block's sum of one double per thread, in a fixed order (each warp's
// tree, then the warps in order): the same value on every run.
__device__ __forceinline__ double block_sum(double v, double* warp_part) {
  v = warp_sum(v);
  __syncthreads();
  if (lane_index() == 0) warp_part[threadIdx.x / 32] = v;
  __syncthreads();
  double r = 0.0;
  for (int w = 0; w < kSummaryWarps; ++w) r += warp_part[w];
  return r;
}

// The first n (>= 1) of the distinct composites items[0, count), sorted
// descending, into out[0, n), with zeros after them up to the power of two at
// or above n (out holds that many).
__device__ void select_sorted(const u64* items, int64_t count, int64_t n, u64* out, SummaryShared& sh) {
  const int tid = int(threadIdx.x);
  int padded = 1;
  while (padded < n) padded *= 2;
  const u64 kth = block_select_kth<kSummaryThreads>(items, int(count), u32(n), sh.select);
  if (tid == 0) sh.gathered = 0;
  for (int64_t i = n + tid; i < padded; i += kSummaryThreads) out[i] = 0;
  __syncthreads();
  for (int64_t i0 = 0; i0 < count; i0 += kSummaryThreads) {
    const int64_t i = i0 + tid;
    const bool take = i < count && items[i] >= kth;
    const u32 slot = warp_append(take, &sh.gathered);
    if (take) out[slot] = items[i];
  }
  bitonic_sort_desc<kSummaryThreads>(out, padded);
}

// Row blockIdx.x's summary over the shard's tokens (core/lm_head_summary.h lists
// the words; the CPU's summarize_row and summarize_logprobs are the definition).
// Sums are fixed-order block sums, so a row's summary is the same on every run.
__global__ void __launch_bounds__(kSummaryThreads) summary_kernel(const SummaryArgs a) {
  using namespace summary;
  __shared__ SummaryShared sh;
  const u32 m = blockIdx.x;
  const int tid = int(threadIdx.x);
  const float* x = a.scores + int64_t(m) * a.vocab;
  int64_t* out = a.summary + int64_t(m) * a.summary_stride;
  u64* items = a.items + int64_t(m) * a.vocab;
  u64* sorted = a.sorted + int64_t(m) * a.sorted_stride;
  const int64_t n_tokens = max(int64_t(0), min(a.vocab, a.vocab_size - a.vocab_start));
  const nt_lm_head_sampling& s = a.sampling;
  const nt_row_params p = nt_resolve_row_params(param_at(s.temperature, m), param_at(s.top_k, m),
                                                param_at(s.top_p, m), param_at(s.min_p, m),
                                                int32_t(a.vocab_size));
  const int cls = nt_row_class(p, 0);
  const u64 seed = param_at(s.seed, m), offset = param_at(s.offset, m);
  const u32 tag = nt_row_tag(s.seed.per_row != nullptr, u32(a.first_row + m));
  const uint32_t* mask = a.mask ? a.mask + int64_t(m) * a.mask_stride : nullptr;
  auto logit = [&](int64_t i) { return nt_mask_allows(mask, a.mask_words, a.vocab_start + i) ? x[i] : -INFINITY; };
  if (tid == 0) sh.finite = 0;
  __syncthreads();

  // One pass: the greedy maximum of x; s's maximum, the best +inf draw, the
  // finite count, the plain draw, and (filtered rows) the finite composites.
  u64 greedy = 0, pos_inf = 0, plain = 0;
  u32 s_max = NT_KEY_NEG_INF;
  const bool listing = cls == NT_ROW_FILTERED;
  for (int64_t i0 = 0; i0 < n_tokens; i0 += kSummaryThreads) {
    const int64_t i = i0 + tid;
    const bool in = i < n_tokens;
    const u32 id = u32(a.vocab_start + i);
    const float xi = in ? logit(i) : -INFINITY;
    const u64 gk = in ? composite(nt_order_key(xi), id) : 0;
    greedy = gk > greedy ? gk : greedy;
    bool finite = false;
    u64 c = 0;
    if (in && cls != NT_ROW_GREEDY) {
      const float si = nt_scaled_score(xi, p.temperature);
      const u32 k = nt_order_key(si);
      s_max = k > s_max ? k : s_max;
      if (k == NT_KEY_POS_INF) {
        const u64 d = composite(nt_order_key(nt_perturbed_score(si, nt_token_gumbel(seed, offset, tag, id), 1)), id);
        pos_inf = d > pos_inf ? d : pos_inf;
      } else if (k != NT_KEY_NEG_INF) {
        finite = true;
        c = composite(k, id);
        if (cls == NT_ROW_PLAIN) {
          const u64 d = composite(nt_order_key(si + nt_token_gumbel(seed, offset, tag, id)), id);
          plain = d > plain ? d : plain;
        }
      }
    }
    const u32 slot = warp_append(finite, &sh.finite);
    if (finite && listing) items[slot] = c;
  }
  greedy = SummaryMax(sh.max[0]).Reduce(greedy, MaxU64());  // thread 0 gets the block's
  __syncthreads();
  const u32 finite = sh.finite;
  if (tid == 0) {
    for (int w = 0; w < NT_LM_HEAD_SUMMARY_WORDS; ++w) sh.header[w] = 0;
    sh.header[kSMax] = NT_KEY_NEG_INF;
    sh.header[kGreedy] = n_tokens == 0 ? pack(NT_KEY_NEG_INF, kNoId)
                                       : pack(composite_key(greedy), int32_t(composite_index(greedy)));
    sh.header[kPlain] = pack(0u, kNoId);
    sh.header[kPosInf] = pack(0u, kNoId);
  }
  if (cls != NT_ROW_GREEDY && n_tokens > 0) {
    const u64 block_s_max = SummaryMax(sh.max[0]).Reduce(u64(s_max), MaxU64());
    pos_inf = SummaryMax(sh.max[1]).Reduce(pos_inf, MaxU64());
    plain = SummaryMax(sh.max[2]).Reduce(plain, MaxU64());
    if (tid == 0) sh.header[kSMax] = block_s_max;
    __syncthreads();
    s_max = u32(sh.header[kSMax]);
    const bool settled = finite == 0 || s_max == NT_KEY_POS_INF;
    const int64_t n = settled || cls != NT_ROW_FILTERED ? 0 : min(a.candidates, int64_t(finite));

    // Filtered rows: the mass for top-p, then the first n composites in order.
    double z = 0.0;
    if (!settled && cls == NT_ROW_FILTERED && p.top_p < 1.0f) {
      const float sm = nt_key_to_float(s_max);
      for (int64_t i = tid; i < n_tokens; i += kSummaryThreads) {
        const float si = nt_scaled_score(logit(i), p.temperature);
        const u32 k = nt_order_key(si);
        if (k != NT_KEY_NEG_INF && k != NT_KEY_POS_INF) z += double(nt_portable_exp(si - sm));
      }
      z = block_sum(z, sh.mass);
    }
    if (n > 0) {
      select_sorted(items, finite, n, sorted, sh);
      for (int64_t f = tid; f < n; f += kSummaryThreads) {
        const u32 id = composite_index(sorted[f]);
        out[NT_LM_HEAD_SUMMARY_WORDS + f] = pack(nt_as_u32(logit(int64_t(id) - a.vocab_start)), int32_t(id));
      }
    }
    if (tid == 0) {
      sh.header[kMass] = __double_as_longlong(z);
      if (plain != 0 && !settled && cls == NT_ROW_PLAIN)
        sh.header[kPlain] = pack(nt_as_u32(nt_key_to_float(composite_key(plain))), int32_t(composite_index(plain)));
      if (pos_inf != 0)
        sh.header[kPosInf] =
            pack(nt_as_u32(nt_key_to_float(composite_key(pos_inf))), int32_t(composite_index(pos_inf)));
      sh.header[kFinite] = finite;
      sh.header[kCandidates] = n;
    }
  }
  __syncthreads();
  if (a.n_lp < 0) {
    if (tid < NT_LM_HEAD_SUMMARY_WORDS) out[tid] = sh.header[tid];
    return;
  }

  // The logprobs words (cpu/lm_head_sample.cpp, summarize_logprobs) and the
  // masked scores.
  float* masked = a.masked + int64_t(m) * a.masked_stride;
  for (int64_t i = tid; i < a.vocab; i += kSummaryThreads) masked[i] = i < n_tokens ? logit(i) : -INFINITY;
  const bool processed = a.lp_mode == NT_LOGPROBS_PROCESSED;
  double z = 0.0;
  u32 pos_inf_count = 0;
  if (!processed) {
    const float xmax = nt_key_to_float(low(sh.header[kGreedy]));
    for (int64_t i = tid; i < n_tokens; i += kSummaryThreads) {
      const float xi = logit(i);
      pos_inf_count += xi == INFINITY;
      if (isfinite(xmax) && isfinite(xi)) z += exp(double(xi) - double(xmax));
    }
  } else if (cls != NT_ROW_GREEDY) {
    const float sm = nt_key_to_float(low(sh.header[kSMax]));
    const bool mass = cls == NT_ROW_PLAIN && isfinite(sm);
    for (int64_t i = tid; i < n_tokens; i += kSummaryThreads) {
      const float si = nt_scaled_score(logit(i), p.temperature);
      pos_inf_count += si == INFINITY;
      if (mass && isfinite(si)) z += exp(double(si) - double(sm));
    }
  }
  z = block_sum(z, sh.mass);
  pos_inf_count = SummaryCount(sh.count).Reduce(pos_inf_count, SumU32());
  // The first n_lp tokens by (x key desc, id asc), -inf and NaN included.
  const int32_t top_n = int32_t(min(int64_t(a.n_lp), n_tokens));
  if (top_n > 0) {
    for (int64_t i = tid; i < n_tokens; i += kSummaryThreads)
      items[i] = composite(nt_order_key(logit(i)), u32(a.vocab_start + i));
    select_sorted(items, n_tokens, top_n, sh.top, sh);
  }
  if (tid == 0) {
    int64_t* lp = out + NT_LM_HEAD_SUMMARY_WORDS + a.candidates;
    sh.header[kRequest] = request_word(true, a.n_lp, a.lp_mode);
    lp[kLpMass] = __double_as_longlong(z);
    lp[kLpPosInfCount] = pos_inf_count;
    for (int w = 0; w < 2; ++w) {
      const int32_t g = id(sh.header[kPlain + w]);
      lp[kLpPlainX + w] = g == kNoId ? pack(0u, kNoId) : pack(nt_as_u32(logit(int64_t(g) - a.vocab_start)), g);
    }
    for (int32_t c = 0; c < a.n_lp; ++c) {
      if (c >= top_n) {
        lp[kLpTop + c] = pack(0u, kNoId);
        continue;
      }
      const u32 token = composite_index(sh.top[c]);
      lp[kLpTop + c] = pack(nt_as_u32(logit(int64_t(token) - a.vocab_start)), int32_t(token));
    }
  }
  __syncthreads();
  if (tid < NT_LM_HEAD_SUMMARY_WORDS) out[tid] = sh.header[tid];
}

// The shard's rank counts (nt_lm_head_shard_ranks): block (chunk, row) counts its
// share of row m's keys in [lo, hi] and adds it to counts[m] (zeroed first);
// integer adds, so the order they land in does not matter.
constexpr int kRanksThreads = 256;

__global__ void __launch_bounds__(kRanksThreads) shard_ranks_kernel(const float* scores, int64_t stride,
                                                                    int64_t cols, const int64_t* keys,
                                                                    int32_t* counts) {
  const int64_t m = blockIdx.x;
  const summary::RankRange r = summary::rank_range(keys[m]);
  if (r.empty()) return;
  int32_t c = 0;
  for (int64_t i = int64_t(blockIdx.y) * kRanksThreads + threadIdx.x; i < cols; i += int64_t(gridDim.y) * kRanksThreads)
    c += r.holds(nt_order_key(scores[m * stride + i]));
  c = warp_sum(c);
  if (lane_index() == 0 && c != 0) atomicAdd(&counts[m], c);
}

// The scores' copy for the caller, when asked for.
void copy_scores(const char* op, const nt_tensor& out, const float* scores, int64_t rows, int64_t vocab,
                 cudaStream_t stream) {
  if (!present(out)) return;
  const size_t pitch = size_t(std::max<int64_t>(out.row_stride, vocab)) * 4;
  check_cuda(cudaMemcpy2DAsync(out.data, pitch, scores, size_t(vocab) * 4, size_t(vocab) * 4, size_t(rows),
                               cudaMemcpyDeviceToDevice, stream),
             op);
}

// The shared region's later use: the draw's workspace, or the summaries' lists.
template <class Args>
size_t after_scores(CudaBackend& b, const Args& a, int64_t rows, int64_t vocab, int device,
                    const nt_lm_head_shard* shard) {
  if (shard != nullptr) return summary_lists(rows, vocab, shard_candidates(*shard)).bytes;
  return b.fused_draw_workspace_size(sample_args(placeholder_scores(), rows, vocab, device, a.sampling, a.tokens),
                                     fused_logprobs(a));
}

// After the scoring pass: the copy the caller asked for, then the mask and the
// draw (single call) or the summaries (shard call).
template <class Args>
void finish(CudaBackend& b, const char* op, const Args& a, const nt_lm_head_shard* shard, const FusedLayout& L,
            char* ws, int64_t rows, int64_t vocab, int device, cudaStream_t stream) {
  float* scores = reinterpret_cast<float*>(ws);
  copy_scores(op, a.scores, scores, rows, vocab, stream);
  char* shared = ws + L.scores_bytes;
  if (shard == nullptr) {
    b.fused_draw(sample_args(scores, rows, vocab, device, a.sampling, a.tokens), a.bitmask, fused_logprobs(a),
                 shared, L.shared_bytes, stream);
    return;
  }
  const SummaryLists lists = summary_lists(rows, vocab, shard_candidates(*shard));
  SummaryArgs s{};
  s.scores = scores;
  s.vocab = vocab;
  s.vocab_start = shard->vocab_start;
  s.vocab_size = shard->vocab_size;
  s.first_row = shard->first_row;
  if (present(a.bitmask)) {
    s.mask = static_cast<const uint32_t*>(a.bitmask.data);
    s.mask_stride = a.bitmask.shape[0] > 1 ? a.bitmask.row_stride : 0;
    s.mask_words = a.bitmask.shape[1];
  }
  s.sampling = a.sampling;
  s.summary = static_cast<int64_t*>(shard->summary.data);
  s.summary_stride = shard->summary.row_stride;
  s.candidates = shard_candidates(*shard);
  s.items = reinterpret_cast<u64*>(shared);
  s.sorted = reinterpret_cast<u64*>(shared + lists.sorted_at);
  s.sorted_stride = lists.sorted_stride;
  s.n_lp = -1;
  if (shard_logprobs(*shard)) {
    s.n_lp = shard->num_logprobs;
    s.lp_mode = shard->logprobs_mode;
    s.masked = static_cast<float*>(shard->scores.data);
    s.masked_stride = shard->scores.row_stride;
  }
  summary_kernel<<<unsigned(rows), kSummaryThreads, 0, stream>>>(s);
  check_launch(op);
}

// The limits of what follows the scoring pass, checked before its first launch.
template <class Args>
void check_limits(const char* op, const Args& a, const nt_lm_head_shard* shard, int64_t rows, int64_t vocab,
                  int device) {
  if (shard == nullptr) {
    check_sample_limits(op, check_sample(sample_args(placeholder_scores(), rows, vocab, device, a.sampling, a.tokens)));
  } else if (rows > INT32_MAX) {
    fail(NT_ERROR_UNSUPPORTED, std::string(op) + ": the CUDA backend takes at most 2^31-1 rows, got " +
                                   std::to_string(rows));
  }
}

nt_lm_head_dense_args dense_head(const nt_lm_head_sample_dense_args& a) {
  nt_lm_head_dense_args h{};
  h.hidden = a.hidden;
  h.weight = a.weight;
  h.bias = a.bias;
  h.k = 1;
  return h;
}

nt_lm_head_binary_args binary_head(const nt_lm_head_sample_binary_args& a) {
  nt_lm_head_binary_args h{};
  h.act_q = a.act_q;
  h.act_scale = a.act_scale;
  h.wq = a.wq;
  h.wscale = a.wscale;
  h.bias = a.bias;
  h.group_size = a.group_size;
  h.k = 1;
  return h;
}

const char* dense_op(const nt_lm_head_shard* shard) { return shard ? "lm_head_shard_dense" : "lm_head_sample_dense"; }
const char* binary_op(const nt_lm_head_shard* shard) {
  return shard ? "lm_head_shard_binary" : "lm_head_sample_binary";
}

}  // namespace

size_t CudaBackend::lm_head_sample_dense_workspace_size(const nt_lm_head_sample_dense_args& a,
                                                        const nt_lm_head_shard* shard) {
  const int64_t rows = a.hidden.shape[0], vocab = a.weight.shape[0];
  if (rows == 0) return 0;
  return fused_layout(rows, vocab, 0, after_scores(*this, a, rows, vocab, a.weight.device_id, shard)).total;
}

void CudaBackend::lm_head_sample_dense(const nt_lm_head_sample_dense_args& a, const nt_lm_head_shard* shard,
                                       void* workspace, size_t workspace_bytes, void* stream) {
  const char* op = dense_op(shard);
  const int64_t rows = a.hidden.shape[0], vocab = a.weight.shape[0];
  if (rows == 0) return;
  const int device = a.weight.device_id;
  DeviceScope scope(device, op);
  const FusedLayout L = fused_layout(rows, vocab, 0, after_scores(*this, a, rows, vocab, device, shard));
  check_workspace(op, L.total, workspace, workspace_bytes);
  check_limits(op, a, shard, rows, vocab, device);
  char* ws = aligned_workspace(workspace);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  lm_head_scores_dense(op, dense_head(a), reinterpret_cast<float*>(ws), vocab, s);
  finish(*this, op, a, shard, L, ws, rows, vocab, device, s);
}

size_t CudaBackend::lm_head_sample_binary_workspace_size(const nt_lm_head_sample_binary_args& a,
                                                         const nt_lm_head_shard* shard) {
  const char* op = binary_op(shard);
  const int64_t rows = a.act_q.shape[0], vocab = a.wq.shape[0];
  if (rows == 0) return 0;
  return fused_layout(rows, vocab, lm_head_scores_binary_workspace_size(op, binary_head(a)),
                      after_scores(*this, a, rows, vocab, a.wq.device_id, shard)).total;
}

void CudaBackend::lm_head_sample_binary(const nt_lm_head_sample_binary_args& a, const nt_lm_head_shard* shard,
                                        void* workspace, size_t workspace_bytes, void* stream) {
  const char* op = binary_op(shard);
  const int64_t rows = a.act_q.shape[0], vocab = a.wq.shape[0];
  if (rows == 0) return;
  const int device = a.wq.device_id;
  DeviceScope scope(device, op);
  const nt_lm_head_binary_args head = binary_head(a);
  const size_t head_bytes = lm_head_scores_binary_workspace_size(op, head);
  const FusedLayout L =
      fused_layout(rows, vocab, head_bytes, after_scores(*this, a, rows, vocab, device, shard));
  check_workspace(op, L.total, workspace, workspace_bytes);
  check_limits(op, a, shard, rows, vocab, device);
  char* ws = aligned_workspace(workspace);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  lm_head_scores_binary(op, head, reinterpret_cast<float*>(ws), vocab, ws + L.scores_bytes, head_bytes, s);
  finish(*this, op, a, shard, L, ws, rows, vocab, device, s);
}

void CudaBackend::lm_head_shard_ranks(const nt_lm_head_shard_ranks_args& a, void* stream) {
  const char* op = "lm_head_shard_ranks";
  const int64_t rows = a.scores.shape[0], cols = a.scores.shape[1];
  if (rows == 0) return;
  if (rows > INT32_MAX)
    fail(NT_ERROR_UNSUPPORTED, std::string(op) + ": the CUDA backend takes at most 2^31-1 rows, got " +
                                   std::to_string(rows));
  DeviceScope scope(a.scores.device_id, op);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  check_cuda(cudaMemsetAsync(a.counts.data, 0, size_t(rows) * 4, s), op);
  if (cols == 0) return;
  const unsigned chunks = unsigned(std::min<int64_t>((cols + 8 * kRanksThreads - 1) / (8 * kRanksThreads), 64));
  shard_ranks_kernel<<<dim3(unsigned(rows), chunks), kRanksThreads, 0, s>>>(
      static_cast<const float*>(a.scores.data), rows > 1 ? a.scores.row_stride : 0, cols,
      static_cast<const int64_t*>(a.rank_keys.data), static_cast<int32_t*>(a.counts.data));
  check_launch(op);
}

}  // namespace nt::cuda
