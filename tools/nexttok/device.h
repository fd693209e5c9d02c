// Memory and synchronisation on the backend a command runs on. On the CPU the
// library's tensors are host memory, so buffers alias the host copies; OpenCL
// buffers are cl_mem objects in a context the tool owns (device_opencl.cpp).
// CUDA hooks are a TODO (make_device answers nullptr for CUDA); everything
// above this interface is already written against it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "nexttok/nexttok.h"

class Device {
 public:
  virtual ~Device() = default;
  virtual nt_device_type type() const = 0;
  virtual std::string name() const = 0;
  // Null for host memory; a cudaStream_t or cl_command_queue otherwise.
  virtual void* stream() = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
  // Returns when every op issued on stream() has finished.
  virtual void synchronize() = 0;
  // True when device buffers can simply point at host memory.
  virtual bool host_visible() const = 0;
};

// Nullptr when the tool has no hooks for this backend yet.
std::unique_ptr<Device> make_device(nt_device_type type);

// Host threads the CPU backend uses (for the header line).
int cpu_threads();
std::string cpu_model_name();

// A device-side copy of a host buffer: an alias on host-visible devices, an
// owned allocation otherwise. fetch() brings the device contents back.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device& dev, void* host, size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  void* get() const { return ptr_; }
  void refresh();  // host -> device again (after the host copy changed)
  void fetch();    // device -> host

 private:
  Device* dev_ = nullptr;
  void* host_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = false;
};

// Device memory the op writes or uses as workspace; no host copy.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  DeviceScratch(Device& dev, size_t bytes) : dev_(&dev), bytes_(bytes) {
    if (bytes) ptr_ = dev.allocate(bytes);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch() {
    if (ptr_) dev_->release(ptr_);
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  Device* dev_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A tensor view at `byte_offset` into a device allocation: OpenCL passes the
// offset beside the cl_mem, CPU and CUDA point at the element.
nt_tensor device_view(const Device& dev, void* base, size_t byte_offset, nt_dtype dtype,
                      int64_t rows, int64_t cols);
nt_tensor device_vector(const Device& dev, void* base, size_t byte_offset, nt_dtype dtype,
                        int64_t n);
