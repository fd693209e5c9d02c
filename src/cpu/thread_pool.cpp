#include "cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "nexttok/nexttok.h"

namespace nt::cpu {
namespace {

class Pool {
 public:
  explicit Pool(int n) { start(n); }
  ~Pool() { stop(); }

  int size() const { return int(workers_.size()) + 1; }

  void resize(int n) {
    std::lock_guard<std::mutex> call(call_mutex_);
    stop();
    start(n);
  }

  void run(int tasks, FunctionRef<void(int)> task) {
    if (tasks <= 1) { if (tasks == 1) task(0); return; }
    std::lock_guard<std::mutex> call(call_mutex_);  // one parallel region at a time
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      tasks_ = tasks;
      next_.store(1);
      pending_ = tasks - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    task(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void start(int n) {
    quit_ = false;
    for (int i = 1; i < n; ++i) workers_.emplace_back([this] { loop(); });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      while (task_ != nullptr) {
        int i = next_.fetch_add(1);
        if (i >= tasks_) break;
        const FunctionRef<void(int)>* task = task_;
        lock.unlock();
        std::exception_ptr err;
        try { (*task)(i); } catch (...) { err = std::current_exception(); }
        lock.lock();
        if (err && !error_) error_ = err;
        if (--pending_ == 0) done_.notify_all();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex call_mutex_, mutex_;
  std::condition_variable wake_, done_;
  const FunctionRef<void(int)>* task_ = nullptr;
  int tasks_ = 0, pending_ = 0;
  std::atomic<int> next_{0};
  uint64_t generation_ = 0;
  bool quit_ = false;
  std::exception_ptr error_;
};

int default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

Pool& pool() {
  static Pool p(default_threads());
  return p;
}

thread_local bool inside_region = false;

}  // namespace

int num_threads() { return pool().size(); }

void set_num_threads(int n) { pool().resize(n > 0 ? n : default_threads()); }

void parallel_for(int64_t n, int64_t min_chunk, FunctionRef<void(int64_t, int64_t, int)> body) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  // Nested regions (an op calling parallel_for inside a task) run serially.
  const int64_t max_tasks = inside_region ? 1 : std::min<int64_t>(num_threads(), (n + min_chunk - 1) / min_chunk);
  const int tasks = int(std::max<int64_t>(1, max_tasks));
  if (tasks == 1) { body(0, n, 0); return; }
  pool().run(tasks, [&](int t) {
    const int64_t begin = n * t / tasks, end = n * (t + 1) / tasks;
    inside_region = true;
    try { body(begin, end, t); } catch (...) { inside_region = false; throw; }
    inside_region = false;
  });
}

}  // namespace nt::cpu

extern "C" {
nt_status nt_cpu_set_num_threads(int32_t n) {
  if (n < 0) return NT_ERROR_INVALID_ARGUMENT;
  nt::cpu::set_num_threads(n);
  return NT_OK;
}
int32_t nt_cpu_num_threads(void) { return nt::cpu::num_threads(); }
}
