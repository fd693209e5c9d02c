// What every OpenCL op shares on the host: the queue a call runs on, tensor
// arguments checked against their buffers, programs built once per context and
// device from the embedded sources, and OpenCL errors turned into nt::Error.
#pragma once

#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#define CL_HPP_ENABLE_EXCEPTIONS
#include <CL/opencl.hpp>

#include <cstddef>
#include <initializer_list>
#include <string>

#include "core/error.h"
#include "nexttok/nexttok.h"

namespace nt::opencl {

// The largest work-group any kernel is written for (the size of its local
// reduction arrays); the one launched is read from the kernel's limits.
constexpr size_t kMaxWorkGroup = 256;

// The call's stream: a cl_command_queue, with its context and device.
struct Queue {
  cl::CommandQueue queue;
  cl::Context context;
  cl::Device device;
};

Queue queue_of(const char* op, void* stream);

// A tensor as a kernel takes it: the buffer and the view's offset in elements.
struct View {
  cl::Buffer buffer;
  cl_ulong offset = 0;
};

// The buffer must belong to the queue's context, byte_offset must be a whole
// number of elements, and every element the view addresses must lie inside it.
View view(const char* op, const char* arg, const Queue& q, const nt_tensor& t);
// A per-row parameter array of `bytes` (a null buffer when absent).
cl::Buffer per_row(const char* op, const char* arg, const Queue& q, const void* handle,
                   size_t bytes);
// The caller's workspace, `handle` of `declared` bytes, for `needed` bytes:
// check_workspace, then a cl_mem of at least `needed` bytes in the queue's context.
cl::Buffer workspace(const char* op, const Queue& q, void* handle, size_t declared,
                     size_t needed);

// A program: the core headers, common.cl, then `files`, built with `defines`.
struct ProgramSpec {
  std::initializer_list<const char*> files;
  std::string defines;
};

cl::Kernel kernel(const char* op, const Queue& q, const ProgramSpec& spec, const char* name);

// The largest power of two <= preferred the kernel can run as one work-group.
size_t work_group_size(const cl::Kernel& k, const Queue& q, size_t preferred);

// Sets kernel argument i (and advances i); a View sets two: its buffer, then its offset.
template <class T>
void set_arg(cl::Kernel& k, cl_uint& i, const T& arg) {
  k.setArg(i++, arg);
}
inline void set_arg(cl::Kernel& k, cl_uint& i, const View& v) {
  k.setArg(i++, v.buffer);
  k.setArg(i++, v.offset);
}

// A sampling parameter of sample and verify as their kernels take it: the
// per-row array (a null buffer when absent), then the scalar.
template <class Scalar>
struct RowParam {
  cl::Buffer per_row;
  Scalar scalar;
};
template <class Scalar>
void set_arg(cl::Kernel& k, cl_uint& i, const RowParam<Scalar>& p) {
  k.setArg(i++, p.per_row);
  k.setArg(i++, p.scalar);
}

// The six of them, in common.cl's NT_ROW_PARAMS order.
struct RowParams {
  RowParam<cl_float> temperature;
  RowParam<cl_int> top_k;
  RowParam<cl_float> top_p, min_p;
  RowParam<cl_ulong> seed, offset;
  cl_uint per_row_flags = 0;  // common.cl's NT_PER_ROW_* bits of those that are arrays
};

// The parameters of `a`, nt_sample_args or VerifyCall (which name them alike),
// each per-row array checked against its buffer for `rows` rows.
template <class Args>
RowParams row_params(const char* op, const Queue& q, size_t rows, const Args& a) {
  RowParams p;
  p.temperature = {per_row(op, "temperature", q, a.temperature.per_row, rows * 4),
                   a.temperature.scalar};
  p.top_k = {per_row(op, "top_k", q, a.top_k.per_row, rows * 4), a.top_k.scalar};
  p.top_p = {per_row(op, "top_p", q, a.top_p.per_row, rows * 4), a.top_p.scalar};
  p.min_p = {per_row(op, "min_p", q, a.min_p.per_row, rows * 4), a.min_p.scalar};
  p.seed = {per_row(op, "seed", q, a.seed.per_row, rows * 8), a.seed.scalar};
  p.offset = {per_row(op, "offset", q, a.offset.per_row, rows * 8), a.offset.scalar};
  const void* arrays[] = {a.temperature.per_row, a.top_k.per_row, a.top_p.per_row,
                          a.min_p.per_row,       a.seed.per_row,  a.offset.per_row};
  for (cl_uint b = 0; b < 6; ++b)  // NT_PER_ROW_T = 1 << 0 ... NT_PER_ROW_OFFSET = 1 << 5
    if (arrays[b]) p.per_row_flags |= cl_uint(1) << b;
  return p;
}

inline void set_arg(cl::Kernel& k, cl_uint& i, const RowParams& p) {
  set_arg(k, i, p.temperature);
  set_arg(k, i, p.top_k);
  set_arg(k, i, p.top_p);
  set_arg(k, i, p.min_p);
  set_arg(k, i, p.seed);
  set_arg(k, i, p.offset);
}

// Sets the kernel's arguments in order, each through set_arg.
template <class... Args>
void set_args(cl::Kernel& k, const Args&... args) {
  cl_uint i = 0;
  (set_arg(k, i, args), ...);
}

// global is rounded up to a multiple of local.
void enqueue(const cl::Kernel& k, const Queue& q, size_t global, size_t local);

[[noreturn]] void fail_cl(const char* op, const cl::Error& e);

// Runs body; an OpenCL error becomes NT_ERROR_BACKEND naming the call and status.
template <class Body>
void guarded(const char* op, Body&& body) {
  try {
    body();
  } catch (const cl::Error& e) {
    fail_cl(op, e);
  }
}

}  // namespace nt::opencl
