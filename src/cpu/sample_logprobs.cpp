// nt_sample_logprobs on the CPU: nt_sample's rows (cpu/sample.cpp), then, for
// each finished row on the thread that finished it, the logprobs pass over its
// logits with the keep-set the sampler drew the token from (drawn_keep_set).
// Sums in fp64, so the values are the reference's to fp32 rounding.
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/logprobs.h"
#include "cpu/ops.h"
#include "cpu/sample_row.h"
#include "cpu/top_list.h"

namespace nt::cpu {
namespace {

using sampling::RowJob;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void row_logprobs(const RowJob& j, int64_t r, const void* context) {
  const SampleLogprobsCall& call = *static_cast<const SampleLogprobsCall*>(context);
  const nt_sample_logprobs_args& a = call.args;
  const int64_t vocab = j.vocab;
  int32_t* ids = static_cast<int32_t*>(a.logprob_ids.data) + r * a.logprob_ids.row_stride;
  float* values = static_cast<float*>(a.logprobs.data) + r * a.logprobs.row_stride;
  int32_t* rank = static_cast<int32_t*>(a.ranks.data) + r;

  TopList top;
  top.cap = call.n;
  for (int64_t i = 0; i < vocab && call.n > 0; ++i) top.offer(nt_order_key(j.x.at(i)), int32_t(i));
  for (int32_t c = 0; c < call.n; ++c) ids[1 + c] = c < top.n ? top.index[c] : -1;

  if (j.token < 0) {
    ids[0] = -1;
    for (int32_t c = 0; c <= call.n; ++c) values[c] = kNegInf;
    *rank = 0;
    return;
  }

  RowValues rv{call.processed, sampling::drawn_keep_set(j), j.token};
  // Pass 1: the largest value, and how many tokens share +inf.
  float max = kNegInf;
  int64_t n_pos_inf = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const float v = rv.base(j.x.at(i), int32_t(i));
    if (v > max) max = v;
    n_pos_inf += v == std::numeric_limits<float>::infinity();
  }
  if (n_pos_inf > 0) {
    rv.set_pos_inf(n_pos_inf);
  } else {
    // Pass 2: the normalizer.
    double z = 0.0;
    for (int64_t i = 0; i < vocab; ++i) {
      const float v = rv.base(j.x.at(i), int32_t(i));
      if (v != kNegInf) z += std::exp(double(v) - double(max));
    }
    rv.max = double(max);
    rv.log_z = std::log(z);
  }
  // Pass 3: the rank, by the ordering keys of the values the log-probabilities
  // come from (core/logprobs.h); tokens without one are never counted.
  const float token_base = rv.base(j.x.at(j.token), int32_t(j.token));
  const uint32_t token_key = nt_order_key(token_base);
  int32_t count = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const float v = rv.base(j.x.at(i), int32_t(i));
    if (v != kNegInf && nt_logprob_at_least(nt_order_key(v), token_key)) ++count;
  }
  ids[0] = int32_t(j.token);
  values[0] = rv.value(token_base);
  for (int32_t c = 0; c < call.n; ++c)
    values[1 + c] = c < top.n ? rv.value(rv.base(j.x.at(top.index[c]), top.index[c])) : kNegInf;
  *rank = count;
}

}  // namespace

size_t CpuBackend::sample_logprobs_workspace_size(const SampleLogprobsCall& call) {
  return sampling::sample_workspace_bytes(call.sample);
}

void CpuBackend::sample_logprobs(const SampleLogprobsCall& call, void* workspace,
                                 size_t workspace_bytes, void*) {
  sampling::sample_rows("sample_logprobs", call.sample, workspace, workspace_bytes,
                        sampling::RowDone{&row_logprobs, &call});
}

}  // namespace nt::cpu
