#include "opencl/runtime.h"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "core/check.h"
#include "opencl/embedded_sources.h"

namespace nt::opencl {
namespace {

const char* status_name(cl_int status) {
#define NT_CL_STATUS(name) \
  case name: return #name;
  switch (status) {
    NT_CL_STATUS(CL_DEVICE_NOT_FOUND) NT_CL_STATUS(CL_DEVICE_NOT_AVAILABLE)
    NT_CL_STATUS(CL_COMPILER_NOT_AVAILABLE) NT_CL_STATUS(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    NT_CL_STATUS(CL_OUT_OF_RESOURCES) NT_CL_STATUS(CL_OUT_OF_HOST_MEMORY)
    NT_CL_STATUS(CL_BUILD_PROGRAM_FAILURE) NT_CL_STATUS(CL_INVALID_VALUE)
    NT_CL_STATUS(CL_INVALID_DEVICE) NT_CL_STATUS(CL_INVALID_CONTEXT)
    NT_CL_STATUS(CL_INVALID_COMMAND_QUEUE) NT_CL_STATUS(CL_INVALID_MEM_OBJECT)
    NT_CL_STATUS(CL_INVALID_BUILD_OPTIONS) NT_CL_STATUS(CL_INVALID_PROGRAM_EXECUTABLE)
    NT_CL_STATUS(CL_INVALID_KERNEL_NAME) NT_CL_STATUS(CL_INVALID_KERNEL_ARGS)
    NT_CL_STATUS(CL_INVALID_ARG_VALUE) NT_CL_STATUS(CL_INVALID_ARG_SIZE)
    NT_CL_STATUS(CL_INVALID_WORK_GROUP_SIZE) NT_CL_STATUS(CL_INVALID_WORK_ITEM_SIZE)
    NT_CL_STATUS(CL_INVALID_GLOBAL_WORK_SIZE) NT_CL_STATUS(CL_INVALID_BUFFER_SIZE)
    NT_CL_STATUS(CL_INVALID_OPERATION)
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
  }
#undef NT_CL_STATUS
  return "OpenCL error";
}

std::string device_label(const cl::Device& d) {
  try {
    return d.getInfo<CL_DEVICE_NAME>();
  } catch (const cl::Error&) {
    return "?";
  }
}

const char* embedded(const char* name) {
  for (size_t i = 0; i < kEmbeddedSourceCount; ++i)
    if (std::strcmp(kEmbeddedSources[i].name, name) == 0) return kEmbeddedSources[i].text;
  fail(NT_ERROR_INTERNAL, std::string("OpenCL source ") + name + " is not embedded in the library");
}

std::string program_text(const ProgramSpec& spec) {
  std::string text;
  for (size_t i = 0; i < kEmbeddedCoreHeaderCount; ++i) text += kEmbeddedSources[i].text;
  text += embedded("common.cl");
  for (const char* f : spec.files) text += embedded(f);
  return text;
}

// Tokens equal the CPU backend's only with IEEE division: a device that
// cannot provide it is refused rather than sampled from inexactly.
void require_exact_division(const char* op, const cl::Device& d) {
  const cl_device_fp_config fp = d.getInfo<CL_DEVICE_SINGLE_FP_CONFIG>();
  if ((fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) == 0)
    fail(NT_ERROR_UNSUPPORTED,
         std::string(op) + ": the OpenCL device '" + device_label(d) +
             "' has no correctly rounded fp32 division (CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT), "
             "which the bit-exact results need");
}

cl::Program build(const char* op, const Queue& q, const ProgramSpec& spec) {
  require_exact_division(op, q.device);
  const std::string options = "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt -DNT_WG_MAX=" +
                              std::to_string(kMaxWorkGroup) + " " + spec.defines;
  cl::Program program(q.context, program_text(spec));
  try {
    program.build({q.device}, options.c_str());
  } catch (const cl::Error& e) {
    if (e.err() != CL_BUILD_PROGRAM_FAILURE) throw;
    std::string log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(q.device);
    if (log.size() > 4000) log = log.substr(0, 4000) + "...";
    fail(NT_ERROR_BACKEND, std::string(op) + ": clBuildProgram failed on '" +
                               device_label(q.device) + "' (CL_BUILD_PROGRAM_FAILURE): " + log);
  }
  return program;
}

// Programs live as long as the process: a cached program keeps its context
// alive, so a context handle in the key can never be reused by another one.
cl::Program cached_program(const char* op, const Queue& q, const ProgramSpec& spec) {
  std::string files;
  for (const char* f : spec.files) files += std::string(f) + ";";
  using Key = std::tuple<cl_context, cl_device_id, std::string, std::string>;
  static std::mutex mutex;
  static std::map<Key, cl::Program> programs;
  const Key key{q.context(), q.device(), files, spec.defines};
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = programs.find(key);
    if (it != programs.end()) return it->second;
  }
  // Built outside the lock: a first build can take a second, and two threads
  // building the same program only waste one of them.
  cl::Program program = build(op, q, spec);
  std::lock_guard<std::mutex> lock(mutex);
  return programs.emplace(key, program).first->second;
}

cl::Buffer buffer_in_context(const char* op, const char* arg, const Queue& q, void* handle,
                             size_t* size) {
  cl_context context = nullptr;
  cl_int status = clGetMemObjectInfo(static_cast<cl_mem>(handle), CL_MEM_CONTEXT,
                                     sizeof context, &context, nullptr);
  if (status != CL_SUCCESS)
    fail_argument(op, arg, std::string("is not a cl_mem buffer (clGetMemObjectInfo: ") +
                               status_name(status) + ")");
  if (context != q.context())
    fail_argument(op, arg, "is a buffer of another OpenCL context than the queue's");
  status = clGetMemObjectInfo(static_cast<cl_mem>(handle), CL_MEM_SIZE, sizeof *size, size, nullptr);
  if (status != CL_SUCCESS)
    fail_argument(op, arg, std::string("has no size (clGetMemObjectInfo: ") + status_name(status) + ")");
  return cl::Buffer(static_cast<cl_mem>(handle), /*retainObject=*/true);
}

}  // namespace

void fail_cl(const char* op, const cl::Error& e) {
  fail(NT_ERROR_BACKEND, std::string(op) + ": " + (e.what() ? e.what() : "OpenCL call") +
                             " failed: " + status_name(e.err()) + " (" + std::to_string(e.err()) + ")");
}

Queue queue_of(const char* op, void* stream) {
  if (stream == nullptr)
    fail_argument(op, "stream", "must be a cl_command_queue for OpenCL tensors, got null");
  Queue q;
  try {
    q.queue = cl::CommandQueue(static_cast<cl_command_queue>(stream), /*retainObject=*/true);
    q.context = q.queue.getInfo<CL_QUEUE_CONTEXT>();
    q.device = q.queue.getInfo<CL_QUEUE_DEVICE>();
  } catch (const cl::Error& e) {
    fail_argument(op, "stream", std::string("is not a cl_command_queue (") + status_name(e.err()) + ")");
  }
  return q;
}

View view(const char* op, const char* arg, const Queue& q, const nt_tensor& t) {
  const size_t elt = dtype_size(t.dtype);
  if (t.byte_offset % int64_t(elt) != 0)
    fail_argument(op, arg, "has byte_offset " + std::to_string(t.byte_offset) +
                               ", not a multiple of its element size " + std::to_string(elt));
  size_t size = 0;
  View v;
  v.buffer = buffer_in_context(op, arg, q, t.data, &size);
  v.offset = cl_ulong(t.byte_offset) / elt;
  const int64_t rows = t.shape[0], cols = t.ndim == 2 ? t.shape[1] : 1;
  const int64_t elements = t.ndim == 1 ? rows : (rows == 0 ? 0 : (rows - 1) * t.row_stride + cols);
  if (size_t(t.byte_offset) + size_t(elements) * elt > size)
    fail_argument(op, arg, "reaches past the end of its buffer: byte_offset " +
                               std::to_string(t.byte_offset) + " + " +
                               std::to_string(size_t(elements) * elt) + " bytes > " +
                               std::to_string(size) + " bytes");
  return v;
}

cl::Buffer per_row(const char* op, const char* arg, const Queue& q, const void* handle, size_t bytes) {
  if (handle == nullptr) return cl::Buffer();
  size_t size = 0;
  cl::Buffer b = buffer_in_context(op, arg, q, const_cast<void*>(handle), &size);
  if (size < bytes)
    fail_argument(op, arg, "per-row buffer holds " + std::to_string(size) + " bytes, " +
                               std::to_string(bytes) + " are needed");
  return b;
}

cl::Buffer workspace(const char* op, const Queue& q, void* handle, size_t declared,
                     size_t needed) {
  check_workspace(op, needed, handle, declared);
  size_t size = 0;
  cl::Buffer b = buffer_in_context(op, "workspace", q, handle, &size);
  if (size < needed)
    fail(NT_ERROR_WORKSPACE, std::string(op) + ": argument 'workspace' is a buffer of " +
                                 std::to_string(size) + " bytes but " + std::to_string(needed) +
                                 " are needed");
  return b;
}

cl::Kernel kernel(const char* op, const Queue& q, const ProgramSpec& spec, const char* name) {
  return cl::Kernel(cached_program(op, q, spec), name);
}

size_t work_group_size(const cl::Kernel& k, const Queue& q, size_t preferred) {
  const size_t limit = k.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(q.device);
  const size_t items = q.device.getInfo<CL_DEVICE_MAX_WORK_ITEM_SIZES>()[0];
  size_t wg = 1;
  while (wg * 2 <= preferred && wg * 2 <= limit && wg * 2 <= items) wg *= 2;
  return wg;
}

void enqueue(const cl::Kernel& k, const Queue& q, size_t global, size_t local) {
  const size_t rounded = (global + local - 1) / local * local;
  q.queue.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(rounded), cl::NDRange(local));
}

}  // namespace nt::opencl
