// Registers the OpenCL backend (opencl/ops.h). available() says whether any
// platform has a device, so callers get a clear error on a machine with no
// OpenCL platform.
#include <vector>

#include "opencl/ops.h"
#include "opencl/runtime.h"

namespace nt {
namespace opencl {
namespace {

bool any_opencl_device() {
  try {
    std::vector<cl::Platform> platforms;
    cl::Platform::get(&platforms);
    for (auto& p : platforms) {
      std::vector<cl::Device> devices;
      try {
        p.getDevices(CL_DEVICE_TYPE_ALL, &devices);
      } catch (const cl::Error&) {
        continue;  // CL_DEVICE_NOT_FOUND on this platform
      }
      if (!devices.empty()) return true;
    }
  } catch (const cl::Error&) {
  }
  return false;
}

}  // namespace

bool OpenclBackend::available() const {
  if (found_.load(std::memory_order_relaxed)) return true;
  const bool found = any_opencl_device();
  if (found) found_.store(true, std::memory_order_relaxed);
  return found;
}

}  // namespace opencl

Backend* opencl_backend() {
  static opencl::OpenclBackend backend;
  return &backend;
}

}  // namespace nt
