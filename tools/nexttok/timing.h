// Wall-clock timing of one benchmark step: warm-up, then the median of N runs.
// N is fixed (--reps) or chosen so that a row takes about target_seconds.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

struct TimingPolicy {
  int reps = 0;               // 0: choose from target_seconds
  double target_seconds = 0.75;
  int min_reps = 5;
  int max_reps = 2000;
  int warmup = 2;
};

struct Timing {
  double median_s = 0;
  double min_s = 0;
  int reps = 0;
};

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// run(i) performs run number i (callers rotate input copies with it) and
// sync() returns when the device has finished it.
template <class Run, class Sync>
Timing time_runs(Run&& run, Sync&& sync, const TimingPolicy& policy) {
  double last = 0;
  int call = 0;
  for (int w = 0; w < std::max(1, policy.warmup); ++w) {
    double t0 = seconds_now();
    run(call++);
    sync();
    last = seconds_now() - t0;
  }
  int reps = policy.reps;
  if (reps <= 0) {
    double want = policy.target_seconds / std::max(last, 1e-7);
    // Rows slower than the target still get 3 runs, so the median means something.
    int floor = last * policy.min_reps > 4 * policy.target_seconds ? 3 : policy.min_reps;
    reps = static_cast<int>(std::clamp<double>(want, floor, policy.max_reps));
  }
  std::vector<double> times(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    double t0 = seconds_now();
    run(call++);
    sync();
    times[static_cast<size_t>(r)] = seconds_now() - t0;
  }
  std::sort(times.begin(), times.end());
  Timing t;
  t.reps = reps;
  t.min_s = times.front();
  t.median_s = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
  return t;
}
