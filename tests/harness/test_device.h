// One TestDevice per backend compiled into the harness (cpu always, cuda and
// opencl when the library has them): memory, copies and a stream, so that the
// same case runs on every backend. The gtest suites and `nexttok check` and
// `nexttok bench` all drive the library through these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nexttok/nexttok.h"

namespace ntt {

class TestDevice {
 public:
  virtual ~TestDevice() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda", "opencl"
  virtual nt_device_type type() const = 0;
  virtual int32_t id() const { return 0; }
  // Hardware or platform present; `why` says what is missing otherwise.
  virtual bool present(std::string* why) = 0;
  // The hardware, for reports (a CPU model, a GPU or OpenCL device name);
  // call after present().
  virtual std::string description() = 0;
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

// A tensor view of `rows` x `cols` elements at `byte_offset` into an allocation
// of `device` (row_stride < 0: contiguous rows), and a 1-D view of n elements.
nt_tensor device_matrix(const TestDevice& device, void* handle, size_t byte_offset, nt_dtype dtype,
                        int64_t rows, int64_t cols, int64_t row_stride = -1);
nt_tensor device_vector(const TestDevice& device, void* handle, size_t byte_offset, nt_dtype dtype,
                        int64_t n);

// Device memory owned by the caller; the tensor views below point into it.
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
                   size_t byte_offset = 0) const {
    return device_matrix(device_, handle_, byte_offset, dtype, rows, cols, row_stride);
  }
  nt_tensor vector(nt_dtype dtype, int64_t n) const {
    return device_vector(device_, handle_, 0, dtype, n);
  }

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

// Fills the buffer with 0xA5 bytes, a pattern no op writes (negative tokens and
// indices other than -1, small negative floats, never -inf), so that memory an
// op wrote, or read as if it held something, shows.
inline void poison(Buffer& b) {
  const std::vector<uint8_t> bytes(b.bytes(), 0xA5);
  b.upload(bytes.data(), bytes.size());
}

template <class T>
std::vector<T> from_device(const Buffer& b, size_t n) {
  std::vector<T> host(n);
  b.download(host.data(), n * sizeof(T));
  return host;
}

// Names of the devices compiled into the harness ("cpu" first).
std::vector<std::string> device_names();
// The device of that name; throws if it is not compiled in.
TestDevice& device(const std::string& name);
TestDevice& cpu_device();

}  // namespace ntt
