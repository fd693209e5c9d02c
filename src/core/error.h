// Host-side error handling: code below the C boundary throws nt::Error, the C
// entry points catch it, store the message for nt_last_error() and return the
// status. Messages name the operation and the argument.
#pragma once

#include <stdexcept>
#include <string>

#include "nexttok/nexttok.h"

namespace nt {

class Error : public std::runtime_error {
 public:
  Error(nt_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  nt_status status() const { return status_; }

 private:
  nt_status status_;
};

[[noreturn]] inline void fail(nt_status status, const std::string& message) {
  throw Error(status, message);
}

// "op: argument 'name' ...": the form every invalid-argument message takes.
[[noreturn]] inline void fail_argument(const char* op, const char* arg, const std::string& what) {
  throw Error(NT_ERROR_INVALID_ARGUMENT,
              std::string(op) + ": argument '" + arg + "' " + what);
}

void set_last_error(const std::string& message);
void clear_last_error();

// Runs body, translating exceptions into a status and the thread's message.
template <class Body>
nt_status guarded(Body&& body) noexcept {
  try {
    body();
    clear_last_error();
    return NT_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return NT_ERROR_INTERNAL;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal error: ") + e.what());
    return NT_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return NT_ERROR_INTERNAL;
  }
}

}  // namespace nt
