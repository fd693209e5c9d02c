// Warpgroup MMAs (wgmma, sm_90a): D += A * B issued by the 4 warps of a
// warpgroup, B (and for the dense head A) read from shared memory through
// descriptors; the binary head's A comes from registers.
#pragma once

#include <cstdint>

namespace nt::cuda {

// The helpers are empty outside the sm_90a build (__CUDA_ARCH_FEAT_SM90_ALL):
// a kernel that uses them carries another path for every other target.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define NT_SM90A_ASM(...) asm volatile(__VA_ARGS__)
#else
#define NT_SM90A_ASM(...)
#endif

// Descriptor of a K-major tile of 128-byte rows written with the 128-byte
// swizzle (rows in groups of 8 lines, 1024 bytes apart): start address in
// 16-byte units, stride 1024 bytes, swizzle mode 1 (128 bytes). The leading
// offset is unused by this layout. A k16 step inside the rows is +32 bytes of
// start address (the hardware applies the swizzle to the computed address).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_byte_addr) {
  return uint64_t((smem_byte_addr & 0x3FFFFu) >> 4) | (uint64_t(1) << 16) |
         (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  NT_SM90A_ASM("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  NT_SM90A_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  NT_SM90A_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// The register budget of the executing warpgroup (every warp of it calls):
// released to kRegs a thread, or raised to kRegs once the CTA's pool has them.
// ptxas allocates the code after a raise within the new budget.
template <int kRegs>
__device__ __forceinline__ void warpgroup_registers_release() {
  NT_SM90A_ASM("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void warpgroup_registers_claim() {
  NT_SM90A_ASM("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// Keeps the compiler from moving accesses of accumulators across a wait.
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Operand lists of the accumulators d[0, 4 / 8 / 16 / 32) under constraint c.
#define NT_D4(c) c(d[0]), c(d[1]), c(d[2]), c(d[3])
#define NT_D8(c) NT_D4(c), c(d[4]), c(d[5]), c(d[6]), c(d[7])
#define NT_D16(c) NT_D8(c), c(d[8]), c(d[9]), c(d[10]), c(d[11]), c(d[12]), c(d[13]), c(d[14]), c(d[15])
#define NT_D32(c)                                                                                   \
  NT_D16(c), c(d[16]), c(d[17]), c(d[18]), c(d[19]), c(d[20]), c(d[21]), c(d[22]), c(d[23]), c(d[24]), \
      c(d[25]), c(d[26]), c(d[27]), c(d[28]), c(d[29]), c(d[30]), c(d[31])

// D (+)= A * B, m64nNk16, f32 accumulators (N / 2 per thread), A and B
// K-major in shared memory; scale_d = 0 starts from zero. One specialization
// per shape and input type (TY): D names the accumulators' registers, A, B
// and S those of desc_a, desc_b and scale_d.
template <int N, bool kBf16>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                             int scale_d);
#define NT_WGMMA_M64K16(N, BF16, TY, D, A, B, S, ...)                                                      \
  template <>                                                                                              \
  __device__ __forceinline__ void wgmma_m64k16<N, BF16>(float(&d)[N / 2], uint64_t desc_a, uint64_t desc_b, \
                                                        int scale_d) {                                     \
    NT_SM90A_ASM("{\n .reg .pred p;\n setp.ne.b32 p, " S ", 0;\n"                                          \
                 " wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " D ", " A ", " B          \
                 ", p, 1, 1, 0, 0;\n}\n"                                                                   \
                 : __VA_ARGS__                                                                             \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                \
  }
#define NT_WGMMA_M64K16_BOTH(N, D, A, B, S, ...)         \
  NT_WGMMA_M64K16(N, true, "bf16", D, A, B, S, __VA_ARGS__) \
  NT_WGMMA_M64K16(N, false, "f16", D, A, B, S, __VA_ARGS__)
NT_WGMMA_M64K16_BOTH(8, "{%0, %1, %2, %3}", "%4", "%5", "%6", NT_D4("+f"))
NT_WGMMA_M64K16_BOTH(16, "{%0, %1, %2, %3, %4, %5, %6, %7}", "%8", "%9", "%10", NT_D8("+f"))
NT_WGMMA_M64K16_BOTH(32, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}", "%16", "%17", "%18", NT_D16("+f"))
NT_WGMMA_M64K16_BOTH(64, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}", "%32", "%33", "%34", NT_D32("+f"))

// D += A * B, m64nNk32, s8 x s8 -> s32 (N / 2 accumulators per thread), A from
// registers in the mma.m16n8k32 fragment layout of the warp's 16 rows
// (a[0]: row g, k 4t..4t+3; a[1]: row g + 8; a[2], a[3]: k + 16), B K-major in
// shared memory. accumulate = false starts D from zero (the first k-step of
// a sum: no instruction writes D before the MMA, so none can hold it up).
template <int N>
__device__ __forceinline__ void wgmma_s8_m64k32(int32_t (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                                bool accumulate);
#define NT_WGMMA_S8_M64K32(N, D, A, B, S, ...)                                                                   \
  template <>                                                                                                    \
  __device__ __forceinline__ void wgmma_s8_m64k32<N>(int32_t(&d)[N / 2], const uint32_t(&a)[4], uint64_t desc_b, \
                                                     bool accumulate) {                                          \
    NT_SM90A_ASM("{\n .reg .pred p;\n setp.ne.b32 p, " S ", 0;\n"                                                \
                 " wgmma.mma_async.sync.aligned.m64n" #N "k32.s32.s8.s8 " D ", " A ", " B ", p;\n}\n"            \
                 : __VA_ARGS__                                                                                   \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(int(accumulate)));              \
  }
NT_WGMMA_S8_M64K32(8, "{%0, %1, %2, %3}", "{%4, %5, %6, %7}", "%8", "%9", NT_D4("+r"))
NT_WGMMA_S8_M64K32(16, "{%0, %1, %2, %3, %4, %5, %6, %7}", "{%8, %9, %10, %11}", "%12", "%13", NT_D8("+r"))
NT_WGMMA_S8_M64K32(32, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}", "{%16, %17, %18, %19}", "%20", "%21", NT_D16("+r"))
NT_WGMMA_S8_M64K32(64, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}", "{%32, %33, %34, %35}", "%36", "%37", NT_D32("+r"))
#undef NT_WGMMA_S8_M64K32
#undef NT_WGMMA_M64K16_BOTH
#undef NT_WGMMA_M64K16
#undef NT_D32
#undef NT_D16
#undef NT_D8
#undef NT_D4

template <int R>
__device__ __forceinline__ void wgmma_fence_operands(int32_t (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

}  // namespace nt::cuda
