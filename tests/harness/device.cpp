#include "harness/device.h"

#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>

namespace ntt {

std::unique_ptr<TestDevice> make_cpu_device();
#ifdef NEXTTOK_TEST_CUDA
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

bool env_true(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string s(v);
  return s == "true" || s == "1" || s == "TRUE" || s == "True" || s == "yes";
}

bool listed_in_env(const char* name, const std::string& device) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  std::stringstream list(v);
  std::string item;
  while (std::getline(list, item, ','))
    if (item == device) return true;
  return false;
}

}  // namespace

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

nt_tensor Buffer::matrix(nt_dtype dtype, int64_t rows, int64_t cols, int64_t row_stride,
                         size_t byte_offset) const {
  nt_tensor t{};
  if (device_.views_use_byte_offset()) {
    t.data = handle_;
    t.byte_offset = int64_t(byte_offset);
  } else {
    t.data = static_cast<char*>(handle_) + byte_offset;
  }
  t.dtype = dtype;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.row_stride = row_stride < 0 ? cols : row_stride;
  t.device = device_.type();
  t.device_id = device_.id();
  return t;
}

nt_tensor Buffer::vector(nt_dtype dtype, int64_t n) const {
  nt_tensor t = matrix(dtype, n, 1);
  t.ndim = 1;
  t.shape[1] = 0;
  t.row_stride = n;
  return t;
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

void DeviceTest::SetUp() {
  device_ = &device(GetParam());
  std::string why;
  if (device_->present(&why)) return;
  const bool required = (env_true("CI") && device_->required_in_ci()) ||
                        listed_in_env("NEXTTOK_TEST_REQUIRE", device_->name());
  if (required) FAIL() << "required test device '" << device_->name() << "' is missing: " << why;
  GTEST_SKIP() << "device '" << device_->name() << "' not present: " << why;
}

std::string device_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace ntt
