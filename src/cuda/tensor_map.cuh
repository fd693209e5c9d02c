// Host side of the bulk tensor copies (sm_90): tensor maps of 2-D row-major
// matrices of 16-bit elements. The encoder is the driver's, fetched through
// the runtime, so the library does not link libcuda (CPU-only machines load it).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only)
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"

namespace nt::cuda {

// nullptr when the driver has no tensor-map encoder (older than CUDA 12).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encoder;
}

// Row pitch in bytes of a `rows` x `row_bytes` matrix whose rows lie
// row_stride elements of `elt` bytes apart, for a map: a single row gets its
// own length rounded up to 16 (the driver wants a stride even where no second
// row exists).
inline uint64_t map_row_bytes(int64_t rows, int64_t row_stride, size_t elt, size_t row_bytes) {
  return rows > 1 ? uint64_t(row_stride) * elt : uint64_t((row_bytes + 15) / 16 * 16);
}

// A refused map fails the op (the kernel choice asked for the encoder first).
inline void require_encoded(CUresult result, const char* op) {
  if (result != CUDA_SUCCESS) fail(NT_ERROR_BACKEND, std::string(op) + ": the CUDA driver refused a tensor map");
}

// A map of a [rows, cols] matrix of 16-bit elements whose rows lie row_bytes
// apart (a multiple of 16; base 16-byte aligned), read in boxes of box_rows x
// box_cols (box_cols * 2 a multiple of 16, and at most the swizzle's span:
// with the 128-byte swizzle 16-byte piece c of box row r lands at piece
// c ^ (r % 8) of its 128-byte line, with the 64-byte one at c ^ ((r / 2) % 4)
// of its 64-byte line). Elements outside the matrix read as zero. A refusal
// of the driver fails `op`.
inline void encode_map_u16(const char* op, CUtensorMap* map, const void* base, uint64_t rows, uint64_t cols,
                           uint64_t row_bytes, uint32_t box_rows, uint32_t box_cols,
                           CUtensorMapSwizzle swizzle, bool promote_256) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) require_encoded(CUDA_ERROR_NOT_SUPPORTED, op);
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t steps[2] = {1, 1};
  require_encoded(encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(base), dims, strides,
                         box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                         promote_256 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                  op);
}

// The same matrix seen as 128-byte pieces: dims {64 units, rows, cols / 64}
// with strides {row_bytes, 128}, so one box of {64, box_rows, pieces} copies
// box_rows rows x `pieces` consecutive pieces and lands piece-major, each
// piece's box_rows lines 128-byte swizzled, as `pieces` 2-D boxes of
// box_rows x 64 would (cols a multiple of 64: a partial piece would read the
// next row's units instead of zeros). A refusal fails `op`.
inline void encode_map_u16_lines(const char* op, CUtensorMap* map, const void* base, uint64_t rows, uint64_t cols,
                                 uint64_t row_bytes, uint32_t box_rows, uint32_t pieces) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr || cols % 64 != 0 || pieces == 0 || pieces > 256)
    require_encoded(CUDA_ERROR_NOT_SUPPORTED, op);
  const cuuint64_t dims[3] = {64, rows, cols / 64};
  const cuuint64_t strides[2] = {row_bytes, 128};
  const cuuint32_t box[3] = {64, box_rows, pieces};
  const cuuint32_t steps[3] = {1, 1, 1};
  require_encoded(encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<void*>(base), dims, strides, box, steps,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                  op);
}

}  // namespace nt::cuda
