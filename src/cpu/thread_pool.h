// The CPU backend's worker threads: a fixed pool started on first use, so that
// a call never creates threads. parallel_for splits [0, n) into contiguous
// chunks, one task per worker at most, and runs one of them on the caller.
#pragma once

#include <cstdint>
#include <functional>

namespace nt::cpu {

int num_threads();
void set_num_threads(int n);  // 0 = hardware concurrency

// body(begin, end, worker) over a partition of [0, n); worker < num_threads().
// Chunks smaller than min_chunk are not split further. Blocks until done.
void parallel_for(int64_t n, int64_t min_chunk,
                  const std::function<void(int64_t, int64_t, int)>& body);

}  // namespace nt::cpu
