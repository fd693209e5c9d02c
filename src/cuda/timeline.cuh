// Phase marks on the latency paths of small calls (a B = 1 sampling call, the
// LM heads' merge), read by bench/micro/latency_paths.cu, which includes the
// kernels' sources with NT_CUDA_TIMELINE defined. In the library the marks
// compile to nothing.
#pragma once

#if defined(NT_CUDA_TIMELINE)
namespace nt::cuda {
constexpr int kTimelineSlots = 16;
constexpr int kTimelineCtas = 1024;
// Per CTA and slot: the global timer (ns, comparable across SMs) and the SM's
// cycle counter (finer, for phases inside one CTA).
__device__ unsigned long long timeline_ns[kTimelineCtas][kTimelineSlots];
__device__ long long timeline_cycles[kTimelineCtas][kTimelineSlots];
__device__ unsigned timeline_smid[kTimelineCtas];  // the SM a CTA ran on (set at slot 0)

__device__ __forceinline__ void timeline_mark(int slot) {
  if (threadIdx.x != 0) return;
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (cta >= unsigned(kTimelineCtas)) return;
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  timeline_ns[cta][slot] = ns;
  timeline_cycles[cta][slot] = clock64();
  if (slot == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    timeline_smid[cta] = sm;
  }
}
}  // namespace nt::cuda
#define NT_TIMELINE_MARK(slot) ::nt::cuda::timeline_mark(slot)
#else
#define NT_TIMELINE_MARK(slot) ((void)0)
#endif
