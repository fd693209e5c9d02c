#include "harness/test_device.h"

#include <stdexcept>

namespace ntt {

std::unique_ptr<TestDevice> make_cpu_device();
#ifdef NEXTTOK_TEST_CUDA  // harness/device_cuda.cpp
std::unique_ptr<TestDevice> make_cuda_device();
#endif
#ifdef NEXTTOK_TEST_OPENCL  // harness/device_opencl.cpp
std::unique_ptr<TestDevice> make_opencl_device();
#endif

namespace {

struct Registry {
  std::vector<std::unique_ptr<TestDevice>> devices;
  Registry() {
    devices.push_back(make_cpu_device());
#ifdef NEXTTOK_TEST_CUDA
    devices.push_back(make_cuda_device());
#endif
#ifdef NEXTTOK_TEST_OPENCL
    devices.push_back(make_opencl_device());
#endif
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

nt_tensor device_matrix(const TestDevice& device, void* handle, size_t byte_offset, nt_dtype dtype,
                        int64_t rows, int64_t cols, int64_t row_stride) {
  nt_tensor t{};
  if (device.views_use_byte_offset()) {
    t.data = handle;
    t.byte_offset = int64_t(byte_offset);
  } else {
    t.data = static_cast<char*>(handle) + byte_offset;
  }
  t.dtype = dtype;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.row_stride = row_stride < 0 ? cols : row_stride;
  t.device = device.type();
  t.device_id = device.id();
  return t;
}

nt_tensor device_vector(const TestDevice& device, void* handle, size_t byte_offset, nt_dtype dtype,
                        int64_t n) {
  nt_tensor t = device_matrix(device, handle, byte_offset, dtype, n, 1);
  t.ndim = 1;
  t.shape[1] = 0;
  t.row_stride = n;
  return t;
}

Buffer::Buffer(TestDevice& device, size_t bytes) : device_(device), bytes_(bytes) {
  // Zero-byte tensors still need a non-null handle: null means "absent" in nt_tensor.
  handle_ = device_.allocate(bytes == 0 ? 16 : bytes);
  if (handle_ == nullptr) throw std::runtime_error("test device allocation failed");
}

Buffer::~Buffer() { device_.free(handle_); }

void Buffer::upload(const void* src, size_t bytes) {
  if (bytes > bytes_) throw std::runtime_error("Buffer::upload past the end");
  if (bytes) device_.upload(handle_, src, bytes);
}

void Buffer::download(void* dst, size_t bytes) const {
  if (bytes > bytes_) throw std::runtime_error("Buffer::download past the end");
  if (bytes) device_.download(dst, handle_, bytes);
}

std::vector<std::string> device_names() {
  std::vector<std::string> names;
  for (auto& d : registry().devices) names.push_back(d->name());
  return names;
}

TestDevice& device(const std::string& name) {
  for (auto& d : registry().devices)
    if (d->name() == name) return *d;
  throw std::runtime_error("no test device named " + name);
}

TestDevice& cpu_device() { return device("cpu"); }

}  // namespace ntt
