#include "device.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <utility>

namespace {

class HostDevice final : public Device {
 public:
  nt_device_type type() const override { return NT_DEVICE_CPU; }
  std::string name() const override { return cpu_model_name(); }
  void* stream() override { return nullptr; }
  void* allocate(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void release(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void synchronize() override {}
  bool host_visible() const override { return true; }
};

}  // namespace

#ifdef NEXTTOK_TOOL_OPENCL
std::unique_ptr<Device> make_opencl_device();  // device_opencl.cpp
#endif

std::unique_ptr<Device> make_device(nt_device_type type) {
  if (type == NT_DEVICE_CPU) return std::make_unique<HostDevice>();
#ifdef NEXTTOK_TOOL_OPENCL
  if (type == NT_DEVICE_OPENCL) return make_opencl_device();
#endif
  // TODO(cuda): a device_cuda.cpp like device_opencl.cpp: cudaMalloc,
  // cudaMemcpy, a private stream and cudaStreamSynchronize, the name from
  // cudaGetDeviceProperties; built when NEXTTOK_WITH_CUDA, linked to CUDA::cudart.
  return nullptr;
}

int cpu_threads() { return nt_cpu_num_threads(); }

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

DeviceBuffer::DeviceBuffer(Device& dev, void* host, size_t bytes)
    : dev_(&dev), host_(host), bytes_(bytes) {
  if (dev.host_visible()) {
    ptr_ = host;
  } else {
    ptr_ = dev.allocate(bytes);
    owned_ = true;
    dev.upload(ptr_, host, bytes);
  }
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(dev_, o.dev_);
  std::swap(host_, o.host_);
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  std::swap(owned_, o.owned_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (owned_ && ptr_) dev_->release(ptr_);
}

void DeviceBuffer::refresh() {
  if (owned_) dev_->upload(ptr_, host_, bytes_);
}

void DeviceBuffer::fetch() {
  if (owned_) {
    dev_->synchronize();
    dev_->download(host_, ptr_, bytes_);
  }
}

nt_tensor device_view(const Device& dev, void* base, size_t byte_offset, nt_dtype dtype,
                      int64_t rows, int64_t cols) {
  nt_tensor t{};
  if (dev.type() == NT_DEVICE_OPENCL) {
    t.data = base;
    t.byte_offset = static_cast<int64_t>(byte_offset);
  } else {
    t.data = static_cast<char*>(base) + byte_offset;
  }
  t.dtype = dtype;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.row_stride = cols;
  t.device = dev.type();
  return t;
}

nt_tensor device_vector(const Device& dev, void* base, size_t byte_offset, nt_dtype dtype,
                        int64_t n) {
  nt_tensor t = device_view(dev, base, byte_offset, dtype, n, 1);
  t.ndim = 1;
  t.shape[1] = 0;
  t.row_stride = n;
  return t;
}
