// Device hooks for the OpenCL backend: the library takes a cl_command_queue
// as every call's stream and works in the queue's context, so the tool owns
// both and hands out cl_mem buffers (tensor data on OpenCL is a cl_mem). The
// device is NEXTTOK_OPENCL_DEVICE (an index over every platform's devices in
// order, default 0), as in the tests.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "device.h"

namespace {

void ok(cl_int status, const char* what) {
  if (status != CL_SUCCESS)
    throw std::runtime_error(std::string("OpenCL: ") + what + " failed with status " + std::to_string(status));
}

class OpenclDevice final : public Device {
 public:
  OpenclDevice() {
    cl_uint count = 0;
    ok(clGetPlatformIDs(0, nullptr, &count), "clGetPlatformIDs");
    std::vector<cl_platform_id> platforms(count);
    ok(clGetPlatformIDs(count, platforms.data(), nullptr), "clGetPlatformIDs");
    std::vector<cl_device_id> devices;
    for (cl_platform_id p : platforms) {
      cl_uint n = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
      std::vector<cl_device_id> some(n);
      ok(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, some.data(), nullptr), "clGetDeviceIDs");
      devices.insert(devices.end(), some.begin(), some.end());
    }
    const char* env = std::getenv("NEXTTOK_OPENCL_DEVICE");
    const size_t index = env ? std::strtoul(env, nullptr, 10) : 0;
    if (index >= devices.size())
      throw std::runtime_error("OpenCL: no device " + std::to_string(index) + " (" +
                               std::to_string(devices.size()) + " found; NEXTTOK_OPENCL_DEVICE picks one)");
    device_ = devices[index];
    cl_int status = CL_SUCCESS;
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &status);
    ok(status, "clCreateContext");
    queue_ = clCreateCommandQueue(context_, device_, 0, &status);
    ok(status, "clCreateCommandQueue");
  }
  ~OpenclDevice() override {
    if (queue_) clReleaseCommandQueue(queue_);
    if (context_) clReleaseContext(context_);
  }
  nt_device_type type() const override { return NT_DEVICE_OPENCL; }
  std::string name() const override {
    char buf[256] = {};
    clGetDeviceInfo(device_, CL_DEVICE_NAME, sizeof buf - 1, buf, nullptr);
    return buf;
  }
  void* stream() override { return queue_; }
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    cl_int status = CL_SUCCESS;
    cl_mem m = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &status);
    ok(status, "clCreateBuffer");
    return m;
  }
  void release(void* p) override {
    if (p) clReleaseMemObject(static_cast<cl_mem>(p));
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes)
      ok(clEnqueueWriteBuffer(queue_, static_cast<cl_mem>(dst), CL_TRUE, 0, bytes, src, 0, nullptr, nullptr),
         "clEnqueueWriteBuffer");
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes)
      ok(clEnqueueReadBuffer(queue_, static_cast<cl_mem>(const_cast<void*>(src)), CL_TRUE, 0, bytes, dst, 0,
                             nullptr, nullptr),
         "clEnqueueReadBuffer");
  }
  void synchronize() override { ok(clFinish(queue_), "clFinish"); }
  bool host_visible() const override { return false; }

 private:
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
};

}  // namespace

std::unique_ptr<Device> make_opencl_device() { return std::make_unique<OpenclDevice>(); }
