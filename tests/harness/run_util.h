// What the op runners (run_ops.cpp, ops_logprobs.cpp, ops_penalties.cpp,
// ops_verify.cpp) share: a failing status as OpError, inputs with row gaps,
// per-row parameter arrays on the device, poisoned token outputs, and a run
// with a poisoned workspace of the queried size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/run_ops.h"

namespace ntt {

inline void ok(nt_status status, const char* what) {
  if (status != NT_OK)
    throw OpError(status, std::string(what) + " failed: " + nt_status_string(status) + ": " +
                              nt_last_error());
}

// An absent per-row array is a scalar; present ones live on the device.
template <class T>
std::unique_ptr<Buffer> param_buffer(TestDevice& dev, const Param<T>& p) {
  return p.per_row ? to_device(dev, p.values) : nullptr;
}

inline const void* handle_or_null(const std::unique_ptr<Buffer>& b) {
  return b ? b->handle() : nullptr;
}

// A matrix whose row gaps hold `filler`: a backend that reads past a row's end
// (or ignores the stride) picks it up and gets a wrong answer.
template <class T>
std::vector<T> with_gaps(const std::vector<T>& dense, int64_t rows, int64_t cols, int64_t stride,
                         T filler) {
  std::vector<T> out(size_t(rows * stride), filler);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * stride + c)] = dense[size_t(r * cols + c)];
  return out;
}

// Logits with gaps of a large value (as `dtype` holds it).
inline std::vector<float> with_gaps(const std::vector<float>& dense, int64_t rows, int64_t cols,
                                    int64_t stride, nt_dtype dtype) {
  return with_gaps<float>(dense, rows, cols, stride, round_to(dtype, 60000.0f));
}

// A case's six sampling parameters (SampleCase, VerifyCase): the per-row ones
// on the device, the scalars in place.
struct SamplingBuffers {
  std::unique_ptr<Buffer> temperature, top_k, top_p, min_p, seed, offset;
  template <class Case>
  SamplingBuffers(TestDevice& dev, const Case& c)
      : temperature(param_buffer(dev, c.temperature)), top_k(param_buffer(dev, c.top_k)),
        top_p(param_buffer(dev, c.top_p)), min_p(param_buffer(dev, c.min_p)),
        seed(param_buffer(dev, c.seed)), offset(param_buffer(dev, c.offset)) {}
  // Into the fields of the same names of an op's arguments, flags too.
  template <class Case, class Args>
  void set(const Case& c, Args& a) const {
    a.temperature = {handle_or_null(temperature), c.temperature.values[0]};
    a.top_k = {handle_or_null(top_k), c.top_k.values[0]};
    a.top_p = {handle_or_null(top_p), c.top_p.values[0]};
    a.min_p = {handle_or_null(min_p), c.min_p.values[0]};
    a.seed = {handle_or_null(seed), c.seed.values[0]};
    a.offset = {handle_or_null(offset), c.offset.values[0]};
    a.flags = c.flags;
  }
};

// Row (or request) `row`'s sampling parameters of a case (SampleCase,
// VerifyCase) as the reference takes them: the six and top-p's joint flag.
template <class Case>
RowSampleParams case_row_params(const Case& c, int64_t row) {
  RowSampleParams p;
  p.temperature = c.temperature.at(row);
  p.top_k = c.top_k.at(row);
  p.top_p = c.top_p.at(row);
  p.min_p = c.min_p.at(row);
  p.seed = c.seed.at(row);
  p.offset = c.offset.at(row);
  p.joint = (c.flags & NT_SAMPLE_TOP_P_JOINT) != 0;
  return p;
}

// A token output of `rows` entries (i32 or i64), poisoned.
inline std::unique_ptr<Buffer> poisoned_tokens(TestDevice& dev, nt_dtype dtype, int64_t rows) {
  return dtype == NT_I32 ? to_device(dev, std::vector<int32_t>(size_t(rows), kPoisonI32))
                         : to_device(dev, std::vector<int64_t>(size_t(rows), kPoisonI64));
}

inline std::vector<int64_t> read_tokens(const Buffer& tokens, nt_dtype dtype, int64_t rows) {
  if (dtype != NT_I32) return from_device<int64_t>(tokens, size_t(rows));
  std::vector<int64_t> out;
  for (int32_t t : from_device<int32_t>(tokens, size_t(rows))) out.push_back(t);
  return out;
}

// A SampleCase's inputs on the device (logits with row gaps, sampling
// parameters, uniform draws) and its poisoned token output; args() gives
// nt_sample's arguments over them.
struct SampleInputs {
  const SampleCase& c;
  const int64_t stride;
  const std::vector<uint8_t> encoded;  // the logits as uploaded
  std::unique_ptr<Buffer> logits;
  const SamplingBuffers sampling;
  std::unique_ptr<Buffer> uniform, tokens;

  SampleInputs(TestDevice& dev, const SampleCase& sc)
      : c(sc), stride(c.row_stride ? c.row_stride : c.vocab),
        encoded(encode(c.dtype, with_gaps(c.logits, c.rows, c.vocab, stride, c.dtype))),
        logits(to_device(dev, encoded)), sampling(dev, c),
        uniform(c.uniform.empty() ? nullptr : to_device(dev, c.uniform)),
        tokens(poisoned_tokens(dev, c.token_dtype, c.rows)) {}

  nt_sample_args args() const {
    nt_sample_args a{};
    a.logits = logits->matrix(c.dtype, c.rows, c.vocab, stride);
    sampling.set(c, a);
    if (uniform) a.uniform = uniform->vector(NT_F32, c.rows);
    a.tokens = tokens->vector(c.token_dtype, c.rows);
    return a;
  }

  std::vector<int64_t> read_tokens() const {
    return ntt::read_tokens(*tokens, c.token_dtype, c.rows);
  }

  // Throws unless the logits on the device are still those uploaded.
  void check_logits_unchanged(const char* op) const {
    if (from_device<uint8_t>(*logits, encoded.size()) != encoded)
      throw std::runtime_error(std::string(op) + " modified its logits");
  }
};

// A poisoned workspace: an op may not rely on what its workspace holds
// before the call (counters it appends to, flags it reads).
struct Workspace {
  std::unique_ptr<Buffer> buffer;
  void* ptr() const { return buffer ? buffer->handle() : nullptr; }
  size_t bytes = 0;
  Workspace(TestDevice& dev, size_t n) : bytes(n) {
    if (n == 0) return;
    buffer = std::make_unique<Buffer>(dev, n);
    poison(*buffer);
  }
};

// Runs op `name` (nt_sample, ...) with a poisoned workspace of the size its
// query reports, on the device's stream, and waits for it.
template <class Args>
void run_with_workspace(TestDevice& dev, const Args& a, const char* name,
                        nt_status (*query)(const Args*, size_t*),
                        nt_status (*run)(const Args*, void*, size_t, void*)) {
  size_t bytes = 0;
  ok(query(&a, &bytes), (std::string(name) + "_workspace_size").c_str());
  Workspace ws(dev, bytes);
  ok(run(&a, ws.ptr(), ws.bytes, dev.stream()), name);
  dev.sync();
}

}  // namespace ntt
