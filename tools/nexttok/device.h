// Device memory for the benchmark rows, on the harness's devices
// (tests/harness/test_device.h). On the CPU the library's tensors are host
// memory, so a buffer aliases its host copy; on OpenCL it is a cl_mem copy.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "harness/test_device.h"

using ntt::TestDevice;

// The harness's device of this backend, or nullptr (with the reason in `why`)
// when it is not compiled in or has no hardware.
TestDevice* find_device(nt_device_type type, std::string* why);

// A device-side copy of a host buffer: an alias on the CPU, an owned
// allocation otherwise.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(TestDevice& dev, void* host, size_t bytes) : dev_(&dev) {
    if (dev.type() == NT_DEVICE_CPU) {
      ptr_ = host;
    } else {
      ptr_ = dev.allocate(bytes);
      owned_ = true;
      dev.upload(ptr_, host, bytes);
    }
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(dev_, o.dev_);
    std::swap(ptr_, o.ptr_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  ~DeviceBuffer() {
    if (owned_ && ptr_) dev_->free(ptr_);
  }
  void* get() const { return ptr_; }

 private:
  TestDevice* dev_ = nullptr;
  void* ptr_ = nullptr;
  bool owned_ = false;
};

// Device memory the op writes or uses as workspace; no host copy.
class DeviceScratch {
 public:
  DeviceScratch(TestDevice& dev, size_t bytes) : dev_(dev), bytes_(bytes) {
    if (bytes) ptr_ = dev.allocate(bytes);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch() {
    if (ptr_) dev_.free(ptr_);
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  TestDevice& dev_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};
