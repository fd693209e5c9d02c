// Registers the OpenCL backend. Every call's stream is a cl_command_queue; the
// device is the queue's. available() says whether any platform has a device,
// so callers get a clear error on a machine with no OpenCL platform.
#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#define CL_HPP_ENABLE_EXCEPTIONS
#include <CL/opencl.hpp>

#include <vector>

#include "backend.h"

namespace nt {
namespace {

class OpenclBackend final : public Backend {
 public:
  const char* name() const override { return "opencl"; }
  bool available() const override {
    try {
      std::vector<cl::Platform> platforms;
      cl::Platform::get(&platforms);
      for (auto& p : platforms) {
        std::vector<cl::Device> devices;
        p.getDevices(CL_DEVICE_TYPE_ALL, &devices);
        if (!devices.empty()) return true;
      }
    } catch (const cl::Error&) {
    }
    return false;
  }
};

}  // namespace

Backend* opencl_backend() {
  static OpenclBackend backend;
  return &backend;
}

}  // namespace nt
