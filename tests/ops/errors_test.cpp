// Every check of src/core/check.cpp, on every device: an invalid argument fails
// with NT_ERROR_INVALID_ARGUMENT (workspace problems: NT_ERROR_WORKSPACE, as
// nexttok.h documents) before anything runs, and nt_last_error() names it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "harness/ops.h"
#include "nexttok/nexttok.hpp"

namespace ntt {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

class Errors : public DeviceTest {
 protected:
  // A device type other than this test's, for mismatches.
  nt_device_type other() { return is_cpu() ? NT_DEVICE_CUDA : NT_DEVICE_CPU; }
  std::unique_ptr<Buffer> buffer(size_t bytes) {
    std::vector<uint8_t> fill(bytes);
    Rng rng(bytes);
    for (auto& b : fill) b = uint8_t(rng.bits() & 0x3f);  // small positive bytes: valid everywhere
    return to_device(dev(), fill);
  }
};

template <class Args>
struct Case {
  std::string what;
  std::function<void(Args&)> mutate;
  std::string arg;
  nt_status status = NT_ERROR_INVALID_ARGUMENT;
};

// The bytes of each buffer.
std::vector<std::vector<uint8_t>> contents(const std::vector<Buffer*>& buffers) {
  std::vector<std::vector<uint8_t>> bytes;
  for (const Buffer* b : buffers) bytes.push_back(from_device<uint8_t>(*b, b->bytes()));
  return bytes;
}

// Poisons each buffer (harness poison), so that a call which ran shows even
// when it would write what a valid call wrote before it.
void poison(const std::vector<Buffer*>& buffers) {
  for (Buffer* b : buffers) ntt::poison(*b);
}

// Each case: the call fails with its status and a message naming its argument,
// before anything runs: the buffers in `untouched` (the op's in-place input and
// its outputs, poisoned after the valid call) keep their bytes.
template <class Args>
void expect_rejected(const Args& valid, const std::vector<Case<Args>>& cases,
                     const std::function<nt_status(const Args*)>& call,
                     const std::vector<Buffer*>& untouched = {}) {
  ASSERT_EQ(call(&valid), NT_OK) << "the valid arguments fail: " << nt_last_error();
  EXPECT_STREQ(nt_last_error(), "") << "a success must clear the message";
  poison(untouched);
  const auto before = contents(untouched);
  for (const auto& c : cases) {
    Args a = valid;
    c.mutate(a);
    const nt_status status = call(&a);
    const std::string message = nt_last_error();
    EXPECT_EQ(status, c.status) << c.what << ": message \"" << message << "\"";
    EXPECT_NE(message.find("'" + c.arg + "'"), std::string::npos)
        << c.what << ": message \"" << message << "\" does not name '" << c.arg << "'";
    if (!untouched.empty()) {
      const auto after = contents(untouched);
      EXPECT_EQ(after, before) << c.what << ": a buffer was written";
      if (after != before) poison(untouched);  // so that the next case is judged alone
    }
  }
  EXPECT_EQ(call(nullptr), NT_ERROR_INVALID_ARGUMENT) << "null args";
  EXPECT_NE(std::string(nt_last_error()).find("'args'"), std::string::npos) << nt_last_error();
}

// Checks common to every tensor argument.
template <class Args>
void add_tensor_cases(std::vector<Case<Args>>& cases, const std::string& arg,
                      std::function<nt_tensor&(Args&)> t, nt_dtype wrong_dtype, int ndim,
                      bool byte_offsets_allowed) {
  cases.push_back({arg + " null", [t](Args& a) { t(a).data = nullptr; }, arg});
  cases.push_back({arg + " ndim", [t, ndim](Args& a) { t(a).ndim = ndim == 2 ? 1 : 2; }, arg});
  cases.push_back({arg + " ndim 3", [t](Args& a) { t(a).ndim = 3; }, arg});
  cases.push_back({arg + " dtype", [t, wrong_dtype](Args& a) { t(a).dtype = wrong_dtype; }, arg});
  cases.push_back({arg + " negative dim", [t](Args& a) { t(a).shape[0] = -1; }, arg});
  // 3 is no device type (and, unlike 99, inside the enum's range: no UB).
  cases.push_back({arg + " unknown device", [t](Args& a) { t(a).device = nt_device_type(3); }, arg});
  if (!byte_offsets_allowed)
    cases.push_back({arg + " byte_offset", [t](Args& a) { t(a).byte_offset = 4; }, arg});
  cases.push_back({arg + " negative byte_offset", [t](Args& a) { t(a).byte_offset = -4; }, arg});
}

template <class Args>
void add_device_cases(std::vector<Case<Args>>& cases, const std::string& arg,
                      std::function<nt_tensor&(Args&)> t, nt_device_type other_device) {
  cases.push_back({arg + " device", [t, other_device](Args& a) { t(a).device = other_device; }, arg});
  cases.push_back({arg + " device_id", [t](Args& a) { t(a).device_id += 1; }, arg});
}

TEST_P(Errors, Sample) {
  const int64_t rows = 4, vocab = 100;
  auto logits = buffer(size_t(rows * vocab * 4));
  auto tokens = buffer(size_t(rows * 8));
  auto uniform = buffer(size_t(rows * 4));
  auto per_row = buffer(size_t(rows * 8));
  nt_sample_args valid{};
  valid.logits = logits->matrix(NT_F32, rows, vocab);
  valid.tokens = tokens->vector(NT_I64, rows);
  valid.uniform = uniform->vector(NT_F32, rows);
  valid.temperature = {nullptr, 0.7f};
  valid.top_k = {nullptr, 50};
  valid.top_p = {nullptr, 0.9f};
  valid.min_p = {nullptr, 0.05f};
  size_t ws_bytes = 0;
  ASSERT_EQ(nt_sample_workspace_size(&valid, &ws_bytes), NT_OK) << nt_last_error();
  auto ws = buffer(ws_bytes);

  using A = nt_sample_args;
  std::vector<Case<A>> cases;
  const bool offsets = dev().views_use_byte_offset();
  add_tensor_cases<A>(cases, "logits", [](A& a) -> nt_tensor& { return a.logits; }, NT_I32, 2, offsets);
  cases.push_back({"V = 0", [](A& a) { a.logits.shape[1] = 0; }, "logits"});
  cases.push_back({"row_stride < V", [](A& a) { a.logits.row_stride = 50; }, "logits"});
  add_tensor_cases<A>(cases, "tokens", [](A& a) -> nt_tensor& { return a.tokens; }, NT_F32, 1, offsets);
  add_device_cases<A>(cases, "tokens", [](A& a) -> nt_tensor& { return a.tokens; }, other());
  cases.push_back({"tokens length", [](A& a) { a.tokens.shape[0] = 3; }, "tokens"});
  cases.push_back({"tokens u64", [](A& a) { a.tokens.dtype = NT_U64; }, "tokens"});
  cases.push_back({"uniform ndim", [](A& a) { a.uniform.ndim = 2; }, "uniform"});
  cases.push_back({"uniform dtype", [](A& a) { a.uniform.dtype = NT_F16; }, "uniform"});
  cases.push_back({"uniform length", [](A& a) { a.uniform.shape[0] = 5; }, "uniform"});
  add_device_cases<A>(cases, "uniform", [](A& a) -> nt_tensor& { return a.uniform; }, other());
  for (float t : {kNaN, -1.0f, -kInf, kInf})
    cases.push_back({"temperature " + std::to_string(t), [t](A& a) { a.temperature.scalar = t; }, "temperature"});
  cases.push_back({"top_k -2", [](A& a) { a.top_k.scalar = -2; }, "top_k"});
  for (float p : {0.0f, -0.1f, 1.5f, kNaN, kInf})
    cases.push_back({"top_p " + std::to_string(p), [p](A& a) { a.top_p.scalar = p; }, "top_p"});
  for (float p : {-0.1f, 1.5f, kNaN, -kInf})
    cases.push_back({"min_p " + std::to_string(p), [p](A& a) { a.min_p.scalar = p; }, "min_p"});
  for (uint32_t f : {2u, 4u, 0x80000000u, 0xffffffffu})
    cases.push_back({"flags " + std::to_string(f), [f](A& a) { a.flags = f; }, "flags"});

  TestDevice& d = dev();
  void* ws_ptr = ws->handle();
  expect_rejected<A>(valid, cases, [&](const A* a) {
    size_t bytes = 0;
    const nt_status sized = nt_sample_workspace_size(a, &bytes);
    const std::string message = nt_last_error();
    const nt_status ran = nt_sample(a, ws_ptr, ws_bytes, d.stream());
    d.sync();
    EXPECT_EQ(sized, ran) << "nt_sample_workspace_size and nt_sample disagree";
    EXPECT_EQ(message, nt_last_error()) << "nt_sample_workspace_size and nt_sample disagree";
    return ran;
  }, {tokens.get()});

  // Per-row parameters are not checked (their values live on the device): any
  // scalar beside them is ignored.
  A per_row_params = valid;
  std::vector<float> ones(size_t(rows), 0.5f);
  per_row->upload(ones.data(), ones.size() * 4);
  per_row_params.temperature = {per_row->handle(), kNaN};
  per_row_params.top_p = {per_row->handle(), -3.0f};
  per_row_params.min_p = {per_row->handle(), 7.0f};
  EXPECT_EQ(nt_sample(&per_row_params, ws_ptr, ws_bytes, d.stream()), NT_OK) << nt_last_error();
  d.sync();

  EXPECT_EQ(nt_sample_workspace_size(&valid, nullptr), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'bytes'"), std::string::npos) << nt_last_error();
  if (ws_bytes > 0) {
    poison({tokens.get()});
    const auto tokens_before = contents({tokens.get()});
    EXPECT_EQ(nt_sample(&valid, ws_ptr, ws_bytes - 1, d.stream()), NT_ERROR_WORKSPACE);
    EXPECT_NE(std::string(nt_last_error()).find("'workspace_bytes'"), std::string::npos) << nt_last_error();
    EXPECT_EQ(nt_sample(&valid, nullptr, ws_bytes, d.stream()), NT_ERROR_WORKSPACE);
    EXPECT_NE(std::string(nt_last_error()).find("'workspace'"), std::string::npos) << nt_last_error();
    d.sync();
    EXPECT_EQ(contents({tokens.get()}), tokens_before)
        << "a rejected workspace must not let anything run";
  }
}

TEST_P(Errors, SampleLogprobs) {
  const int64_t rows = 4, vocab = 100;
  const int32_t n = 5;
  auto logits = buffer(size_t(rows * vocab * 4));
  auto tokens = buffer(size_t(rows * 8));
  auto ids = buffer(size_t(rows * (n + 1) * 4));
  auto values = buffer(size_t(rows * (n + 1) * 4));
  auto ranks = buffer(size_t(rows * 4));
  nt_sample_logprobs_args valid{};
  valid.sample.logits = logits->matrix(NT_F32, rows, vocab);
  valid.sample.tokens = tokens->vector(NT_I64, rows);
  valid.sample.temperature = {nullptr, 0.7f};
  valid.sample.top_k = {nullptr, 50};
  valid.sample.top_p = {nullptr, 0.9f};
  valid.num_logprobs = n;
  valid.mode = NT_LOGPROBS_PROCESSED;
  valid.logprob_ids = ids->matrix(NT_I32, rows, n + 1);
  valid.logprobs = values->matrix(NT_F32, rows, n + 1);
  valid.ranks = ranks->vector(NT_I32, rows);
  size_t ws_bytes = 0;
  ASSERT_EQ(nt_sample_logprobs_workspace_size(&valid, &ws_bytes), NT_OK) << nt_last_error();
  auto ws = buffer(ws_bytes);

  using A = nt_sample_logprobs_args;
  std::vector<Case<A>> cases;
  const bool offsets = dev().views_use_byte_offset();
  for (int32_t bad : {-1, 21, 1000})
    cases.push_back({"num_logprobs " + std::to_string(bad), [bad](A& a) { a.num_logprobs = bad; }, "num_logprobs"});
  cases.push_back({"mode 2", [](A& a) { a.mode = 2; }, "mode"});
  cases.push_back({"mode ~0", [](A& a) { a.mode = 0xffffffffu; }, "mode"});
  add_tensor_cases<A>(cases, "logprob_ids", [](A& a) -> nt_tensor& { return a.logprob_ids; }, NT_I64, 2, offsets);
  add_device_cases<A>(cases, "logprob_ids", [](A& a) -> nt_tensor& { return a.logprob_ids; }, other());
  cases.push_back({"logprob_ids columns", [](A& a) { a.logprob_ids.shape[1] = 5; a.logprob_ids.row_stride = 5; }, "logprob_ids"});
  cases.push_back({"logprob_ids rows", [](A& a) { a.logprob_ids.shape[0] = 3; }, "logprob_ids"});
  add_tensor_cases<A>(cases, "logprobs", [](A& a) -> nt_tensor& { return a.logprobs; }, NT_F16, 2, offsets);
  add_device_cases<A>(cases, "logprobs", [](A& a) -> nt_tensor& { return a.logprobs; }, other());
  cases.push_back({"logprobs columns", [](A& a) { a.logprobs.shape[1] = 7; }, "logprobs"});
  cases.push_back({"logprobs rows", [](A& a) { a.logprobs.shape[0] = 5; }, "logprobs"});
  add_tensor_cases<A>(cases, "ranks", [](A& a) -> nt_tensor& { return a.ranks; }, NT_I64, 1, offsets);
  add_device_cases<A>(cases, "ranks", [](A& a) -> nt_tensor& { return a.ranks; }, other());
  cases.push_back({"ranks length", [](A& a) { a.ranks.shape[0] = 3; }, "ranks"});
  // The sample's own arguments are checked as nt_sample checks them.
  cases.push_back({"sample.tokens length", [](A& a) { a.sample.tokens.shape[0] = 3; }, "tokens"});
  cases.push_back({"sample.top_p", [](A& a) { a.sample.top_p.scalar = 1.5f; }, "top_p"});

  TestDevice& d = dev();
  void* ws_ptr = ws->handle();
  expect_rejected<A>(valid, cases, [&](const A* a) {
    size_t bytes = 0;
    const nt_status sized = nt_sample_logprobs_workspace_size(a, &bytes);
    const std::string message = nt_last_error();
    const nt_status ran = nt_sample_logprobs(a, ws_ptr, ws_bytes, d.stream());
    EXPECT_EQ(sized, ran) << "nt_sample_logprobs_workspace_size and nt_sample_logprobs disagree";
    EXPECT_EQ(message, nt_last_error()) << "the size query and the op disagree";
    d.sync();
    return ran;
  }, {tokens.get(), ids.get(), values.get(), ranks.get()});
  if (ws_bytes > 0) {
    EXPECT_EQ(nt_sample_logprobs(&valid, ws_ptr, ws_bytes - 1, d.stream()), NT_ERROR_WORKSPACE);
    EXPECT_NE(std::string(nt_last_error()).find("'workspace_bytes'"), std::string::npos) << nt_last_error();
  }
  EXPECT_EQ(nt_sample_logprobs(nullptr, ws_ptr, ws_bytes, d.stream()), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'args'"), std::string::npos) << nt_last_error();
  EXPECT_EQ(nt_sample_logprobs_workspace_size(&valid, nullptr), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'bytes'"), std::string::npos) << nt_last_error();
}

TEST_P(Errors, ApplyTokenBitmask) {
  const int64_t rows = 3, vocab = 70, words = 3;
  auto logits = buffer(size_t(rows * vocab * 4));
  auto mask = buffer(size_t(rows * words * 4));
  // Rows that exist, so that a call which ran would mask them.
  auto indices = to_device(dev(), std::vector<int32_t>{2, 0, 0, 0});
  using A = nt_apply_token_bitmask_args;
  A valid{};
  valid.logits = logits->matrix(NT_BF16, rows, vocab);
  valid.bitmask = mask->matrix(NT_I32, rows, words);
  valid.indices = indices->vector(NT_I32, 2);
  const bool offsets = dev().views_use_byte_offset();
  std::vector<Case<A>> cases;
  add_tensor_cases<A>(cases, "logits", [](A& a) -> nt_tensor& { return a.logits; }, NT_I8, 2, offsets);
  cases.push_back({"V = 0", [](A& a) { a.logits.shape[1] = 0; }, "logits"});
  cases.push_back({"row_stride < V", [](A& a) { a.logits.row_stride = 69; }, "logits"});
  add_tensor_cases<A>(cases, "bitmask", [](A& a) -> nt_tensor& { return a.bitmask; }, NT_U64, 2, offsets);
  add_device_cases<A>(cases, "bitmask", [](A& a) -> nt_tensor& { return a.bitmask; }, other());
  cases.push_back({"bitmask rows", [](A& a) { a.bitmask.shape[0] = 2; }, "bitmask"});
  cases.push_back({"bitmask W' = 0", [](A& a) { a.bitmask.shape[1] = 0; }, "bitmask"});
  cases.push_back({"bitmask row_stride", [](A& a) { a.bitmask.row_stride = 2; }, "bitmask"});
  cases.push_back({"indices ndim", [](A& a) { a.indices.ndim = 2; }, "indices"});
  cases.push_back({"indices dtype", [](A& a) { a.indices.dtype = NT_F32; }, "indices"});
  cases.push_back({"indices u64", [](A& a) { a.indices.dtype = NT_U64; }, "indices"});
  add_device_cases<A>(cases, "indices", [](A& a) -> nt_tensor& { return a.indices; }, other());
  TestDevice& d = dev();
  expect_rejected<A>(valid, cases, [&](const A* a) {
    const nt_status s = nt_apply_token_bitmask(a, d.stream());
    d.sync();
    return s;
  }, {logits.get()});
}

TEST_P(Errors, BitmaskFromAllowed) {
  const int64_t rows = 3, vocab = 70;
  auto allowed = buffer(size_t(rows * vocab));
  auto mask = buffer(size_t(rows * 8 * 4));
  using A = nt_bitmask_from_allowed_args;
  A valid{};
  valid.allowed = allowed->matrix(NT_BOOL, rows, vocab);
  valid.bitmask = mask->matrix(NT_I32, rows, 3);
  const bool offsets = dev().views_use_byte_offset();
  std::vector<Case<A>> cases;
  add_tensor_cases<A>(cases, "allowed", [](A& a) -> nt_tensor& { return a.allowed; }, NT_I8, 2, offsets);
  add_tensor_cases<A>(cases, "bitmask", [](A& a) -> nt_tensor& { return a.bitmask; }, NT_I64, 2, offsets);
  add_device_cases<A>(cases, "bitmask", [](A& a) -> nt_tensor& { return a.bitmask; }, other());
  cases.push_back({"bitmask rows", [](A& a) { a.bitmask.shape[0] = 4; }, "bitmask"});
  cases.push_back({"bitmask words", [](A& a) { a.bitmask.shape[1] = 2; }, "bitmask"});
  cases.push_back({"bitmask words padded", [](A& a) { a.bitmask.shape[1] = 4; a.bitmask.row_stride = 4; }, "bitmask"});
  TestDevice& d = dev();
  expect_rejected<A>(valid, cases, [&](const A* a) {
    const nt_status s = nt_bitmask_from_allowed(a, d.stream());
    d.sync();
    return s;
  });
}

template <class A>
void add_topk_output_cases(std::vector<Case<A>>& cases, nt_device_type other, bool offsets) {
  add_tensor_cases<A>(cases, "values", [](A& a) -> nt_tensor& { return a.values; }, NT_F16, 2, offsets);
  add_device_cases<A>(cases, "values", [](A& a) -> nt_tensor& { return a.values; }, other);
  cases.push_back({"values rows", [](A& a) { a.values.shape[0] += 1; }, "values"});
  cases.push_back({"values k", [](A& a) { a.values.shape[1] -= 1; }, "values"});
  add_tensor_cases<A>(cases, "indices", [](A& a) -> nt_tensor& { return a.indices; }, NT_I32, 2, offsets);
  add_device_cases<A>(cases, "indices", [](A& a) -> nt_tensor& { return a.indices; }, other);
  cases.push_back({"indices rows", [](A& a) { a.indices.shape[0] -= 1; }, "indices"});
  cases.push_back({"indices k", [](A& a) { a.indices.shape[1] += 1; a.indices.row_stride += 1; }, "indices"});
  cases.push_back({"k = 0", [](A& a) { a.k = 0; }, "k"});
  cases.push_back({"k < 0", [](A& a) { a.k = -3; }, "k"});
  cases.push_back({"bias ndim", [](A& a) { a.bias.ndim = 2; }, "bias"});
  cases.push_back({"bias dtype", [](A& a) { a.bias.dtype = NT_I32; }, "bias"});
  cases.push_back({"bias length", [](A& a) { a.bias.shape[0] -= 1; }, "bias"});
  cases.push_back({"bias unknown device", [](A& a) { a.bias.device = nt_device_type(7); }, "bias"});
  add_device_cases<A>(cases, "bias", [](A& a) -> nt_tensor& { return a.bias; }, other);
}

// Runs both the workspace query and the op; a workspace too small must be caught.
template <class A>
std::function<nt_status(const A*)> topk_call(
    TestDevice& d, Buffer& ws, size_t ws_bytes, nt_status (*size_fn)(const A*, size_t*),
    nt_status (*run_fn)(const A*, void*, size_t, void*)) {
  return [&d, &ws, ws_bytes, size_fn, run_fn](const A* a) {
    size_t bytes = 0;
    const nt_status sized = size_fn(a, &bytes);
    const std::string message = nt_last_error();
    const nt_status ran = run_fn(a, ws.handle(), ws_bytes, d.stream());
    d.sync();
    EXPECT_EQ(sized, ran) << "workspace query and op disagree: " << message;
    return ran;
  };
}

// A workspace too small or null fails before anything runs: the outputs in
// `untouched` (poisoned first) keep their bytes.
template <class A>
void expect_workspace_checked(TestDevice& d, const A& valid, Buffer& ws, size_t ws_bytes,
                              nt_status (*size_fn)(const A*, size_t*),
                              nt_status (*run_fn)(const A*, void*, size_t, void*),
                              const std::vector<Buffer*>& untouched) {
  EXPECT_EQ(size_fn(&valid, nullptr), NT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nt_last_error()).find("'bytes'"), std::string::npos) << nt_last_error();
  if (ws_bytes == 0) return;
  poison(untouched);
  const auto before = contents(untouched);
  EXPECT_EQ(run_fn(&valid, ws.handle(), ws_bytes - 1, d.stream()), NT_ERROR_WORKSPACE);
  EXPECT_NE(std::string(nt_last_error()).find("'workspace_bytes'"), std::string::npos) << nt_last_error();
  EXPECT_EQ(run_fn(&valid, nullptr, ws_bytes, d.stream()), NT_ERROR_WORKSPACE);
  EXPECT_NE(std::string(nt_last_error()).find("'workspace'"), std::string::npos) << nt_last_error();
  d.sync();
  EXPECT_EQ(contents(untouched), before) << "a rejected workspace must not let anything run";
}

TEST_P(Errors, LmHeadDense) {
  const int64_t rows = 2, vocab = 2100, hidden = 8;
  const int32_t k = 5;
  auto x = buffer(size_t(rows * hidden * 4));
  auto w = buffer(size_t(vocab * hidden * 4));
  auto bias = buffer(size_t(vocab * 4));
  auto values = buffer(size_t(rows * 2048 * 4));
  auto indices = buffer(size_t(rows * 2048 * 8));
  using A = nt_lm_head_dense_args;
  A valid{};
  valid.hidden = x->matrix(NT_F16, rows, hidden);
  valid.weight = w->matrix(NT_F16, vocab, hidden);
  valid.bias = bias->vector(NT_F16, vocab);
  valid.k = k;
  valid.values = values->matrix(NT_F32, rows, k);
  valid.indices = indices->matrix(NT_I64, rows, k);
  size_t ws_bytes = 0;
  ASSERT_EQ(nt_lm_head_topk_dense_workspace_size(&valid, &ws_bytes), NT_OK) << nt_last_error();
  auto ws = buffer(ws_bytes);
  const bool offsets = dev().views_use_byte_offset();
  std::vector<Case<A>> cases;
  add_tensor_cases<A>(cases, "weight", [](A& a) -> nt_tensor& { return a.weight; }, NT_I8, 2, offsets);
  cases.push_back({"V = 0", [](A& a) { a.weight.shape[0] = 0; }, "weight"});
  cases.push_back({"H = 0", [](A& a) { a.weight.shape[1] = 0; }, "weight"});
  cases.push_back({"weight row_stride", [](A& a) { a.weight.row_stride = 7; }, "weight"});
  add_tensor_cases<A>(cases, "hidden", [](A& a) -> nt_tensor& { return a.hidden; }, NT_I8, 2, offsets);
  add_device_cases<A>(cases, "hidden", [](A& a) -> nt_tensor& { return a.hidden; }, other());
  cases.push_back({"hidden dtype differs from weight", [](A& a) { a.hidden.dtype = NT_BF16; }, "hidden"});
  cases.push_back({"hidden H", [](A& a) { a.hidden.shape[1] = 7; }, "hidden"});
  cases.push_back({"k > 2048", [](A& a) {
                     a.k = 2049;
                     a.values.shape[1] = a.indices.shape[1] = 2049;
                     a.values.row_stride = a.indices.row_stride = 2049;
                   }, "k"});
  cases.push_back({"k > V", [](A& a) { a.weight.shape[0] = 4; a.bias = nt_tensor{}; }, "k"});
  add_topk_output_cases<A>(cases, other(), offsets);
  expect_rejected<A>(valid, cases, topk_call<A>(dev(), *ws, ws_bytes, nt_lm_head_topk_dense_workspace_size,
                                                 nt_lm_head_topk_dense),
                     {values.get(), indices.get()});
  expect_workspace_checked<A>(dev(), valid, *ws, ws_bytes, nt_lm_head_topk_dense_workspace_size,
                              nt_lm_head_topk_dense, {values.get(), indices.get()});
}

TEST_P(Errors, LmHeadBinary) {
  const int64_t rows = 2, vocab = 300, hidden = 128;
  const int32_t group = 64, k = 7;
  auto act_q = buffer(size_t(rows * hidden));
  auto act_scale = buffer(size_t(rows * 4));
  auto wq = buffer(size_t(vocab * hidden / 8));
  auto wscale = buffer(size_t(vocab * 4 * 2));
  auto bias = buffer(size_t(vocab * 4));
  auto values = buffer(size_t(rows * 512 * 4));
  auto indices = buffer(size_t(rows * 512 * 8));
  using A = nt_lm_head_binary_args;
  A valid{};
  valid.act_q = act_q->matrix(NT_I8, rows, hidden);
  valid.act_scale = act_scale->vector(NT_F32, rows);
  valid.wq = wq->matrix(NT_I32, vocab, hidden / 32);
  valid.wscale = wscale->matrix(NT_F16, vocab, hidden / group);
  valid.bias = bias->vector(NT_F32, vocab);
  valid.group_size = group;
  valid.k = k;
  valid.values = values->matrix(NT_F32, rows, k);
  valid.indices = indices->matrix(NT_I64, rows, k);
  size_t ws_bytes = 0;
  ASSERT_EQ(nt_lm_head_topk_binary_workspace_size(&valid, &ws_bytes), NT_OK) << nt_last_error();
  auto ws = buffer(ws_bytes);
  const bool offsets = dev().views_use_byte_offset();
  std::vector<Case<A>> cases;
  for (int32_t g : {0, 16, 48, 100, 512, -64})
    cases.push_back({"group_size " + std::to_string(g), [g](A& a) { a.group_size = g; }, "group_size"});
  add_tensor_cases<A>(cases, "act_q", [](A& a) -> nt_tensor& { return a.act_q; }, NT_I32, 2, offsets);
  cases.push_back({"H % group_size", [](A& a) {
                     a.act_q.shape[1] = 96;  // a multiple of 32 but not of 64
                     a.wq.shape[1] = a.wq.row_stride = 3;
                   }, "act_q"});
  cases.push_back({"H = 0", [](A& a) { a.act_q.shape[1] = 0; }, "act_q"});
  add_tensor_cases<A>(cases, "wq", [](A& a) -> nt_tensor& { return a.wq; }, NT_I8, 2, offsets);
  add_device_cases<A>(cases, "wq", [](A& a) -> nt_tensor& { return a.wq; }, other());
  cases.push_back({"wq words", [](A& a) { a.wq.shape[1] = 3; }, "wq"});
  cases.push_back({"V = 0", [](A& a) { a.wq.shape[0] = 0; }, "wq"});
  add_tensor_cases<A>(cases, "act_scale", [](A& a) -> nt_tensor& { return a.act_scale; }, NT_F16, 1, offsets);
  add_device_cases<A>(cases, "act_scale", [](A& a) -> nt_tensor& { return a.act_scale; }, other());
  cases.push_back({"act_scale length", [](A& a) { a.act_scale.shape[0] = 3; }, "act_scale"});
  add_tensor_cases<A>(cases, "wscale", [](A& a) -> nt_tensor& { return a.wscale; }, NT_F32, 2, offsets);
  add_device_cases<A>(cases, "wscale", [](A& a) -> nt_tensor& { return a.wscale; }, other());
  cases.push_back({"wscale bf16", [](A& a) { a.wscale.dtype = NT_BF16; }, "wscale"});
  cases.push_back({"wscale rows", [](A& a) { a.wscale.shape[0] = 299; }, "wscale"});
  cases.push_back({"wscale groups", [](A& a) { a.wscale.shape[1] = 4; a.wscale.row_stride = 4; }, "wscale"});
  cases.push_back({"k > V", [](A& a) {
                     a.k = 301;
                     a.values.shape[1] = a.indices.shape[1] = 301;
                     a.values.row_stride = a.indices.row_stride = 301;
                   }, "k"});
  add_topk_output_cases<A>(cases, other(), offsets);
  expect_rejected<A>(valid, cases, topk_call<A>(dev(), *ws, ws_bytes, nt_lm_head_topk_binary_workspace_size,
                                                 nt_lm_head_topk_binary),
                     {values.get(), indices.get()});
  expect_workspace_checked<A>(dev(), valid, *ws, ws_bytes, nt_lm_head_topk_binary_workspace_size,
                              nt_lm_head_topk_binary, {values.get(), indices.get()});
}

TEST_P(Errors, PackWeights) {
  auto signs = buffer(4 * 64);
  auto wq = buffer(4 * 2 * 4);
  using A = nt_pack_weights_args;
  A valid{};
  valid.signs = signs->matrix(NT_I8, 4, 64);
  valid.wq = wq->matrix(NT_I32, 4, 2);
  const bool offsets = dev().views_use_byte_offset();
  std::vector<Case<A>> cases;
  add_tensor_cases<A>(cases, "signs", [](A& a) -> nt_tensor& { return a.signs; }, NT_F32, 2, offsets);
  cases.push_back({"H % 32", [](A& a) { a.signs.shape[1] = 48; a.wq.shape[1] = 1; }, "signs"});
  cases.push_back({"H = 0", [](A& a) { a.signs.shape[1] = 0; a.wq.shape[1] = 0; }, "signs"});
  add_tensor_cases<A>(cases, "wq", [](A& a) -> nt_tensor& { return a.wq; }, NT_I64, 2, offsets);
  add_device_cases<A>(cases, "wq", [](A& a) -> nt_tensor& { return a.wq; }, other());
  cases.push_back({"wq rows", [](A& a) { a.wq.shape[0] = 3; }, "wq"});
  cases.push_back({"wq words", [](A& a) { a.wq.shape[1] = 1; }, "wq"});
  TestDevice& d = dev();
  expect_rejected<A>(valid, cases, [&](const A* a) {
    const nt_status s = nt_pack_weights(a, d.stream());
    d.sync();
    return s;
  });
}

TEST_P(Errors, QuantizeActivations) {
  auto x = buffer(3 * 40 * 4);
  auto q = buffer(3 * 40);
  auto scale = buffer(3 * 4);
  using A = nt_quantize_activations_args;
  A valid{};
  valid.x = x->matrix(NT_F32, 3, 40);
  valid.act_q = q->matrix(NT_I8, 3, 40);
  valid.act_scale = scale->vector(NT_F32, 3);
  const bool offsets = dev().views_use_byte_offset();
  std::vector<Case<A>> cases;
  add_tensor_cases<A>(cases, "x", [](A& a) -> nt_tensor& { return a.x; }, NT_I8, 2, offsets);
  add_tensor_cases<A>(cases, "act_q", [](A& a) -> nt_tensor& { return a.act_q; }, NT_U64, 2, offsets);
  add_device_cases<A>(cases, "act_q", [](A& a) -> nt_tensor& { return a.act_q; }, other());
  cases.push_back({"act_q rows", [](A& a) { a.act_q.shape[0] = 2; }, "act_q"});
  cases.push_back({"act_q cols", [](A& a) { a.act_q.shape[1] = 39; }, "act_q"});
  add_tensor_cases<A>(cases, "act_scale", [](A& a) -> nt_tensor& { return a.act_scale; }, NT_F16, 1, offsets);
  add_device_cases<A>(cases, "act_scale", [](A& a) -> nt_tensor& { return a.act_scale; }, other());
  cases.push_back({"act_scale length", [](A& a) { a.act_scale.shape[0] = 4; }, "act_scale"});
  TestDevice& d = dev();
  expect_rejected<A>(valid, cases, [&](const A* a) {
    const nt_status s = nt_quantize_activations(a, d.stream());
    d.sync();
    return s;
  });
}

NTT_INSTANTIATE_ON_DEVICES(Errors);

// Backends not compiled in or without a device report it, with a message.
TEST(Library, UnavailableBackendIsReported) {
  EXPECT_EQ(nt_backend_available(NT_DEVICE_CPU), 1);
  nt_device_type missing = NT_DEVICE_CPU;
  for (nt_device_type d : {NT_DEVICE_CUDA, NT_DEVICE_OPENCL})
    if (!nt_backend_available(d)) missing = d;
  if (missing == NT_DEVICE_CPU) GTEST_SKIP() << "every backend is available";
  std::vector<float> logits(10, 1.0f);
  std::vector<int64_t> tokens(1);
  nt_sample_args a{};
  a.logits = nexttok::matrix(logits.data(), 1, 10);
  a.tokens = nexttok::vector(tokens.data(), 1);
  a.logits.device = a.tokens.device = missing;
  a.temperature.scalar = 1.0f;
  a.top_p.scalar = 1.0f;
  EXPECT_EQ(nt_sample(&a, nullptr, 0, nullptr), NT_ERROR_BACKEND_UNAVAILABLE);
  const std::string name = missing == NT_DEVICE_CUDA ? "cuda" : "opencl";
  EXPECT_NE(std::string(nt_last_error()).find(name), std::string::npos) << nt_last_error();
}

TEST(Library, StatusStringsAndVersion) {
  for (nt_status s : {NT_OK, NT_ERROR_INVALID_ARGUMENT, NT_ERROR_UNSUPPORTED, NT_ERROR_BACKEND_UNAVAILABLE,
                      NT_ERROR_WORKSPACE, NT_ERROR_BACKEND, NT_ERROR_INTERNAL})
    EXPECT_GT(std::string(nt_status_string(s)).size(), 0u);
  EXPECT_STREQ(nt_version_string(), "0.2.0");
}

}  // namespace
}  // namespace ntt
