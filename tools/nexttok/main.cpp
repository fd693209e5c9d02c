// nexttok: benchmark, self-check and visualise the library from the command line.
#include <cstring>
#include <ctime>
#include <iostream>

#include "commands.h"
#include "git_commit.h"
#include "nexttok/nexttok.hpp"

namespace {

struct Subcommand {
  const cli::Command& (*command)();
  int (*run)(const cli::Args&);
};

const Subcommand kSubcommands[] = {{bench_command, run_bench},
                                   {check_command, run_check},
                                   {show_command, run_show}};

void usage(std::ostream& o) {
  o << "usage: nexttok <command> [options]\n\n"
       "nexttok " << nt_version_string() << ": hidden state -> vocabulary scores -> grammar mask -> next token.\n\n"
       "commands:\n"
       "  bench    time BENCH.md's workloads (CPU, OpenCL) against user baselines\n"
       "  check    exactness self-check of every op on every backend present\n"
       "  show     draw one row's sampling distribution, cuts and draws as SVG\n\n"
       "Run 'nexttok <command> --help' for its options.\n"
       "Exit codes: 0 ok, 1 failure (a check failed or an op reported an error),\n"
       "            2 bad command line, 3 backend not available.\n";
}

}  // namespace

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

const char* build_commit() { return NEXTTOK_GIT_COMMIT; }

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return cli::kUsage;
  }
  std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    if (argc > 2)
      for (const Subcommand& s : kSubcommands)
        if (s.command().name == argv[2]) {
          std::cout << cli::help_text(s.command());
          return cli::kOk;
        }
    usage(std::cout);
    return cli::kOk;
  }
  if (name == "--version") {
    std::cout << "nexttok " << nt_version_string() << " (commit " << NEXTTOK_GIT_COMMIT << ")\n";
    return cli::kOk;
  }
  for (const Subcommand& s : kSubcommands) {
    const cli::Command& c = s.command();
    if (c.name != name) continue;
    for (int i = 2; i < argc; ++i)
      if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
        std::cout << cli::help_text(c);
        return cli::kOk;
      }
    try {
      cli::Args args(c, argc - 2, argv + 2);
      return s.run(args);
    } catch (const cli::UsageError& e) {
      std::cerr << "nexttok " << name << ": " << e.what() << "\n\n" << cli::help_text(c);
      return cli::kUsage;
    } catch (const nexttok::Error& e) {
      std::cerr << "nexttok " << name << ": " << e.what() << " (" << nt_status_string(e.status())
                << ")\n";
      return e.status() == NT_ERROR_BACKEND_UNAVAILABLE ? cli::kUnavailable : cli::kFailed;
    } catch (const std::exception& e) {
      std::cerr << "nexttok " << name << ": " << e.what() << "\n";
      return cli::kFailed;
    }
  }
  std::cerr << "nexttok: unknown command '" << name << "'\n\n";
  usage(std::cerr);
  return cli::kUsage;
}
