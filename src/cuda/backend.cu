// Registers the CUDA backend. The stream argument of every call is a
// cudaStream_t (nullptr = the legacy default stream); ops launch only on it,
// never synchronize the host and never allocate.
#include <cuda_runtime.h>

#include <string>

#include "backend.h"
#include "cuda/ops.cuh"

namespace nt {
namespace {

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }
  bool available() const override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device" error for later calls
      return false;
    }
    return count > 0;
  }
};

}  // namespace

Backend* cuda_backend() {
  static CudaBackend backend;
  return &backend;
}

}  // namespace nt
