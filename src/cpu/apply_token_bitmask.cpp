// Grammar mask on the CPU: rows (all, or the valid distinct entries of
// `indices`) are split into vocabulary blocks so that a few long rows still
// spread over the pool.
#include <algorithm>
#include <vector>

#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/row_mask.h"
#include "cpu/thread_pool.h"

namespace nt::cpu {

namespace {

// Vocabulary block of one task: large enough to amortise a task, a multiple of
// 32 so that blocks never share a mask word.
constexpr int64_t kMaskBlock = 16384;

}  // namespace

void CpuBackend::apply_token_bitmask(const nt_apply_token_bitmask_args& a, void*) {
  const int64_t rows = a.logits.shape[0], vocab = a.logits.shape[1];
  const int64_t words = a.bitmask.shape[1];
  if (rows == 0) return;

  // Distinct valid rows: duplicates would otherwise be masked by two tasks at once.
  std::vector<int64_t> selected;
  const bool all_rows = a.indices.data == nullptr;
  if (!all_rows) {
    const int64_t n = a.indices.shape[0];
    selected.reserve(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = a.indices.dtype == NT_I64 ? static_cast<const int64_t*>(a.indices.data)[i]
                                                  : static_cast<const int32_t*>(a.indices.data)[i];
      if (r >= 0 && r < rows) selected.push_back(r);
    }
    std::sort(selected.begin(), selected.end());
    selected.erase(std::unique(selected.begin(), selected.end()), selected.end());
  }
  const int64_t n_rows = all_rows ? rows : int64_t(selected.size());
  const int64_t blocks = (vocab + kMaskBlock - 1) / kMaskBlock;
  const MaskRowFn kernel = mask_row_kernel();
  // About 64K tokens per task at least, so that small calls stay on the caller.
  const int64_t min_items = std::max<int64_t>(1, 65536 / std::min(vocab, kMaskBlock));

  parallel_for(n_rows * blocks, min_items, [&](int64_t begin, int64_t end, int) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = all_rows ? item / blocks : selected[size_t(item / blocks)];
      const int64_t t0 = (item % blocks) * kMaskBlock;
      const int64_t t1 = std::min(vocab, t0 + kMaskBlock);
      const auto* mask = reinterpret_cast<const uint32_t*>(row_address(a.bitmask, r));
      kernel(row_address(a.logits, r), a.logits.dtype, mask, words, t0, t1);
    }
  });
}

}  // namespace nt::cpu
