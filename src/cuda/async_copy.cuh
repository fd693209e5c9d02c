// Asynchronous copies into shared memory for the LM-head pipelines: cp.async
// (sm_80+), and mbarriers with bulk tensor copies (sm_90). Callers are only
// launched on devices that have them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace nt::cuda {

// Inline PTX compiled only for the architectures that have it.
#if __CUDA_ARCH__ >= 800
#define NT_SM80_ASM(...) asm volatile(__VA_ARGS__)
#else
#define NT_SM80_ASM(...)
#endif
#if __CUDA_ARCH__ >= 900
#define NT_SM90_ASM(...) asm volatile(__VA_ARGS__)
#else
#define NT_SM90_ASM(...)
#endif

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async of 16, 8 or 4 bytes; src_bytes < size zero-fills the rest.
__device__ __forceinline__ void cp_async(void* dst, const void* src, int size, int src_bytes) {
#if __CUDA_ARCH__ >= 800
  const uint32_t d = smem_addr(dst);
  if (size == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  } else if (size == 8) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  }
#endif
}

__device__ __forceinline__ void cp_async_commit() {
  NT_SM80_ASM("cp.async.commit_group;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  NT_SM80_ASM("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// cp.async.wait_group with a run-time count (a pipeline's depth is planned on
// the host from the shared-memory limit).
__device__ __forceinline__ void cp_async_wait_pending(int pending) {
  switch (pending) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    default: cp_async_wait<6>(); break;
  }
}

// ---- mbarriers and the tensor memory accelerator (sm_90) ------------------------
// A pipeline stage is filled by bulk tensor copies that complete on the
// stage's "full" barrier and handed back on its "empty" barrier. Barriers are
// 8-byte words in shared memory; waits name the phase parity they wait for.

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  NT_SM90_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals)
               : "memory");
}

// Makes initialized barriers visible to the copy engine (the async proxy);
// a barrier among the threads that use them (the CTA's, or a warp's for
// per-warp mbarriers) must follow before any of them does.
__device__ __forceinline__ void mbarrier_init_fence() {
  NT_SM90_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  NT_SM90_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// One arrival that also announces `bytes` still to land through copies.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  NT_SM90_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  NT_SM90_ASM("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Returns once the phase of parity `parity` has completed (a fresh barrier
// counts its phase before phase 0, parity 1, as completed).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if __CUDA_ARCH__ >= 900
  const uint32_t addr = smem_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

// A 2-D box of the tensor `map` (a CUtensorMap in kernel-parameter or global
// memory) at element coordinates (x inner, y outer) into shared memory,
// completing on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, int32_t x, int32_t y,
                                            uint64_t* bar) {
  NT_SM90_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
}

// The L2 policy of the heads' weight copies: evict first (read once, far
// larger than the L2), so what the kernels reuse stays in the L2.
__device__ __forceinline__ uint64_t weights_l2_policy() {
  uint64_t policy = 0;
  NT_SM80_ASM("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// tma_load_2d of weight boxes, under `policy` (weights_l2_policy).
__device__ __forceinline__ void tma_load_2d_weights(void* dst, const void* map, int32_t x, int32_t y,
                                                    uint64_t* bar, uint64_t policy) {
  NT_SM90_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// The same for a 3-D map (encode_map_u16_lines: x the 16-bit unit in a
// 128-byte piece, y the row, z the piece): a tile of rows x several pieces
// in one copy.
__device__ __forceinline__ void tma_load_3d_weights(void* dst, const void* map, int32_t x, int32_t y, int32_t z,
                                                    uint64_t* bar, uint64_t policy) {
  NT_SM90_ASM(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// Orders this thread's earlier shared-memory accesses (and, after a CTA
// barrier, the other threads') before its next copy-engine writes, so a slot
// that was just read may be refilled.
__device__ __forceinline__ void fence_proxy_async_shared() {
  NT_SM90_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The first `align`-byte boundary (a power of two) at or after `base`, a
// dynamic shared-memory array: swizzled boxes need 1024-byte aligned
// destinations. Offsetting the array itself, not a realigned integer, keeps
// its accesses shared-memory loads (a pointer rebuilt from an integer reads
// through generic loads).
__device__ __forceinline__ unsigned char* align_shared(unsigned char* base, uint32_t align) {
  return base + ((0u - smem_addr(base)) & (align - 1u));
}

// Byte offset, in a box of 128-byte swizzled lines, of 16-byte piece `piece`
// of line `line` (the copy engine put it at piece ^ (line % 8)).
__device__ __forceinline__ uint32_t swizzled(int line, int piece) {
  return uint32_t(line * 128 + ((piece ^ (line & 7)) << 4));
}

__device__ __forceinline__ void tma_prefetch_map(const void* map) {
  NT_SM90_ASM("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ldmatrix: four (x4) or two (x2) 8x8 matrices of 16-bit elements; lane l
// gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  NT_SM80_ASM("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  NT_SM80_ASM("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

}  // namespace nt::cuda
