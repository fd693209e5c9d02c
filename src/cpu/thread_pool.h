// The CPU backend's worker threads: a fixed pool started on first use, so that
// a call never creates threads. parallel_for splits [0, n) into contiguous
// chunks, one task per worker at most, and runs one of them on the caller.
// Bodies are passed by reference (FunctionRef), never copied into a
// std::function, so that a call allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>

namespace nt::cpu {

// A non-owning reference to a callable: valid while the callable lives (the
// duration of the call it is passed to).
template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f) noexcept  // NOLINT: implicit, like std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

int num_threads();
void set_num_threads(int n);  // 0 = hardware concurrency

// body(begin, end, worker) over a partition of [0, n); worker < num_threads().
// Chunks smaller than min_chunk are not split further. Blocks until done.
void parallel_for(int64_t n, int64_t min_chunk, FunctionRef<void(int64_t, int64_t, int)> body);

}  // namespace nt::cpu
