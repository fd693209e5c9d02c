// Grammar mask on the CPU: rows (all, or the distinct valid entries of
// `indices`) are split into vocabulary blocks, and the blocks over the pool
// when there is enough work to pay for waking it. Nothing is allocated: listed
// rows are marked in a bitset on the stack (a window of rows at a time), which
// also drops duplicates, so no row is masked by two tasks at once.
#include <algorithm>
#include <cstring>

#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/row_mask.h"
#include "cpu/thread_pool.h"

namespace nt::cpu {
namespace {

// Vocabulary block of one work item: a multiple of 32, so that blocks never
// share a mask word.
constexpr int64_t kMaskBlock = 16384;
// Logits bytes a task must have before the pool is woken for it: waking a
// worker costs more than one core takes to mask a 128K-vocabulary row.
constexpr int64_t kMinTaskBytes = int64_t(4) << 20;
// Rows marked per pass over `indices`: an 8 KB bitset on the stack.
constexpr int64_t kRowWindow = int64_t(1) << 16;

struct MaskCall {
  const nt_apply_token_bitmask_args& a;
  MaskRowFn kernel;
  int64_t vocab, words, blocks;

  void block(int64_t r, int64_t b) const {
    const int64_t t0 = b * kMaskBlock, t1 = std::min(vocab, t0 + kMaskBlock);
    kernel(row_address(a.logits, r), a.logits.dtype,
           reinterpret_cast<const uint32_t*>(row_address(a.bitmask, r)), words, t0, t1);
  }
  // Items per task: blocks of at least kMinTaskBytes of logits together.
  int64_t min_items() const {
    const int64_t block_bytes = std::min(vocab, kMaskBlock) * int64_t(dtype_size(a.logits.dtype));
    return std::max<int64_t>(1, kMinTaskBytes / block_bytes);
  }
};

// The first set bit at or after position i of bits[0, n_words), or -1.
int64_t next_set(const uint64_t* bits, int64_t n_words, int64_t i) {
  int64_t w = i / 64;
  if (w >= n_words) return -1;
  uint64_t cur = bits[w] & (~uint64_t(0) << (i % 64));
  while (cur == 0) {
    if (++w == n_words) return -1;
    cur = bits[w];
  }
  return w * 64 + __builtin_ctzll(cur);
}

// Rows `first + i` for the set bits i of `bits` (count of them), each split into blocks.
void mask_marked_rows(const MaskCall& call, int64_t first, const uint64_t* bits, int64_t n_words,
                      int64_t count) {
  parallel_for(count * call.blocks, call.min_items(), [&](int64_t begin, int64_t end, int) {
    // The (begin / blocks)-th marked row, then the next ones in order.
    int64_t ordinal = begin / call.blocks, row = -1;
    for (int64_t w = 0, seen = 0; w < n_words; ++w) {
      const int64_t c = __builtin_popcountll(bits[w]);
      if (seen + c > ordinal) {
        uint64_t cur = bits[w];
        for (int64_t k = ordinal - seen; k > 0; --k) cur &= cur - 1;
        row = w * 64 + __builtin_ctzll(cur);
        break;
      }
      seen += c;
    }
    for (int64_t item = begin; item < end; ++item) {
      for (; item / call.blocks > ordinal; ++ordinal) row = next_set(bits, n_words, row + 1);
      call.block(first + row, item % call.blocks);
    }
  });
}

}  // namespace

void CpuBackend::apply_token_bitmask(const nt_apply_token_bitmask_args& a, void*) {
  const int64_t rows = a.logits.shape[0], vocab = a.logits.shape[1];
  if (rows == 0) return;
  const MaskCall call{a, mask_row_kernel(), vocab, a.bitmask.shape[1],
                      (vocab + kMaskBlock - 1) / kMaskBlock};

  if (a.indices.data == nullptr) {
    parallel_for(rows * call.blocks, call.min_items(), [&](int64_t begin, int64_t end, int) {
      for (int64_t item = begin; item < end; ++item) call.block(item / call.blocks, item % call.blocks);
    });
    return;
  }

  const int64_t n = a.indices.shape[0];
  const bool i64 = a.indices.dtype == NT_I64;
  uint64_t bits[kRowWindow / 64];
  for (int64_t first = 0; first < rows; first += kRowWindow) {
    const int64_t window = std::min(kRowWindow, rows - first);
    const int64_t n_words = (window + 63) / 64;
    std::memset(bits, 0, size_t(n_words) * sizeof(uint64_t));
    int64_t count = 0;  // distinct rows marked
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = (i64 ? static_cast<const int64_t*>(a.indices.data)[i]
                             : static_cast<const int32_t*>(a.indices.data)[i]) - first;
      if (r < 0 || r >= window) continue;
      const uint64_t bit = uint64_t(1) << (r % 64);
      count += (bits[r / 64] & bit) == 0;
      bits[r / 64] |= bit;
    }
    if (count > 0) mask_marked_rows(call, first, bits, n_words, count);
  }
}

}  // namespace nt::cpu
