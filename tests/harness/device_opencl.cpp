// The OpenCL test device: one context and in-order queue on the device picked
// by NEXTTOK_OPENCL_DEVICE (an index over every platform's devices in order,
// default 0); tensors are cl_mem buffers and views carry byte offsets.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/test_device.h"

namespace ntt {
namespace {

void check(cl_int status, const char* what) {
  if (status != CL_SUCCESS) throw std::runtime_error(std::string(what) + " failed: " + std::to_string(status));
}

// Every device of every platform, in platform order.
std::vector<cl_device_id> all_devices(std::string* why) {
  cl_uint n_platforms = 0;
  const cl_int status = clGetPlatformIDs(0, nullptr, &n_platforms);
  if (status != CL_SUCCESS || n_platforms == 0) {
    *why = "no OpenCL platform (clGetPlatformIDs: " + std::to_string(status) + ")";
    return {};
  }
  std::vector<cl_platform_id> platforms(n_platforms);
  clGetPlatformIDs(n_platforms, platforms.data(), nullptr);
  std::vector<cl_device_id> devices;
  for (cl_platform_id p : platforms) {
    cl_uint n = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
    std::vector<cl_device_id> some(n);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, some.data(), nullptr);
    devices.insert(devices.end(), some.begin(), some.end());
  }
  if (devices.empty()) *why = "OpenCL platforms found, but no device";
  return devices;
}

class OpenclDevice final : public TestDevice {
 public:
  ~OpenclDevice() override {
    if (queue_) clReleaseCommandQueue(queue_);
    if (context_) clReleaseContext(context_);
  }
  std::string name() const override { return "opencl"; }
  nt_device_type type() const override { return NT_DEVICE_OPENCL; }
  bool present(std::string* why) override {
    if (queue_) return true;
    std::string reason;
    const std::vector<cl_device_id> devices = all_devices(&reason);
    if (devices.empty()) {
      if (why) *why = reason;
      return false;
    }
    const char* env = std::getenv("NEXTTOK_OPENCL_DEVICE");
    const size_t index = env ? size_t(std::strtoul(env, nullptr, 10)) : 0;
    if (index >= devices.size()) {
      if (why) *why = "NEXTTOK_OPENCL_DEVICE=" + std::string(env) + " but only " +
                      std::to_string(devices.size()) + " OpenCL device(s) exist";
      return false;
    }
    device_ = devices[index];
    // Which device ran goes on record (two drivers can be installed side by side).
    std::fprintf(stderr, "[opencl test device %zu of %zu] %s\n", index, devices.size(),
                 description().c_str());
    cl_int status = CL_SUCCESS;
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &status);
    check(status, "clCreateContext");
    queue_ = clCreateCommandQueue(context_, device_, 0, &status);
    check(status, "clCreateCommandQueue");
    return true;
  }
  std::string description() override {
    char name[256] = {};
    clGetDeviceInfo(device_, CL_DEVICE_NAME, sizeof(name) - 1, name, nullptr);
    return name;
  }
  bool required_in_ci() const override { return true; }
  bool views_use_byte_offset() const override { return true; }

  void* allocate(size_t bytes) override {
    cl_int status = CL_SUCCESS;
    cl_mem m = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &status);
    check(status, "clCreateBuffer");
    return m;
  }
  void free(void* handle) override { clReleaseMemObject(static_cast<cl_mem>(handle)); }
  void upload(void* handle, const void* src, size_t bytes) override {
    check(clEnqueueWriteBuffer(queue_, static_cast<cl_mem>(handle), CL_TRUE, 0, bytes, src, 0,
                               nullptr, nullptr),
          "clEnqueueWriteBuffer");
  }
  void download(void* dst, const void* handle, size_t bytes) override {
    check(clEnqueueReadBuffer(queue_, static_cast<cl_mem>(const_cast<void*>(handle)), CL_TRUE, 0,
                              bytes, dst, 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
  }
  void* stream() override { return queue_; }
  void sync() override { check(clFinish(queue_), "clFinish"); }

 private:
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
};

}  // namespace

std::unique_ptr<TestDevice> make_opencl_device() { return std::make_unique<OpenclDevice>(); }

}  // namespace ntt
