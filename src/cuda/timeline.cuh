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

// Per CTA and slot: cycles summed over the warps that spent them in a phase
// (lane 0 of each adds clock64() - since), for where a long kernel's warps
// wait and work (bench/micro/lm_head_phases.cu).
__device__ unsigned long long timeline_sum[kTimelineCtas][kTimelineSlots];

__device__ __forceinline__ void timeline_add(int slot, long long since) {
  if ((threadIdx.x & 31) != 0) return;
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (cta >= unsigned(kTimelineCtas)) return;
  atomicAdd(&timeline_sum[cta][slot], static_cast<unsigned long long>(clock64() - since));
}
}  // namespace nt::cuda
#define NT_TIMELINE_MARK(slot) ::nt::cuda::timeline_mark(slot)
#define NT_TIMELINE_CLOCK() clock64()
#define NT_TIMELINE_ADD(slot, since) ::nt::cuda::timeline_add(slot, since)
#else
#define NT_TIMELINE_MARK(slot) ((void)0)
#define NT_TIMELINE_CLOCK() 0ll
#define NT_TIMELINE_ADD(slot, since) ((void)(since))
#endif

// The phase slots of the LM heads' sm_90 kernels (dense staged, binary bulk
// copies) for NT_TIMELINE_ADD, and the slots of their thread 0's start and end
// marks (NT_TIMELINE_MARK; the merges that follow mark slots 0-9 of CTAs
// 0..M-1).
namespace nt::cuda::phase {
constexpr int kStartMark = 14;
constexpr int kEndMark = 15;
constexpr int kStageWait = 2;     // scoring warps: waiting for a stage's (or a tile's scales') bytes
constexpr int kStageWork = 3;     // scoring warps: a stage's MMAs and adds
constexpr int kUpkeep = 4;        // scoring warps: offers and cuts between tiles
constexpr int kLastUpkeep = 5;    // scoring warps: the last tile's offers and cut
// (Slots 6-10 were the removed top-k warps' phases.)
constexpr int kCopyWait = 11;     // the copy lane: waiting for a free stage (or scale buffer)
constexpr int kUpkeepBarrier = 12;  // scoring warps: end_tile's barrier before the cuts (within upkeep)
constexpr int kUpkeepCuts = 13;     // scoring warps: end_tile's cuts and the barrier after (within upkeep)
}  // namespace nt::cuda::phase
