#include "views.h"

#include <climits>
#include <cstring>

namespace ntpy {
namespace {

// Empty arrays may have a null data pointer, which the C API reads as "absent";
// a B = 0 call never dereferences this one.
alignas(16) unsigned char empty_storage[16];

std::string message(const char* op, const char* arg, const std::string& what) {
  return std::string(op) + ": argument '" + arg + "' " + what;
}

std::string tname(nb::handle obj) { return nb::type_name(obj.type()).c_str(); }

// The one table of the dtypes nexttok takes, indexed by nt_dtype: the name
// (torch's attribute name, numpy's, and the C library's word in its messages)
// and the DLPack type it arrives as.
struct Dtype {
  const char* name;
  nb::dlpack::dtype_code code;
  uint8_t bits;
};
using Code = nb::dlpack::dtype_code;
constexpr Dtype kDtypes[] = {
    {"float32", Code::Float, 32}, {"float16", Code::Float, 16}, {"bfloat16", Code::Bfloat, 16},
    {"int8", Code::Int, 8},       {"int32", Code::Int, 32},    {"int64", Code::Int, 64},
    {"uint64", Code::UInt, 64},   {"bool", Code::Bool, 8},
};
constexpr int kDtypeCount = int(sizeof(kDtypes) / sizeof(kDtypes[0]));
static_assert(kDtypeCount == NT_BOOL + 1, "one kDtypes entry per nt_dtype, in enum order");

const char* dtype_name(nt_dtype d) { return kDtypes[d].name; }

// ---- torch tensors, read through their attributes ---------------------------
struct Torch {
  PyTypeObject* tensor = nullptr;
  PyObject* dtypes[kDtypeCount] = {};  // indexed by nt_dtype
  PyObject *s_dtype, *s_shape, *s_stride, *s_data_ptr, *s_is_cuda, *s_is_cpu, *s_get_device;
};

// Looked up once torch is imported; a process without torch has no tensors.
const Torch* torch_info() {
  static Torch t;
  static bool ready = false;
  if (ready) return &t;
  PyObject* mod = PyImport_GetModule(nb::str("torch").ptr());
  if (mod == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  nb::object torch = nb::steal(mod);
  t.tensor = (PyTypeObject*)nb::getattr(torch, "Tensor").release().ptr();
  for (int i = 0; i < kDtypeCount; ++i) {
    nb::object d = nb::getattr(torch, kDtypes[i].name, nb::none());
    t.dtypes[i] = d.is_none() ? nullptr : d.release().ptr();
  }
  auto intern = [](const char* s) { return PyUnicode_InternFromString(s); };
  t.s_dtype = intern("dtype");
  t.s_shape = intern("shape");
  t.s_stride = intern("stride");
  t.s_data_ptr = intern("data_ptr");
  t.s_is_cuda = intern("is_cuda");
  t.s_is_cpu = intern("is_cpu");
  t.s_get_device = intern("get_device");
  ready = true;
  return &t;
}

bool is_torch(nb::handle obj) {
  const Torch* t = torch_info();
  return t != nullptr && PyObject_TypeCheck(obj.ptr(), t->tensor);
}

nb::object attr(nb::handle obj, PyObject* name) {
  PyObject* r = PyObject_GetAttr(obj.ptr(), name);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

nb::object call0(nb::handle obj, PyObject* name) {
  PyObject* args[1] = {obj.ptr()};
  PyObject* r = PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

// Shape and strides (in elements) of a 1-D or 2-D array into a view.
void set_layout(const char* op, const char* arg, nt_tensor& t, int64_t ndim,
                const int64_t* shape, const int64_t* stride) {
  if (ndim < 1 || ndim > 2)
    raise_arg(PyExc_ValueError, op, arg,
              "must be 1-D or 2-D, got ndim=" + std::to_string(ndim));
  t.ndim = int32_t(ndim);
  t.shape[0] = shape[0];
  t.shape[1] = ndim == 2 ? shape[1] : 0;
  const int64_t inner = ndim == 2 ? shape[1] : shape[0];
  if (shape[0] == 0 || inner == 0) {  // empty arrays carry arbitrary strides
    t.row_stride = t.shape[1];
    return;
  }
  if (inner > 1 && stride[ndim - 1] != 1)
    raise_arg(PyExc_ValueError, op, arg,
              "must be contiguous in its last dimension (stride " +
                  std::to_string(stride[ndim - 1]) + "); rows may be strided");
  if (ndim == 2) {
    if (shape[0] > 1 && stride[0] < 0)
      raise_arg(PyExc_ValueError, op, arg, "has a negative row stride");
    t.row_stride = shape[0] > 1 ? stride[0] : shape[1];
  } else {
    t.row_stride = shape[0];
  }
}

View torch_view(const char* op, const char* arg, nb::handle obj) {
  const Torch& T = *torch_info();
  View v;
  nb::object dtype = attr(obj, T.s_dtype);
  int code = -1;
  for (int i = 0; i < kDtypeCount; ++i)
    if (T.dtypes[i] == dtype.ptr()) code = i;
  if (code < 0)
    raise_arg(PyExc_TypeError, op, arg,
              "has dtype " + std::string(nb::str(dtype).c_str()) + ", which nexttok does not take");
  v.t.dtype = nt_dtype(code);

  if (attr(obj, T.s_is_cuda).ptr() == Py_True) {
    v.t.device = NT_DEVICE_CUDA;
    v.t.device_id = nb::cast<int32_t>(call0(obj, T.s_get_device));
  } else if (attr(obj, T.s_is_cpu).ptr() == Py_True) {
    v.t.device = NT_DEVICE_CPU;
  } else {
    raise_arg(PyExc_ValueError, op, arg, "must be on the CPU or a CUDA device");
  }

  nb::object shape = attr(obj, T.s_shape), stride = call0(obj, T.s_stride);
  const Py_ssize_t ndim = PyTuple_Size(shape.ptr());
  int64_t sh[2] = {0, 0}, st[2] = {0, 0};
  for (Py_ssize_t i = 0; i < ndim && i < 2; ++i) {
    sh[i] = PyLong_AsLongLong(PyTuple_GetItem(shape.ptr(), i));
    st[i] = PyLong_AsLongLong(PyTuple_GetItem(stride.ptr(), i));
  }
  set_layout(op, arg, v.t, ndim, sh, st);
  v.t.data = PyLong_AsVoidPtr(call0(obj, T.s_data_ptr).ptr());
  return v;
}

// ---- every other array: DLPack or the buffer protocol ----------------------
int dl_dtype(nb::dlpack::dtype d) {
  if (d.lanes != 1) return -1;
  for (int i = 0; i < kDtypeCount; ++i)
    if (Code(d.code) == kDtypes[i].code && d.bits == kDtypes[i].bits) return i;
  return -1;
}

std::string dl_dtype_name(nb::dlpack::dtype d) {
  static const char* codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string base = d.code < 7 ? codes[d.code] : "code" + std::to_string(d.code);
  return base + std::to_string(d.bits) + (d.lanes != 1 ? "x" + std::to_string(d.lanes) : "");
}

template <class Array>
View dl_view(const char* op, const char* arg, const Array& a) {
  View v;
  const int code = dl_dtype(a.dtype());
  if (code < 0)
    raise_arg(PyExc_TypeError, op, arg,
              "has dtype " + dl_dtype_name(a.dtype()) + ", which nexttok does not take");
  v.t.dtype = nt_dtype(code);
  switch (a.device_type()) {
    case 1: case 3: v.t.device = NT_DEVICE_CPU; break;   // CPU, CUDA-pinned host
    case 2: case 13: v.t.device = NT_DEVICE_CUDA; v.t.device_id = a.device_id(); break;
    default:
      raise_arg(PyExc_ValueError, op, arg,
                "is on DLPack device type " + std::to_string(a.device_type()) +
                    "; nexttok takes CPU and CUDA arrays");
  }
  set_layout(op, arg, v.t, int64_t(a.ndim()), a.shape_ptr(), a.stride_ptr());
  v.t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  return v;
}

// Whether an NT_ERROR_INVALID_ARGUMENT message is about an argument's dtype
// (TypeError, as Python raises for a wrong type) rather than its shape, stride,
// device or value (ValueError). The C API returns the one status code for all
// of these (nexttok.h) and has no other field that tells them apart, so this
// reads the wording of the C library's dtype check, TensorCheck::dtype in
// src/core/check.cpp: "op: argument 'x' must be float32 or float16, got int8".
// The only place that depends on that wording.
bool is_dtype_message(const std::string& m) {
  static const std::string lead = "' must be ";
  const size_t at = m.find(lead);
  if (at == std::string::npos) return false;
  for (const Dtype& d : kDtypes)
    if (m.compare(at + lead.size(), std::strlen(d.name), d.name) == 0) return true;
  return false;
}

}  // namespace

void raise_arg(PyObject* type, const char* op, const char* arg, const std::string& what) {
  const std::string m = message(op, arg, what);
  if (type == PyExc_TypeError) throw nb::type_error(m.c_str());
  throw nb::value_error(m.c_str());
}

void raise_status(nt_status status, const char* c_arg, const char* py_arg) {
  std::string m = nt_last_error();
  if (c_arg != nullptr) {
    const std::string from = std::string("'") + c_arg + "'";
    const size_t at = m.find(from);
    if (at != std::string::npos) m.replace(at, from.size(), std::string("'") + py_arg + "'");
  }
  switch (status) {
    case NT_ERROR_INVALID_ARGUMENT:
      if (is_dtype_message(m)) throw nb::type_error(m.c_str());
      throw nb::value_error(m.c_str());
    case NT_ERROR_UNSUPPORTED:
      PyErr_SetString(PyExc_NotImplementedError, m.c_str());
      throw nb::python_error();
    default: {
      const std::string full = std::string(nt_status_string(status)) + ": " + m;
      PyErr_SetString(PyExc_RuntimeError, full.c_str());
      throw nb::python_error();
    }
  }
}

bool is_array(nb::handle obj) {
  return is_torch(obj) || nb::hasattr(obj, "__dlpack__") || PyObject_CheckBuffer(obj.ptr());
}

View view(const char* op, const char* arg, nb::handle obj, bool writable) {
  View v;
  if (is_torch(obj)) {
    v = torch_view(op, arg, obj);
  } else if (writable) {
    nb::ndarray<> a;
    if (!nb::try_cast(obj, a, false)) {
      nb::ndarray<nb::ro> ro;
      if (nb::try_cast(obj, ro, false))
        raise_arg(PyExc_ValueError, op, arg, "is read-only but is written in place");
      raise_arg(PyExc_TypeError, op, arg,
                "must be an array (torch, numpy, cupy, jax: DLPack), got " +
                    tname(obj));
    }
    v = dl_view(op, arg, a);
    v.keep = nb::ndarray<nb::ro>(a);
  } else {
    nb::ndarray<nb::ro> a;
    if (!nb::try_cast(obj, a, false))
      raise_arg(PyExc_TypeError, op, arg,
                "must be an array (torch, numpy, cupy, jax: DLPack), got " +
                    tname(obj));
    v = dl_view(op, arg, a);
    v.keep = std::move(a);
  }
  if (v.t.data == nullptr) v.t.data = empty_storage;
  return v;
}

View optional_view(const char* op, const char* arg, nb::handle obj, bool writable) {
  if (obj.is_none()) return View{};
  return view(op, arg, obj, writable);
}

namespace {

// A parameter array: 1-D, one value per row, on the logits' device.
const void* per_row(const char* op, const char* arg, nb::handle obj, const nt_tensor& logits,
                    std::initializer_list<nt_dtype> dtypes, const char* expected, View& keep,
                    bool* is_scalar) {
  // Python floats and ints first: the common case, and the cheapest test.
  *is_scalar = PyFloat_CheckExact(obj.ptr()) || PyLong_CheckExact(obj.ptr());
  if (*is_scalar) return nullptr;
  if (!is_array(obj)) {
    if (PyNumber_Check(obj.ptr())) {
      *is_scalar = true;
      return nullptr;
    }
    raise_arg(PyExc_TypeError, op, arg,
              std::string("must be a scalar or a 1-D array of ") + expected + ", got " +
                  tname(obj));
  }
  if (!is_torch(obj)) {
    // numpy scalars and 0-d arrays are scalars; torch 0-d tensors are refused
    // below (a CUDA one would need a sync to read).
    nb::ndarray<nb::ro> a;
    if (nb::try_cast(obj, a, false) && a.ndim() == 0 && a.device_type() == 1) {
      *is_scalar = true;
      return nullptr;
    }
  }
  keep = view(op, arg, obj);
  const nt_tensor& t = keep.t;
  bool ok = false;
  for (nt_dtype d : dtypes) ok |= t.dtype == d;
  if (!ok)
    raise_arg(PyExc_TypeError, op, arg,
              std::string("as an array must be ") + expected + ", got " + dtype_name(t.dtype));
  if (t.ndim != 1 || t.shape[0] != logits.shape[0])
    raise_arg(PyExc_ValueError, op, arg,
              "as an array must be 1-D of length B = " + std::to_string(logits.shape[0]) +
                  " (one value per row of logits)");
  if (t.device != logits.device || t.device_id != logits.device_id)
    raise_arg(PyExc_ValueError, op, arg, "must be on the same device as 'logits'");
  return t.data;
}

}  // namespace

nt_param_f32 param_f32(const char* op, const char* arg, nb::handle obj, const nt_tensor& logits,
                       View& keep) {
  bool scalar;
  nt_param_f32 p{per_row(op, arg, obj, logits, {NT_F32}, "float32", keep, &scalar), 0.0f};
  if (scalar) {
    const double v = PyFloat_AsDouble(obj.ptr());
    if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
    p.scalar = float(v);
  }
  return p;
}

namespace {
nb::object as_index(const char* op, const char* arg, nb::handle obj) {
  PyObject* i = PyNumber_Index(obj.ptr());
  if (i == nullptr) {
    PyErr_Clear();
    raise_arg(PyExc_TypeError, op, arg,
              "must be an integer, got " + tname(obj));
  }
  return nb::steal(i);
}
}  // namespace

nt_param_i32 param_i32(const char* op, const char* arg, nb::handle obj, const nt_tensor& logits,
                       View& keep) {
  bool scalar;
  nt_param_i32 p{per_row(op, arg, obj, logits, {NT_I32}, "int32", keep, &scalar), 0};
  if (scalar) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(as_index(op, arg, obj).ptr(), &overflow);
    // Beyond int32 a value means the same as the nearest int32 (>= V: off).
    if (overflow > 0 || v > INT32_MAX) p.scalar = INT32_MAX;
    else if (overflow < 0 || v < INT32_MIN) p.scalar = INT32_MIN;
    else p.scalar = int32_t(v);
  }
  return p;
}

nt_param_u64 param_u64(const char* op, const char* arg, nb::handle obj, const nt_tensor& logits,
                       View& keep) {
  bool scalar;
  // int64 arrays are taken bit for bit: torch's integer arithmetic (offset += 1
  // inside a CUDA graph) is on int64.
  nt_param_u64 p{per_row(op, arg, obj, logits, {NT_U64, NT_I64}, "uint64 or int64", keep, &scalar),
                 0};
  if (scalar) {
    nb::object i = as_index(op, arg, obj);
    const unsigned long long v = PyLong_AsUnsignedLongLong(i.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      raise_arg(PyExc_ValueError, op, arg,
                "must be in [0, 2^64), got " + std::string(nb::str(obj).c_str()));
    }
    p.scalar = v;
  }
  return p;
}

}  // namespace ntpy
