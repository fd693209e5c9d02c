// The rows of BENCH.md's workloads: labels, the bytes each op must move, and
// the sizes (scaled down on the CPU unless --full).
#include "workloads.h"

#include <utility>

namespace {

std::string shape_bv(int64_t b, int64_t v) {
  return "B=" + std::to_string(b) + ", V=" + with_commas(v);
}

std::string head_shape(const HeadSpec& s) {
  return "V=" + with_commas(s.vocab) + ", H=" + with_commas(s.hidden) + ", M=" + std::to_string(s.m);
}

double head_weight_bytes(const HeadSpec& s, bool binary) {
  if (binary) return s.vocab * s.hidden / 8.0 + s.vocab * (s.hidden / s.group) * 2.0;
  return static_cast<double>(s.vocab) * s.hidden * ntt::dtype_bytes(s.dtype);
}

Row sample_row(const BenchConfig& c, const std::string& mode, SampleSpec spec, bool issue = false) {
  Row r;
  r.workload = "W3";
  r.name = "sample " + mode + ", " + shape_bv(spec.batch, spec.vocab) + " (" + ntt::dtype_label(spec.dtype) +
           ", " + logit_kind_name(spec.kind) + " logits)";
  bool greedy = spec.params.size() == 1 && !(spec.params[0].temperature > 0);
  r.baseline = greedy ? "argmax loop, 1 thread"
                      : "sort chain (stable_sort, softmax, cumsum, masks, exp race), 1 thread";
  if (spec.logprobs >= 0) r.baseline = "sort chain, then log_softmax, topk and rank of the row, 1 thread";
  r.bytes = static_cast<double>(spec.batch) * spec.vocab * ntt::dtype_bytes(spec.dtype) + spec.batch * 8.0;
  r.baseline_bytes = r.bytes;
  r.issue = issue;
  r.make = [c, spec] { return std::make_unique<SampleWorkload>(c, spec); };
  return r;
}

std::vector<baseline::ChainParams> mixed_params(int64_t batch) {
  // A serving batch: greedy requests beside differently configured samplers.
  const baseline::ChainParams kinds[] = {
      {0.0f, 0, 1.0f, 0.0f, false},   {0.7f, 0, 1.0f, 0.0f, false},
      {1.0f, 50, 1.0f, 0.0f, false},  {1.0f, 0, 0.9f, 0.0f, false},
      {1.0f, 50, 0.9f, 0.05f, false}, {0.8f, 20, 0.95f, 0.0f, false}};
  std::vector<baseline::ChainParams> out;
  for (int64_t r = 0; r < std::max<int64_t>(batch, 2); ++r) out.push_back(kinds[r % 6]);
  return out;
}

void add_sample_rows(std::vector<Row>& rows, const BenchConfig& c, int64_t b, int64_t v) {
  struct Mode { const char* name; baseline::ChainParams p; };
  const Mode modes[] = {{"greedy", {0.0f, 0, 1.0f, 0.0f, false}},
                        {"T=0.7", {0.7f, 0, 1.0f, 0.0f, false}},
                        {"k50", {1.0f, 50, 1.0f, 0.0f, false}},
                        {"p0.9", {1.0f, 0, 0.9f, 0.0f, false}},
                        {"k50+p0.9+min-p0.05", {1.0f, 50, 0.9f, 0.05f, false}}};
  for (const Mode& m : modes) rows.push_back(sample_row(c, m.name, {b, v, NT_F32, LogitKind::Peaked, {m.p}}));
  if (b > 1) rows.push_back(sample_row(c, "mixed per-row", {b, v, NT_F32, LogitKind::Peaked, mixed_params(b)}));
}

Row mask_row(const BenchConfig& c, MaskSpec s) {
  Row r;
  r.workload = "W4";
  r.name = std::string("apply_token_bitmask ") + ntt::dtype_label(s.dtype) + ", " + ntt::mask_kind_label(s.mask) +
           ", " + shape_bv(s.batch, s.vocab);
  r.baseline = "unpack to bool + masked fill, 1 thread";
  double logits = static_cast<double>(s.batch) * s.vocab * ntt::dtype_bytes(s.dtype);
  double mask = s.batch * ((s.vocab + 31) / 32) * 4.0;
  r.bytes = 2 * logits + mask;  // read and write back the logits, read the mask
  r.baseline_bytes = r.bytes + 2.0 * s.batch * s.vocab;  // the bool tensor, written and read
  r.make = [c, s] { return std::make_unique<MaskWorkload>(c, s); };
  return r;
}

Row head_row(const BenchConfig& c, HeadSpec s, bool binary, bool issue = false) {
  Row r;
  r.workload = binary ? "W1" : "W2";
  if (binary)
    r.name = "lm_head_topk_binary G=" + std::to_string(s.group) + " k=" + std::to_string(s.k) + ", " +
             head_shape(s);
  else
    r.name = std::string("lm_head_topk_dense ") + ntt::dtype_label(s.dtype) +
             (issue ? "" : " k=" + std::to_string(s.k)) + ", " + head_shape(s);
  r.baseline = std::string(binary ? "bf16 dense head (the user's fallback)" : "dense head") +
               ": blocked GEMM, " + std::to_string(c.threads) + " threads + partial_sort";
  r.weight_bytes = head_weight_bytes(s, binary);
  double act = static_cast<double>(s.m) * s.hidden * (binary ? 4 : ntt::dtype_bytes(s.dtype));
  r.bytes = r.weight_bytes + act + s.m * s.k * 12.0;
  r.baseline_bytes = binary ? s.vocab * s.hidden * 2.0 + s.m * s.hidden * 2.0 : r.bytes;
  r.issue = issue;
  r.make = [c, s, binary] { return std::make_unique<HeadWorkload>(c, s, binary); };
  return r;
}

Row fused_row(const BenchConfig& c, HeadSpec s, bool binary) {
  Row r;
  r.workload = "W5";
  r.name = std::string("lm_head_sample_") +
           (binary ? std::string("binary") : std::string("dense ") + ntt::dtype_label(s.dtype)) +
           ": hidden -> token, mask + k50+p0.9, " + head_shape(s);
  r.baseline = "bf16 full logits (" + std::to_string(c.threads) +
               " threads) + unpack/masked fill + sort chain";
  r.weight_bytes = head_weight_bytes(s, binary);
  double mask = s.m * ((s.vocab + 31) / 32) * 4.0;
  r.bytes = r.weight_bytes + s.m * s.hidden * (binary ? 4.0 : ntt::dtype_bytes(s.dtype)) + mask;
  r.baseline_bytes = s.vocab * s.hidden * 2.0 + mask;
  r.make = [c, s, binary] { return std::make_unique<FusedWorkload>(c, s, binary); };
  return r;
}

Row penalty_row(const BenchConfig& c, PenaltySpec s) {
  Row r;
  r.workload = "W7";
  r.name = "apply_penalties f32, " + shape_bv(s.batch, s.vocab) + ", " + with_commas(s.prompt) +
           " prompt + " + with_commas(s.output) + " output ids a row, per-row parameters";
  r.baseline = "vLLM's dense formulation (bincount over V, masked arithmetic), 1 thread";
  const double ids = static_cast<double>(s.batch) * (s.prompt + s.output);
  r.bytes = ids * 4 + ids * 8;  // the ids; each id's logit read and written (repeats are few)
  r.baseline_bytes = ids * 4 + 2.0 * s.batch * s.vocab * 4;  // the ids; every logit read and written
  r.make = [c, s] { return std::make_unique<PenaltyWorkload>(c, s); };
  return r;
}

}  // namespace

std::vector<Row> benchmark_rows(const BenchConfig& c) {
  std::vector<Row> rows;
  // The two rows every report carries, whatever the scale.
  rows.push_back(sample_row(c, "k50+p0.9", {1, 128256, NT_F32, LogitKind::Peaked, {{1.0f, 50, 0.9f, 0.0f, false}}}, true));
  rows.push_back(head_row(c, {1, 32000, 4096, NT_F32, 128, 50}, false, true));

  const int64_t head_v = c.full ? 248320 : 32000, head_h = c.full ? 5120 : 4096;
  std::vector<int64_t> head_m = c.full ? std::vector<int64_t>{1, 4, 16, 64} : std::vector<int64_t>{1, 16, 64};
  for (int64_t m : head_m) rows.push_back(head_row(c, {m, head_v, head_h, NT_F32, 128, 50}, true));
  for (int64_t m : head_m) rows.push_back(head_row(c, {m, head_v, head_h, NT_BF16, 128, 50}, false));

  std::vector<std::pair<int64_t, int64_t>> shapes =
      c.full ? std::vector<std::pair<int64_t, int64_t>>{{1, 128256}, {64, 128256}, {256, 128256}, {256, 248320}, {1024, 32000}}
             : std::vector<std::pair<int64_t, int64_t>>{{1, 128256}, {64, 128256}, {256, 32000}};
  for (auto [b, v] : shapes) add_sample_rows(rows, c, b, v);

  // W3r: logprobs n = 20 (raw) beside the same draw without them (at B = 1,
  // the issue row).
  auto w3r = [&](Row r) {
    r.workload = "W3r";
    rows.push_back(std::move(r));
  };
  for (int64_t b : {int64_t{1}, int64_t{64}}) {
    SampleSpec spec{b, 128256, NT_F32, LogitKind::Peaked, {{1.0f, 50, 0.9f, 0.0f, false}}};
    if (b > 1) w3r(sample_row(c, "k50+p0.9", spec));
    spec.logprobs = 20;
    w3r(sample_row(c, "k50+p0.9 + logprobs n=20 raw", spec));
  }

  std::vector<int64_t> mask_b = c.full ? std::vector<int64_t>{1, 64, 256} : std::vector<int64_t>{1, 64};
  for (nt_dtype t : {NT_F32, NT_BF16})
    for (int64_t b : mask_b)
      for (MaskKind k : {MaskKind::Random50, MaskKind::Allowed1, MaskKind::Blocky})
        rows.push_back(mask_row(c, {b, 128256, t, k}));

  std::vector<int64_t> fused_m = c.full ? std::vector<int64_t>{1, 16, 64} : std::vector<int64_t>{1, 16};
  for (int64_t m : fused_m) rows.push_back(fused_row(c, {m, head_v, head_h, NT_F32, 128, 50}, true));
  rows.push_back(fused_row(c, {1, head_v, head_h, NT_BF16, 128, 50}, false));

  for (int64_t b : {int64_t{1}, c.full ? int64_t{256} : int64_t{64}})
    rows.push_back(penalty_row(c, {b, 128256, 2048, 512}));
  return rows;
}
