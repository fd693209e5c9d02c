// The benchmark rows of BENCH.md (W1-W5, W3r, W7) on the CPU and OpenCL backends (the
// CUDA rows, with torch baselines on the GPU, are bench/cuda_*_bench.py).
//
// A Row is a label, the bytes the op must move, and a factory for a Workload:
// prepare() builds the inputs on the backend under test (several copies when
// they are small, so that rotating over them defeats the cache), run_ours(i)
// and run_baseline(i) process copy i % copies and return once issued (bench
// synchronizes the device after each). The "ours" side calls the public API on
// device tensors; the baselines run on the host copies of the inputs, which is
// what BENCH.md asks for on the CPU and OpenCL (PoCL).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "baselines.h"
#include "device.h"
#include "harness/data.h"

using ntt::MaskKind;
using ntt::Rng;

// ---- inputs: BENCH.md's logit families, never zeros ---------------------------

enum class LogitKind { Peaked, Flat };  // N(0, 2) + 4 peaks in [10, 16]; N(0, 1)
LogitKind parse_logit_kind(const std::string& text);  // "peaked" | "flat"
const char* logit_kind_name(LogitKind kind);
std::vector<float> logits_row(Rng& rng, int64_t vocab, LogitKind kind);

// n f32 values -> an f32, f16 or bf16 tensor at dst (round to nearest even),
// and element i of one back to f32 (exact).
void narrow(const float* src, void* dst, nt_dtype dtype, size_t n);
float widen(const void* src, nt_dtype dtype, size_t i);

// How many copies of an input of `bytes` to rotate over so that the copies
// together exceed `target` bytes (a multiple of the last-level cache), capped
// by `max_total` bytes of memory; at least 1.
int copies_for(size_t bytes, size_t target, size_t max_total);
size_t last_level_cache_bytes();

// ---- rows ----------------------------------------------------------------------

struct BenchConfig {
  TestDevice* device = nullptr;
  bool full = false;             // BENCH.md's sizes rather than scaled-down CPU ones
  size_t rotate_bytes = 0;       // rotate input copies until they exceed this
  size_t max_input_bytes = 0;    // memory cap on the rotated copies
  int threads = 1;               // host threads for the head baselines
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual void prepare() = 0;
  virtual void run_ours(int i) = 0;
  virtual void run_baseline(int i) = 0;
};

struct Row {
  std::string workload;        // "W1".."W5", "W3r", "W7"
  std::string name;            // the table label
  std::string baseline;        // what the baseline runs
  double bytes = 0;            // the bytes the op must move: GB/s is against these
  double baseline_bytes = 0;   // the bytes the baseline path must move
  double weight_bytes = 0;     // LM heads: ideal time = weight_bytes / bandwidth
  bool issue = false;          // always run, whatever --workload says
  std::function<std::unique_ptr<Workload>()> make;
};

std::vector<Row> benchmark_rows(const BenchConfig& config);  // workload_rows.cpp

// ---- the workloads ----------------------------------------------------------------

struct SampleSpec {
  int64_t batch = 1, vocab = 0;
  nt_dtype dtype = NT_F32;
  LogitKind kind = LogitKind::Peaked;
  // One entry: scalars for every row. `batch` entries: per-row device arrays.
  std::vector<baseline::ChainParams> params;
  // Raw logprobs beside the draw (sample_logprobs; the baseline adds
  // log_softmax, topk and the rank of the row): -1 none, else n.
  int32_t logprobs = -1;
};

// Rotated copies of one input on the host and, for devices that are not host
// memory, on the device; copy i sits at i * stride bytes.
struct Rotated {
  std::shared_ptr<std::vector<unsigned char>> host;
  DeviceBuffer device;
  size_t stride = 0;
  int copies = 1;
  unsigned char* host_copy(int i) const { return host->data() + (i % copies) * stride; }
  size_t offset(int i) const { return (i % copies) * stride; }
};

class SampleWorkload : public Workload {
 public:
  SampleWorkload(const BenchConfig& c, SampleSpec s) : config_(c), spec_(std::move(s)) {}
  void prepare() override;
  void run_ours(int i) override;
  void run_baseline(int i) override;  // host sort chain; argmax loop when greedy

 protected:
  nt_sample_logprobs_args logprobs_args(const nt_sample_args& a) const;  // spec_.logprobs >= 0

  BenchConfig config_;
  SampleSpec spec_;
  Rotated logits_;
  std::vector<DeviceBuffer> per_row_;
  std::vector<std::vector<unsigned char>> per_row_host_;
  nt_sample_args args_{};
  std::vector<int64_t> tokens_host_;
  DeviceBuffer tokens_;
  std::unique_ptr<DeviceScratch> workspace_;
  baseline::ChainScratch chain_;
  std::vector<float> widened_;
  uint64_t rng_state_ = 42;
  // The logprobs outputs (spec_.logprobs >= 0) and the baseline's row buffers.
  std::unique_ptr<DeviceScratch> logprob_ids_, logprobs_, ranks_;
  std::vector<float> lp_row_, lp_values_;
  std::vector<int64_t> lp_ids_;
  std::vector<int32_t> lp_scratch_;
};

struct MaskSpec {
  int64_t batch = 1, vocab = 0;
  nt_dtype dtype = NT_F32;
  MaskKind mask = MaskKind::Random50;
};

class MaskWorkload : public Workload {
 public:
  MaskWorkload(const BenchConfig& c, MaskSpec s) : config_(c), spec_(s) {}
  void prepare() override;
  void run_ours(int i) override;
  void run_baseline(int i) override;  // unpack to bool, then masked fill

 protected:
  BenchConfig config_;
  MaskSpec spec_;
  Rotated logits_, mask_;
  std::vector<unsigned char> allowed_;  // bool scratch of the baseline
};

struct HeadSpec {
  int64_t m = 1, vocab = 0, hidden = 0;
  nt_dtype dtype = NT_F32;  // dense head: hidden and weight dtype
  int32_t group = 128;      // binary head only
  int32_t k = 50;
};

// Both heads' inputs. The binary head's baseline is the user's fallback: a
// bf16 dense head with the same (sign * scale) weights.
class HeadWorkload : public Workload {
 public:
  HeadWorkload(const BenchConfig& c, HeadSpec s, bool binary)
      : config_(c), spec_(s), binary_(binary) {}
  void prepare() override;
  void run_ours(int i) override;
  void run_baseline(int i) override;  // full logits by a blocked loop + partial_sort

 protected:
  void run_head(int i, int32_t k);    // top-k into values_/indices_
  // The binary head's operands of copy i (its activations quantized on the
  // device) into a (nt_lm_head_binary_args or nt_lm_head_sample_binary_args).
  template <class Args>
  void binary_operands(int i, Args& a);
  void baseline_logits(int i);        // full logits into logits_

  BenchConfig config_;
  HeadSpec spec_;
  bool binary_;
  Rotated hidden_;                    // dense: spec dtype; binary: f32
  std::vector<unsigned char> weight_host_;  // dense weight, or the bf16 fallback
  DeviceBuffer weight_;
  std::vector<unsigned char> hidden_bf16_;  // the binary fallback's activations
  std::vector<int32_t> wq_host_;
  std::vector<uint16_t> wscale_host_;
  DeviceBuffer wq_, wscale_;
  std::unique_ptr<DeviceScratch> act_q_, act_scale_, values_, indices_, workspace_;
  int32_t workspace_k_ = 0;
  std::vector<float> logits_, top_values_;
  std::vector<int64_t> top_indices_;
  std::vector<int32_t> topk_scratch_;
};

// W5 from the hidden state: lm_head_sample_{binary,dense} with the grammar
// bitmask and k50 + p0.9, one op.
class FusedWorkload : public HeadWorkload {
 public:
  FusedWorkload(const BenchConfig& c, HeadSpec s, bool binary) : HeadWorkload(c, s, binary) {}
  void prepare() override;
  void run_ours(int i) override;
  void run_baseline(int i) override;  // full logits + unpack/masked fill + sort chain

 private:
  Rotated mask_;
  std::unique_ptr<DeviceScratch> tokens_, fused_workspace_;
  std::vector<int64_t> tokens_host_;
  std::vector<unsigned char> allowed_;
  baseline::ChainScratch chain_;
  uint64_t rng_state_ = 7;
};

// W7: apply_penalties with per-row parameters; each row has `prompt` prompt
// ids and `output` output ids (random, a few repeats in the output).
struct PenaltySpec {
  int64_t batch = 1, vocab = 0, prompt = 0, output = 0;
};

class PenaltyWorkload : public Workload {
 public:
  PenaltyWorkload(const BenchConfig& c, PenaltySpec s) : config_(c), spec_(s) {}
  void prepare() override;
  void run_ours(int i) override;
  void run_baseline(int i) override;  // vLLM's dense formulation, 1 thread

 protected:
  BenchConfig config_;
  PenaltySpec spec_;
  Rotated logits_;  // f32
  std::vector<int32_t> prompt_offsets_, prompt_ids_, output_offsets_, output_ids_;
  std::vector<float> repetition_, presence_, frequency_;
  std::vector<DeviceBuffer> buffers_;  // the lists and the parameters on the device
  nt_apply_penalties_args args_{};
  std::unique_ptr<DeviceScratch> workspace_;
  baseline::PenaltyScratch scratch_;
};

// "128,256"
std::string with_commas(int64_t n);
