// Command-line parsing shared by the subcommands: a declared option list, so
// that unknown options are rejected and the help text is generated from it.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "nexttok/nexttok.h"

namespace cli {

// Exit codes of the program.
enum Exit : int {
  kOk = 0,
  kFailed = 1,       // a check failed or an operation reported an error
  kUsage = 2,        // bad command line
  kUnavailable = 3,  // the requested backend is not present
};

// A bad command line: main prints the message and the subcommand's usage.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Option {
  std::string name;     // without the leading "--"
  std::string metavar;  // empty for a flag
  std::string help;
  char short_name = 0;  // e.g. 'o' for -o
};

struct Command {
  std::string name;
  std::string summary;
  std::string usage;  // the line after "nexttok <name>"
  std::vector<Option> options;
};

std::string help_text(const Command& c);

class Args {
 public:
  // Throws UsageError on unknown options, missing values or stray arguments.
  Args(const Command& c, int argc, char** argv);

  bool flag(const std::string& name) const { return values_.count(name) != 0; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string text(const std::string& name, const std::string& fallback) const;
  int64_t integer(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  double number(const std::string& name, double fallback) const;
  uint64_t unsigned64(const std::string& name, uint64_t fallback) const;
  // Comma-separated list, e.g. "W1,W3".
  std::vector<std::string> list(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

// "cpu" | "cuda" | "opencl"
nt_device_type parse_backend(const std::string& text);
const char* backend_name(nt_device_type d);

}  // namespace cli
