// nt_sample's launches for one logit layout (SampleKernels, cuda/sample_launch.cuh),
// compiled once per layout: the build generates a file per layout that
// includes this header and instantiates SampleKernels for it.
#pragma once

#include <algorithm>
#include <iterator>

#include "cuda/ops.cuh"
#include "cuda/sample_fallback.cuh"
#include "cuda/sample_launch.cuh"
#include "cuda/sample_scan.cuh"

namespace nt::cuda {

// A scan launch whose grid's chunks (blockIdx.y) of a row form one cluster;
// `attribute` holds the cluster shape the config points to.
inline cudaLaunchConfig_t scan_cluster_config(dim3 grid, size_t smem, cudaStream_t stream,
                                              cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(kScanThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  *attribute = cudaLaunchAttribute{};
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = 1;
  attribute->val.clusterDim.y = grid.y;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

template <nt_dtype DT, bool VEC>
int SampleKernels<DT, VEC>::max_cluster_chunks(int device, int cc_major) {
  if (cc_major < 9) return 0;
  using Kernel = void (*)(SampleArgs);
  const Kernel kernels[] = {sample_scan_kernel<DT, VEC, kFilteredRow>,
                            sample_scan_kernel<DT, VEC, kAnyRow, false, true, true>};
  for (Kernel kernel : kernels) {
    allow_dynamic_smem(kernel, kScanSmemBytes, device, kSampleOp);
    allow_nonportable_clusters(kernel, device, kSampleOp);
  }
  // Whether the device can hold one cluster of `size` CTAs of `kernel`.
  auto holds = [&](Kernel kernel, int size) {
    cudaLaunchAttribute attribute;
    const cudaLaunchConfig_t config =
        scan_cluster_config(dim3(1, unsigned(size), 1), kScanSmemBytes, nullptr, &attribute);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters > 0)
      return true;
    cudaGetLastError();  // an unsupported size is an answer, not an error
    return false;
  };
  for (int size : {kMaxClusterChunks, 8})
    if (std::all_of(std::begin(kernels), std::end(kernels), [&](Kernel k) { return holds(k, size); }))
      return size;
  return 0;
}

template <nt_dtype DT, bool VEC, int MODE, bool RAW = false, bool MASS = true, bool RESOLVE = false>
void launch_scan_kernel(const SampleLaunch& l) {
  auto kernel = sample_scan_kernel<DT, VEC, MODE, RAW, MASS, RESOLVE>;
  const dim3 grid(l.args.rows, u32(l.plan.splits), 1);
  const size_t smem = l.plan.filtered ? size_t(kScanSmemBytes) : 0;
  if (smem > 0) allow_dynamic_smem(kernel, kScanSmemBytes, l.device, kSampleOp);
  if (!l.plan.cluster) {
    kernel<<<grid, kScanThreads, smem, l.stream>>>(l.args);
    check_launch(kSampleOp);
    return;
  }
  allow_nonportable_clusters(kernel, l.device, kSampleOp);
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = scan_cluster_config(grid, smem, l.stream, &attribute);
  check_cuda(cudaLaunchKernelEx(&config, kernel, l.args), kSampleOp);
}

// The flagged-row kernel, cooperative (its phases meet at grid syncs): one
// CTA per work item of the large keep-set phases, at most as many as the chip
// holds at once. Its CTAs loop over the listed and the flagged rows.
template <nt_dtype DT, bool VEC>
void SampleKernels<DT, VEC>::flagged_rows(const SampleLaunch& l) {
  auto kernel = sample_flagged_rows_kernel<DT, VEC>;
  const int per_sm = resident_blocks(kernel, kLargeThreads, 0, l.device, kSampleOp);
  const int64_t resident = int64_t(device_limits(l.device, kSampleOp).sm_count) * per_sm;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(u32(std::min<int64_t>(int64_t(l.args.rows) * l.plan.large_splits, resident)));
  config.blockDim = dim3(kLargeThreads);
  config.dynamicSmemBytes = 0;
  config.stream = l.stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&config, kernel, l.args), kSampleOp);
}

template <nt_dtype DT, bool VEC>
void SampleKernels<DT, VEC>::scan(const SampleLaunch& l) {
  // Clusters whose rows may be flagged resolve them: the call's only kernel.
  if (l.plan.cluster && l.plan.fallback_needed) {
    launch_scan_kernel<DT, VEC, kAnyRow, false, true, true>(l);
    return;
  }
  switch (l.plan.mode) {
    case kGreedyRow: launch_scan_kernel<DT, VEC, kGreedyRow>(l); break;
    case kPlainRow: launch_scan_kernel<DT, VEC, kPlainRow>(l); break;
    case kFilteredRow:
      if (l.args.raw_mass)
        launch_scan_kernel<DT, VEC, kFilteredRow, true>(l);
      else if (l.plan.row_mass)
        launch_scan_kernel<DT, VEC, kFilteredRow>(l);
      else
        launch_scan_kernel<DT, VEC, kFilteredRow, false, false>(l);
      break;
    default:
      if (l.args.raw_mass)
        launch_scan_kernel<DT, VEC, kAnyRow, true>(l);
      else
        launch_scan_kernel<DT, VEC, kAnyRow>(l);
      break;
  }
}

}  // namespace nt::cuda
