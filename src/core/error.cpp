#include "core/error.h"

namespace nt {
namespace {
thread_local std::string last_error;
}

void set_last_error(const std::string& message) { last_error = message; }
void clear_last_error() { last_error.clear(); }
const char* last_error_message() { return last_error.c_str(); }

}  // namespace nt
