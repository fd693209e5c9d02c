// The CPU test device: host memory, no stream; ops are complete when they return.
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "harness/test_device.h"

namespace ntt {
namespace {

class CpuDevice final : public TestDevice {
 public:
  std::string name() const override { return "cpu"; }
  nt_device_type type() const override { return NT_DEVICE_CPU; }
  bool present(std::string*) override { return true; }
  std::string description() override {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
        return line.substr(line.find_first_not_of(' ', line.find(':') + 1));
    return "unknown CPU";
  }
  bool required_in_ci() const override { return true; }
  // 64-byte aligned like a device allocation, so alignment assumptions show on CPU too.
  void* allocate(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void free(void* handle) override { std::free(handle); }
  void upload(void* handle, const void* src, size_t bytes) override {
    std::memcpy(handle, src, bytes);
  }
  void download(void* dst, const void* handle, size_t bytes) override {
    std::memcpy(dst, handle, bytes);
  }
  void* stream() override { return nullptr; }
  void sync() override {}
};

}  // namespace

std::unique_ptr<TestDevice> make_cpu_device() { return std::make_unique<CpuDevice>(); }

}  // namespace ntt
