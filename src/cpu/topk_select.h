// What the CPU LM heads share: exact top-k of a stream of scores, and the
// fixed lane-reduction tree of their sums (part of the bit-exact summation
// order). Each (vocabulary part, row) pair owns one selector; a part feeds its
// scores in increasing index order, which lets a running threshold reject
// almost every score with a single key compare. Parts are merged exactly at
// the end. Everything lives in the caller's workspace: nothing is allocated
// here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>

#include "core/ordering.h"
#include "cpu/row_io.h"
#include "cpu/thread_pool.h"

namespace nt::cpu {

inline int64_t round8(int64_t n) { return (n + 7) & ~int64_t(7); }

// Sum of 8 lanes in one fixed tree, so every path rounds alike.
inline float lane_sum(const float* a) {
  const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
  return (t0 + t2) + (t1 + t3);
}

// The value is kept as computed (a NaN is reported as NaN even though it
// ranks as -inf), so the rank is derived from it when needed.
struct TopkEntry {
  float value;
  int32_t index;
};

// Larger rank = earlier in the order (value desc, index asc).
inline uint64_t topk_rank(const TopkEntry& e) {
  return (uint64_t(nt_order_key(e.value)) << 32) | uint64_t(~uint32_t(e.index));
}

inline bool topk_before(const TopkEntry& a, const TopkEntry& b) {
  return topk_rank(a) > topk_rank(b);
}

class TopkSelector {
 public:
  // Twice k: a compaction (linear) then frees room for k more candidates, so
  // its cost is amortised over at least k accepted scores.
  static int64_t capacity(int32_t k) { return 2 * int64_t(k); }

  TopkSelector(TopkEntry* storage, int32_t k) : buf_(storage), k_(k) {}

  // Indices must increase from call to call: a later score whose key equals
  // the k-th kept key then ranks after it, so "key <= threshold" rejects it.
  // The initial threshold 0 is below every key (the -inf/NaN key is 0x007FFFFF).
  void push(float value, int32_t index) {
    const uint32_t key = nt_order_key(value);
    if (key <= threshold_) return;
    buf_[count_++] = TopkEntry{value, index};
    if (count_ == capacity(k_)) compact();
  }

  // Leaves the best min(k, pushed) entries first in the buffer, sorted.
  void finish() {
    if (count_ > k_) compact();
    std::sort(buf_, buf_ + count_, topk_before);
    cursor_ = 0;
  }

 private:
  void compact() {
    std::nth_element(buf_, buf_ + (k_ - 1), buf_ + count_, topk_before);
    count_ = k_;
    threshold_ = nt_order_key(buf_[k_ - 1].value);
  }

  friend class TopkSet;
  TopkEntry* buf_;
  int32_t k_;
  int64_t count_ = 0;
  uint32_t threshold_ = 0;
  int64_t cursor_ = 0;  // merge position, used after finish()
};

// parts x rows selectors and their candidate buffers, carved from a workspace.
class TopkSet {
 public:
  static size_t bytes(int64_t parts, int64_t rows, int32_t k) {
    const size_t n = size_t(parts) * size_t(rows);
    return align64(n * sizeof(TopkSelector)) +
           align64(n * size_t(TopkSelector::capacity(k)) * sizeof(TopkEntry));
  }

  // memory must be 64-byte aligned and hold bytes(parts, rows, k).
  TopkSet(void* memory, int64_t parts, int64_t rows, int32_t k)
      : parts_(parts), rows_(rows), k_(k) {
    const size_t n = size_t(parts) * size_t(rows);
    char* base = static_cast<char*>(memory);
    sel_ = reinterpret_cast<TopkSelector*>(base);
    auto* entries = reinterpret_cast<TopkEntry*>(base + align64(n * sizeof(TopkSelector)));
    for (size_t i = 0; i < n; ++i)
      new (sel_ + i) TopkSelector(entries + i * size_t(TopkSelector::capacity(k)), k);
  }

  TopkSelector& at(int64_t part, int64_t row) { return sel_[part * rows_ + row]; }

  // Call once every part has run finish() on its selectors: writes each row's
  // k best of their union, in order, into the rows of values and indices.
  void write(const nt_tensor& values, const nt_tensor& indices) {
    parallel_for(rows_, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t m = begin; m < end; ++m)
        write_row(m, static_cast<float*>(values.data) + m * values.row_stride,
                  static_cast<int64_t*>(indices.data) + m * indices.row_stride);
    });
  }

 private:
  // Each part's list is sorted, so a merge of the list heads suffices.
  void write_row(int64_t row, float* values, int64_t* indices) {
    for (int32_t i = 0; i < k_; ++i) {
      TopkSelector* best = nullptr;
      uint64_t best_rank = 0;
      for (int64_t p = 0; p < parts_; ++p) {
        TopkSelector& s = at(p, row);
        if (s.cursor_ == s.count_) continue;
        const uint64_t r = topk_rank(s.buf_[s.cursor_]);
        if (best == nullptr || r > best_rank) { best = &s; best_rank = r; }
      }
      // The parts cover the whole vocabulary and k <= V, so k entries exist.
      const TopkEntry& e = best->buf_[best->cursor_++];
      values[i] = e.value;
      indices[i] = e.index;
    }
  }

  TopkSelector* sel_;
  int64_t parts_, rows_;
  int32_t k_;
};

// A top-k head's workspace: the selectors of every (part, row), then its
// scoring pass's piece of score_bytes.
struct TopkHeadLayout {
  size_t scores, total;  // the selectors start at offset 0
  TopkHeadLayout(int64_t rows, int32_t k, size_t score_bytes)
      : scores(align64(TopkSet::bytes(num_threads(), rows, k))),
        total(scores + score_bytes + kWorkspaceSlack) {}
};

// Runs a top-k head over rows > 0 input rows: score_pass(piece, push, done)
// hands each score of a part to push(part, m, v, score), in increasing v, and
// calls done(part) after the part's last; each row's k best go to values and
// indices.
template <class ScorePass>
void run_topk_head(const char* op, int64_t rows, int32_t k, size_t score_bytes, void* workspace,
                   size_t workspace_bytes, const nt_tensor& values, const nt_tensor& indices,
                   ScorePass score_pass) {
  const TopkHeadLayout L(rows, k, score_bytes);
  check_workspace(op, L.total, workspace, workspace_bytes);
  char* base = align_workspace(workspace);
  TopkSet topk(base, num_threads(), rows, k);
  score_pass(base + L.scores,
             [&](int part, int64_t m, int64_t v, float score) {
               topk.at(part, m).push(score, int32_t(v));
             },
             [&](int part) {
               for (int64_t m = 0; m < rows; ++m) topk.at(part, m).finish();
             });
  topk.write(values, indices);
}

}  // namespace nt::cpu
