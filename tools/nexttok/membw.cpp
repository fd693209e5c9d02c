#include "membw.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "timing.h"

namespace {

// Integer adds vectorize without reassociation concerns, so the loop runs at
// load throughput. Eight streams per thread, each read sequentially, keep more
// cache-line fetches in flight than one stream does (about 1.6x here), which
// is what a well-written kernel gets too.
__attribute__((target_clones("arch=haswell", "default")))
uint64_t sum_words(const uint64_t* p, size_t n) {
  constexpr int kStreams = 8;
  size_t len = n / kStreams / 8 * 8;
  uint64_t acc[kStreams][8] = {};
  for (size_t i = 0; i < len; i += 8)
    for (int s = 0; s < kStreams; ++s)
      for (int j = 0; j < 8; ++j) acc[s][j] += p[s * len + i + j];
  uint64_t total = 0;
  for (size_t i = kStreams * len; i < n; ++i) total += p[i];
  for (auto& a : acc)
    for (uint64_t x : a) total += x;
  return total;
}

template <class F>
void on_threads(int threads, F&& body) {
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
  body(0);
  for (auto& th : pool) th.join();
}

}  // namespace

double measure_read_bandwidth(int threads, size_t bytes) {
  threads = std::max(1, threads);
  size_t words = bytes / 8;
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);
  size_t chunk = (words + threads - 1) / threads;
  // Each thread first-touches the part it later reads (NUMA placement).
  on_threads(threads, [&](int t) {
    size_t b = std::min(words, t * chunk), e = std::min(words, b + chunk);
    for (size_t i = b; i < e; ++i) buffer[i] = i * 0x9E3779B97F4A7C15ull;
  });
  std::vector<uint64_t> sink(static_cast<size_t>(threads));
  double best = 1e30;
  for (int pass = 0; pass < 7; ++pass) {
    double t0 = seconds_now();
    on_threads(threads, [&](int t) {
      size_t b = std::min(words, t * chunk), e = std::min(words, b + chunk);
      sink[static_cast<size_t>(t)] += sum_words(buffer.get() + b, e - b);
    });
    best = std::min(best, seconds_now() - t0);
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sink) keep = keep + s;
  return static_cast<double>(words * 8) / best;
}
