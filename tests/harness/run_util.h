// What the op runners (run_ops.cpp, ops_penalties.cpp) share: a failing status
// as OpError, per-row parameter arrays on the device, and a workspace of the
// queried size.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "harness/run_ops.h"

namespace ntt {

inline void ok(nt_status status, const char* what) {
  if (status != NT_OK)
    throw OpError(status, std::string(what) + " failed: " + nt_status_string(status) + ": " +
                              nt_last_error());
}

// An absent per-row array is a scalar; present ones live on the device.
template <class T>
std::unique_ptr<Buffer> param_buffer(TestDevice& dev, const Param<T>& p) {
  return p.per_row ? to_device(dev, p.values) : nullptr;
}

inline const void* handle_or_null(const std::unique_ptr<Buffer>& b) {
  return b ? b->handle() : nullptr;
}

struct Workspace {
  std::unique_ptr<Buffer> buffer;
  void* ptr() const { return buffer ? buffer->handle() : nullptr; }
  size_t bytes = 0;
  Workspace(TestDevice& dev, size_t n) : bytes(n) {
    if (n) buffer = std::make_unique<Buffer>(dev, n);
  }
};

}  // namespace ntt
