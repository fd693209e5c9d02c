// Running apply_penalties and apply_logit_bias on a TestDevice: the logits,
// id lists and per-row parameters are uploaded, the op runs on the device's
// stream with a workspace of exactly the queried size, and the whole logits
// buffer (row gaps included) comes back.
#include "harness/run_ops.h"
#include "harness/run_util.h"

namespace ntt {
namespace {

// A list on the device: offsets as i32 or i64, ids as i32.
struct DeviceList {
  std::unique_ptr<Buffer> offsets, ids;
  nt_token_lists view{};

  DeviceList(TestDevice& dev, const CsrIds& l, nt_dtype offsets_dtype) {
    if (!l.present) return;
    if (offsets_dtype == NT_I64) {
      offsets = to_device(dev, l.offsets);
    } else {
      std::vector<int32_t> narrow;
      for (int64_t o : l.offsets) narrow.push_back(int32_t(o));
      offsets = to_device(dev, narrow);
    }
    ids = to_device(dev, l.ids);
    view.offsets = offsets->vector(offsets_dtype, int64_t(l.offsets.size()));
    view.ids = ids->vector(NT_I32, int64_t(l.ids.size()));
  }
};

std::vector<float> per_row_values(const Param<float>& p, int64_t rows) {
  std::vector<float> v;
  for (int64_t r = 0; r < rows; ++r) v.push_back(p.at(r));
  return v;
}

}  // namespace

std::vector<uint8_t> run_apply_penalties(TestDevice& dev, const PenaltyCase& c) {
  auto logits = to_device(dev, c.logits);
  DeviceList prompt(dev, c.prompt, c.offsets_dtype), output(dev, c.output, c.offsets_dtype);
  auto r = param_buffer(dev, c.repetition), p = param_buffer(dev, c.presence),
       f = param_buffer(dev, c.frequency);
  nt_apply_penalties_args a{};
  a.logits = logits->matrix(c.dtype, c.rows, c.vocab, c.stride());
  a.prompt = prompt.view;
  a.output = output.view;
  a.repetition = {handle_or_null(r), c.repetition.values[0]};
  a.presence = {handle_or_null(p), c.presence.values[0]};
  a.frequency = {handle_or_null(f), c.frequency.values[0]};
  run_with_workspace(dev, a, "nt_apply_penalties", nt_apply_penalties_workspace_size, nt_apply_penalties);
  return from_device<uint8_t>(*logits, c.logits.size());
}

std::vector<uint8_t> reference_penalties(const PenaltyCase& c) {
  return reference_penalties(c.dtype, c.rows, c.vocab, c.stride(), c.logits, c.prompt,
                             c.output, per_row_values(c.repetition, c.rows),
                             per_row_values(c.presence, c.rows),
                             per_row_values(c.frequency, c.rows));
}

std::vector<uint8_t> run_apply_logit_bias(TestDevice& dev, const BiasCase& c) {
  auto logits = to_device(dev, c.logits);
  DeviceList tokens(dev, c.tokens, c.offsets_dtype);
  auto values = to_device(dev, c.values);
  nt_apply_logit_bias_args a{};
  a.logits = logits->matrix(c.dtype, c.rows, c.vocab, c.stride());
  a.tokens = tokens.view;
  a.values = values->vector(NT_F32, int64_t(c.values.size()));
  run_with_workspace(dev, a, "nt_apply_logit_bias", nt_apply_logit_bias_workspace_size, nt_apply_logit_bias);
  return from_device<uint8_t>(*logits, c.logits.size());
}

std::vector<uint8_t> reference_logit_bias(const BiasCase& c) {
  return reference_logit_bias(c.dtype, c.rows, c.vocab, c.stride(), c.logits, c.tokens,
                              c.values);
}

}  // namespace ntt
