// Python arrays -> nt_tensor views, and nexttok status codes -> Python
// exceptions. Views borrow the caller's memory; nothing here copies or
// allocates device memory.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>

#include "nexttok/nexttok.h"

namespace ntpy {
namespace nb = nanobind;

// A view, and the DLPack import (if any) that keeps its memory alive for the call.
struct View {
  nt_tensor t{};
  nb::ndarray<nb::ro> keep;
};

// Argument errors name the operation and the argument, as the C API's do.
[[noreturn]] void raise_arg(PyObject* type, const char* op, const char* arg,
                            const std::string& what);
// Raises the exception that matches a failed C call (reads nt_last_error()).
// `c_arg` -> `py_arg` renames an argument whose Python name differs.
[[noreturn]] void raise_status(nt_status status, const char* c_arg = nullptr,
                               const char* py_arg = nullptr);
inline void check(nt_status status, const char* c_arg = nullptr, const char* py_arg = nullptr) {
  if (status != NT_OK) raise_status(status, c_arg, py_arg);
}

bool is_array(nb::handle obj);

// torch tensors are read through their attributes (a DLPack export costs about
// 4 us a tensor in torch); every other array goes through DLPack or the buffer
// protocol. `writable` refuses read-only arrays.
View view(const char* op, const char* arg, nb::handle obj, bool writable = false);
View optional_view(const char* op, const char* arg, nb::handle obj, bool writable = false);

// A sampling parameter: a Python scalar, or a 1-D array of length B on the
// logits' device (read at run time, so CUDA graphs replay its current value).
nt_param_f32 param_f32(const char* op, const char* arg, nb::handle obj, const nt_tensor& logits,
                       View& keep);
nt_param_i32 param_i32(const char* op, const char* arg, nb::handle obj, const nt_tensor& logits,
                       View& keep);
nt_param_u64 param_u64(const char* op, const char* arg, nb::handle obj, const nt_tensor& logits,
                       View& keep);

}  // namespace ntpy
