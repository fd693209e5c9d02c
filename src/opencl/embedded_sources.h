// The OpenCL C sources compiled into the library (cmake/EmbedOpenCL.cmake):
// the core headers, stripped of their includes of each other, and the .cl files.
#pragma once

#include <cstddef>

namespace nt::opencl {

struct EmbeddedSource {
  const char* name;  // file name, e.g. "sampling.h" or "sample.cl"
  const char* text;
};

extern const EmbeddedSource kEmbeddedSources[];
extern const size_t kEmbeddedSourceCount;
// The table starts with the core headers, in dependency order (the order of
// NEXTTOK_OPENCL_CORE_HEADERS): every program begins with them.
extern const size_t kEmbeddedCoreHeaderCount;

}  // namespace nt::opencl
