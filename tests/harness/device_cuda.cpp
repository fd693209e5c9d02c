// The CUDA test device, through the runtime API only: device memory, one
// non-default stream that every op gets, blocking copies ordered on it.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "harness/test_device.h"

namespace ntt {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

class CudaDevice final : public TestDevice {
 public:
  ~CudaDevice() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  std::string name() const override { return "cuda"; }
  nt_device_type type() const override { return NT_DEVICE_CUDA; }
  bool present(std::string* why) override {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
      return false;
    }
    if (count == 0) {
      if (why) *why = "no CUDA device";
      return false;
    }
    return true;
  }
  std::string description() override {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    return prop.name;
  }
  // CI runners have no GPU; GPU runners set NEXTTOK_TEST_REQUIRE=cuda.
  bool required_in_ci() const override { return false; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  void free(void* handle) override { cudaFree(handle); }
  void upload(void* handle, const void* src, size_t bytes) override {
    check(cudaMemcpyAsync(handle, src, bytes, cudaMemcpyHostToDevice, cuda_stream()),
          "cudaMemcpyAsync H2D");
    sync();
  }
  void download(void* dst, const void* handle, size_t bytes) override {
    check(cudaMemcpyAsync(dst, handle, bytes, cudaMemcpyDeviceToHost, cuda_stream()),
          "cudaMemcpyAsync D2H");
    sync();
  }
  void* stream() override { return cuda_stream(); }
  void sync() override { check(cudaStreamSynchronize(cuda_stream()), "cudaStreamSynchronize"); }

 private:
  cudaStream_t cuda_stream() {
    if (stream_ == nullptr) {
      check(cudaSetDevice(0), "cudaSetDevice");
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    return stream_;
  }
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<TestDevice> make_cuda_device() { return std::make_unique<CudaDevice>(); }

}  // namespace ntt
