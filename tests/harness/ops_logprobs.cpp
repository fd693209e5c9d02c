// The runner of nt_sample_logprobs and its reference per case row.
#include <stdexcept>
#include <string>

#include "harness/run_util.h"

namespace ntt {

LogprobsReference reference_logprobs(const SampleCase& c, int64_t row, int n, bool processed) {
  std::vector<float> x(size_t(c.vocab));
  for (int64_t i = 0; i < c.vocab; ++i) x[size_t(i)] = round_to(c.dtype, c.logits[size_t(row * c.vocab + i)]);
  const RowSampleParams p = c.row_params(row);
  return reference_logprobs_row(x.data(), c.vocab, p, reference_sample_row(x.data(), c.vocab, p), n,
                                processed);
}

LogprobsResult run_sample_logprobs(TestDevice& dev, const SampleCase& c, int n, uint32_t mode,
                                   int64_t out_gap) {
  const SampleInputs in(dev, c);
  const int64_t columns = int64_t(n) + 1, out_stride = columns + out_gap;
  auto ids = to_device(dev, std::vector<int32_t>(size_t(c.rows * out_stride), kPoisonI32));
  auto values = to_device(dev, std::vector<float>(size_t(c.rows * out_stride), poison_f32()));
  auto ranks = to_device(dev, std::vector<int32_t>(size_t(c.rows), kPoisonI32));

  nt_sample_logprobs_args a{};
  a.sample = in.args();
  a.num_logprobs = n;
  a.mode = mode;
  a.logprob_ids = ids->matrix(NT_I32, c.rows, columns, out_stride);
  a.logprobs = values->matrix(NT_F32, c.rows, columns, out_stride);
  a.ranks = ranks->vector(NT_I32, c.rows);

  run_with_workspace(dev, a, "nt_sample_logprobs", nt_sample_logprobs_workspace_size,
                     nt_sample_logprobs);

  LogprobsResult out;
  out.columns = columns;
  out.tokens = in.read_tokens();
  const auto all_ids = from_device<int32_t>(*ids, size_t(c.rows * out_stride));
  const auto all_values = from_device<float>(*values, size_t(c.rows * out_stride));
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < out_stride; ++j) {
      const size_t at = size_t(r * out_stride + j);
      if (j < columns) {
        out.ids.push_back(all_ids[at]);
        out.values.push_back(all_values[at]);
      } else if (all_ids[at] != kPoisonI32 || f32_bits(all_values[at]) != f32_bits(poison_f32())) {
        throw std::runtime_error("nt_sample_logprobs wrote into the gap of output row " +
                                 std::to_string(r));
      }
    }
  out.ranks = from_device<int32_t>(*ranks, size_t(c.rows));
  in.check_logits_unchanged("nt_sample_logprobs");
  return out;
}

}  // namespace ntt
