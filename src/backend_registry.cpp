// Backends not compiled into this build answer nullptr; dispatch turns that
// into NT_ERROR_BACKEND_UNAVAILABLE with a message.
#include "backend.h"

namespace nt {
#ifndef NEXTTOK_WITH_CUDA
Backend* cuda_backend() { return nullptr; }
#endif
#ifndef NEXTTOK_WITH_OPENCL
Backend* opencl_backend() { return nullptr; }
#endif
}  // namespace nt
