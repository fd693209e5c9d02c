// nexttok check: the exactness self-check. The harness's table of random cases
// (tests/harness/cases.h) runs on every backend present, each case judged by
// the harness's brute-force references, the same ones the test suites use.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "device.h"
#include "harness/cases.h"
#include "harness/run_ops.h"
#include "json.h"

namespace {

struct Outcome {
  std::string op, backend, status = "pass", message;  // pass | FAIL | unsup | skip
  int cases = 0;
};

// One op's cases on one device, stopping at the first failure.
Outcome run_cases(const ntt::CaseCheck& check, size_t index, TestDevice& dev, int cases,
                  uint64_t seed) {
  Outcome o;
  o.op = check.op;
  o.backend = dev.name();
  ntt::Rng rng(seed * 1000003 + index);
  for (int i = 0; i < cases && o.status == "pass"; ++i, ++o.cases) {
    std::string error;
    try {
      error = check.run(dev, rng);
    } catch (const ntt::OpError& e) {
      // Only the CPU, the oracle, must implement every op.
      if (e.status == NT_ERROR_UNSUPPORTED && dev.type() != NT_DEVICE_CPU) {
        o.status = "unsup";
        o.message = e.what();
        break;
      }
      error = std::string("error: ") + e.what();
    } catch (const std::exception& e) {
      error = std::string("error: ") + e.what();
    }
    if (!error.empty()) {
      o.status = "FAIL";
      o.message = "case " + std::to_string(i) + ": " + error;
    }
  }
  if (o.status == "pass") o.message = std::string("vs ") + check.against;
  return o;
}

void print_json(const std::vector<Outcome>& outcomes, uint64_t seed, int cases, bool failed) {
  std::cout << "{\"date\": " << json::quote(utc_now()) << ", \"commit\": " << json::quote(build_commit())
            << ", \"seed\": " << seed << ", \"cases\": " << cases
            << ", \"ok\": " << (failed ? "false" : "true") << ", \"results\": [\n";
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    json::Object j;
    j.str("op", o.op).str("backend", o.backend).str("status", o.status).num("cases", o.cases)
        .str("message", o.message);
    std::cout << "  " << j.done() << (i + 1 < outcomes.size() ? ",\n" : "\n");
  }
  std::cout << "]}\n";
}

void print_table(const std::vector<Outcome>& outcomes, uint64_t seed, int cases, bool failed) {
  std::cout << "nexttok check (" << utc_now() << ", commit " << build_commit() << ", seed " << seed
            << ", " << cases << " cases per op)\n\n";
  char line[1024];
  std::snprintf(line, sizeof line, "%-22s %-7s %-5s %6s  %s\n", "op", "backend", "", "cases",
                "checked against / first failure");
  std::cout << line;
  int unsupported = 0, skipped = 0;
  for (const Outcome& o : outcomes) {
    std::snprintf(line, sizeof line, "%-22s %-7s %-5s %6d  %s\n", o.op.c_str(), o.backend.c_str(),
                  o.status.c_str(), o.cases, o.message.c_str());
    std::cout << line;
    unsupported += o.status == "unsup";
    skipped += o.status == "skip";
  }
  std::cout << "\n" << (failed ? "FAILED" : "all checks passed");
  if (unsupported) std::cout << "; " << unsupported << " op(s) not implemented on a non-CPU backend (unsup)";
  if (skipped) std::cout << "; " << skipped << " backend(s) compiled in without a device (skip)";
  std::cout << "\n";
}

}  // namespace

const cli::Command& check_command() {
  static const cli::Command c{
      "check",
      "Exactness self-check: random cases of every op, on every backend present, against the\n"
      "brute-force references of the test harness (tokens against a sort-based keep-set and\n"
      "Philox + Gumbel-max bit for bit, top-k against fp64 logits, masks and packing bit for\n"
      "bit). Sampling inputs within 1e-6 relative of a keep-set boundary are drawn again.\n"
      "An op a non-CPU backend does not implement shows \"unsup\". Exits 1 on any failure.",
      "[--backend cpu|cuda|opencl|all] [--cases N] [--seed S] [--json]",
      {{"backend", "B", "cpu | cuda | opencl | all (default: all compiled in)"},
       {"cases", "N", "random cases per op (default 40)"},
       {"seed", "S", "seed of the case generator (default 1)"},
       {"json", "", "print machine-readable results"}}};
  return c;
}

int run_check(const cli::Args& args) {
  const std::string which = args.text("backend", "all");
  std::vector<std::string> backends;
  if (which == "all") {
    backends = ntt::device_names();  // the CPU, the oracle, first
  } else {
    backends.push_back(cli::backend_name(cli::parse_backend(which)));
  }
  const int cases = static_cast<int>(args.integer("cases", 40, 1, 100000));
  const uint64_t seed = args.unsigned64("seed", 1);
  const bool as_json = args.flag("json");

  std::vector<Outcome> outcomes;
  for (const std::string& name : backends) {
    std::string why;
    TestDevice* dev = find_device(cli::parse_backend(name), &why);
    if (dev == nullptr) {
      if (which != "all") {
        std::cerr << "nexttok check: the " << name << " backend is not available: " << why << "\n";
        return cli::kUnavailable;
      }
      Outcome o;
      o.op = "(every op)";
      o.backend = name;
      o.status = "skip";
      o.message = why;
      outcomes.push_back(o);
      continue;
    }
    const auto& checks = ntt::case_checks();
    for (size_t i = 0; i < checks.size(); ++i) {
      if (!as_json) std::cerr << name << ": " << checks[i].op << "...\n";
      outcomes.push_back(run_cases(checks[i], i, *dev, cases, seed));
    }
  }

  bool failed = false;
  for (const Outcome& o : outcomes) failed |= o.status == "FAIL";
  if (as_json)
    print_json(outcomes, seed, cases, failed);
  else
    print_table(outcomes, seed, cases, failed);
  return failed ? cli::kFailed : cli::kOk;
}
