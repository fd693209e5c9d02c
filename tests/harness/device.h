// The cross-backend harness: one TestDevice per backend the tests can drive.
// Every op test is instantiated once per device compiled into the tests; a device
// compiled in but without hardware skips, unless the environment says it must be
// there (CI=true for devices CI always provides, NEXTTOK_TEST_REQUIRE=name,...),
// in which case the test fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nexttok/nexttok.h"

namespace ntt {

class TestDevice {
 public:
  virtual ~TestDevice() = default;
  virtual std::string name() const = 0;
  virtual nt_device_type type() const = 0;
  virtual int32_t id() const { return 0; }
  // Hardware or platform present; `why` says what is missing otherwise.
  virtual bool present(std::string* why) = 0;
  // CI machines always provide it (so CI=true turns its absence into a failure).
  virtual bool required_in_ci() const = 0;
  // On OpenCL a tensor's data is a cl_mem and views use byte_offset; on CPU and
  // CUDA data points at the first element.
  virtual bool views_use_byte_offset() const { return false; }

  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* handle) = 0;
  // Blocking copies, ordered after everything already queued on stream().
  virtual void upload(void* handle, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* handle, size_t bytes) = 0;
  virtual void* stream() = 0;
  virtual void sync() = 0;
};

// Device memory owned by the test; the tensor views below point into it.
class Buffer {
 public:
  Buffer(TestDevice& device, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void upload(const void* src, size_t bytes);
  void download(void* dst, size_t bytes) const;
  size_t bytes() const { return bytes_; }
  void* handle() const { return handle_; }

  nt_tensor matrix(nt_dtype dtype, int64_t rows, int64_t cols, int64_t row_stride = -1,
                   size_t byte_offset = 0) const;
  nt_tensor vector(nt_dtype dtype, int64_t n) const;

 private:
  TestDevice& device_;
  void* handle_ = nullptr;
  size_t bytes_ = 0;
};

template <class T>
std::unique_ptr<Buffer> to_device(TestDevice& device, const std::vector<T>& host) {
  auto b = std::make_unique<Buffer>(device, host.size() * sizeof(T));
  b->upload(host.data(), host.size() * sizeof(T));
  return b;
}

template <class T>
std::vector<T> from_device(const Buffer& b, size_t n) {
  std::vector<T> host(n);
  b.download(host.data(), n * sizeof(T));
  return host;
}

// Names of the devices compiled into the tests ("cpu" first).
std::vector<std::string> device_names();
TestDevice& device(const std::string& name);
TestDevice& cpu_device();

// Fixture of every cross-backend test: param = device name.
class DeviceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  TestDevice& dev() { return *device_; }
  bool is_cpu() const { return device_->type() == NT_DEVICE_CPU; }

 private:
  TestDevice* device_ = nullptr;
};

std::string device_param_name(const ::testing::TestParamInfo<std::string>& info);

}  // namespace ntt

#define NTT_INSTANTIATE_ON_DEVICES(suite) \
  INSTANTIATE_TEST_SUITE_P(Devices, suite, ::testing::ValuesIn(::ntt::device_names()), \
                           ::ntt::device_param_name)
