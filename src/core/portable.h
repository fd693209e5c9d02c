/* Portability layer for the semantic core. The core headers are written in the
 * common subset of C++17, CUDA C++ and OpenCL C 1.2, so that every backend
 * compiles the very same definitions: NT_FN marks a function usable on host and
 * device, and the helpers below hide the three spellings of bit casts and fma. */
#ifndef NEXTTOK_CORE_PORTABLE_H
#define NEXTTOK_CORE_PORTABLE_H

#if defined(__OPENCL_VERSION__) || defined(__OPENCL_C_VERSION__)
#  define NT_OPENCL 1
/* static: a plain C99 inline definition provides no external one, and OpenCL
 * compilers that decline to inline a call would leave it unresolved. */
#  define NT_FN static inline
/* OpenCL C contracts a*b+c into fma by default; the core's bits assume not. */
#  pragma OPENCL FP_CONTRACT OFF
typedef uint nt_u32;
typedef ulong nt_u64;
typedef int nt_i32;
#  define nt_as_u32(x) as_uint(x)
#  define nt_as_f32(x) as_float(x)
#  define nt_fmaf(a, b, c) fma((a), (b), (c))
#  define nt_mulhi_u32(a, b) mul_hi((nt_u32)(a), (nt_u32)(b))
#elif defined(__CUDACC__)
#  define NT_FN __host__ __device__ __forceinline__
#  include <cstdint>
#  include <cmath>
typedef uint32_t nt_u32;
typedef uint64_t nt_u64;
typedef int32_t nt_i32;
NT_FN nt_u32 nt_as_u32(float x) {
#  ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#  else
  nt_u32 u; __builtin_memcpy(&u, &x, 4); return u;
#  endif
}
NT_FN float nt_as_f32(nt_u32 u) {
#  ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#  else
  float x; __builtin_memcpy(&x, &u, 4); return x;
#  endif
}
/* fmaf is the single-rounding fused multiply-add on both sides of nvcc. */
NT_FN float nt_fmaf(float a, float b, float c) { return fmaf(a, b, c); }
NT_FN nt_u32 nt_mulhi_u32(nt_u32 a, nt_u32 b) {
#  ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#  else
  return (nt_u32)(((nt_u64)a * (nt_u64)b) >> 32);
#  endif
}
#else
#  include <cmath>
#  include <cstdint>
#  include <cstring>
#  define NT_FN inline
typedef uint32_t nt_u32;
typedef uint64_t nt_u64;
typedef int32_t nt_i32;
NT_FN nt_u32 nt_as_u32(float x) { nt_u32 u; std::memcpy(&u, &x, 4); return u; }
NT_FN float nt_as_f32(nt_u32 u) { float x; std::memcpy(&x, &u, 4); return x; }
/* __builtin_fmaf is exact with or without hardware FMA (libm falls back to a
 * correctly rounded software fma), so results never depend on -mfma; hot CPU
 * loops are built with FMA enabled for speed only. */
NT_FN float nt_fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
NT_FN nt_u32 nt_mulhi_u32(nt_u32 a, nt_u32 b) { return (nt_u32)(((nt_u64)a * (nt_u64)b) >> 32); }
#endif

#endif /* NEXTTOK_CORE_PORTABLE_H */
