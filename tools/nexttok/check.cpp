// nexttok check: the exactness self-check. On the CPU every op is compared
// with a brute-force reference (sampling: keep-sets against the sort-based
// chain, draws against Philox + Gumbel-max on that keep-set); every other
// backend present is compared with the CPU on the same random cases.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>

#include "commands.h"
#include "json.h"
#include "nexttok/nexttok.hpp"
#include "references.h"

namespace {

struct Outcome {
  std::string op, backend, status = "pass", message;  // pass | FAIL | unsup | skip
  int cases = 0, undecided = 0;
};

// One op's check of one case: "" when it passes, or the mismatch. `undecided`
// counts rows a reference could not decide (degenerate inputs).
using CaseCheck = std::function<std::string(Rng&, Device* other, int& undecided)>;

template <class T>
std::string first_difference(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  if (got.size() != want.size()) return std::string(what) + ": size differs";
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      std::ostringstream o;
      o << what << " differs at element " << i << ": " << +got[i] << " vs " << +want[i];
      return o.str();
    }
  return "";
}

std::string compare_tokens(const std::vector<int64_t>& got, const SampleReference& want,
                           int& undecided, const char* against) {
  for (size_t r = 0; r < got.size(); ++r) {
    if (!want.decided[r]) {
      ++undecided;
      continue;
    }
    if (got[r] != want.tokens[r])
      return "row " + std::to_string(r) + ": token " + std::to_string(got[r]) + ", " + against + " " +
             std::to_string(want.tokens[r]);
  }
  return "";
}

Device& cpu() {
  static std::unique_ptr<Device> d = make_device(NT_DEVICE_CPU);
  return *d;
}

// Tokens on `other` must equal the CPU's; on the CPU (other == null), the reference's.
std::string check_tokens(const SampleCase& c, Device* other, int& undecided) {
  SampleReference ref = reference_sample(c);
  if (other == nullptr) return compare_tokens(run_sample(cpu(), c), ref, undecided, "reference");
  SampleReference cpu_tokens{run_sample(cpu(), c), ref.decided};
  return compare_tokens(run_sample(*other, c), cpu_tokens, undecided, "cpu");
}

std::string check_mask(Rng& rng, Device* other, int&) {
  MaskCase c = make_mask_case(rng);
  std::vector<unsigned char> want = other ? run_mask(cpu(), c) : reference_mask(c);
  return first_difference(run_mask(other ? *other : cpu(), c), want, "logits bytes");
}

std::string check_allowed(Rng& rng, Device* other, int&) {
  AllowedCase c = make_allowed_case(rng);
  std::vector<int32_t> want = other ? run_allowed(cpu(), c) : reference_allowed(c);
  return first_difference(run_allowed(other ? *other : cpu(), c), want, "bitmask word");
}

std::string check_greedy(Rng& rng, Device* other, int& undecided) {
  return check_tokens(make_sample_case(rng, true), other, undecided);
}

// Gumbel-max draws, then the same rows in reverse order with per-row seeds:
// a request's token must not depend on its batch position.
std::string check_draw(Rng& rng, Device* other, int& undecided) {
  SampleCase c = make_sample_case(rng, false);
  std::string e = check_tokens(c, other, undecided);
  if (!e.empty() || c.b < 2) return e;
  SampleCase rev = c;
  if (!rev.seeds_per_row) rev.seeds.assign(static_cast<size_t>(c.b), c.seeds[0] ^ 0x5DEECE66Dull);
  if (!rev.params_per_row) rev.params.assign(static_cast<size_t>(c.b), c.params[0]);
  rev.seeds_per_row = rev.params_per_row = true;
  SampleCase fwd = rev;
  size_t row = static_cast<size_t>(c.v) * dtype_size(c.dtype);
  for (int64_t r = 0; r < c.b; ++r) {
    int64_t s = c.b - 1 - r;
    std::memcpy(rev.logits.data() + r * row, c.logits.data() + s * row, row);
    rev.params[r] = fwd.params[s];
    rev.seeds[r] = fwd.seeds[s];
  }
  Device& dev = other ? *other : cpu();
  std::vector<int64_t> a = run_sample(dev, fwd), b = run_sample(dev, rev);
  for (int64_t r = 0; r < c.b; ++r)
    if (a[r] != b[c.b - 1 - r])
      return "per-row seeds: row " + std::to_string(r) + " drew " + std::to_string(a[r]) +
             " but " + std::to_string(b[c.b - 1 - r]) + " at batch position " + std::to_string(c.b - 1 - r);
  return "";
}

// The keep-set, member by member: one logits row repeated, each copy with an
// explicit draw at the middle of one member's interval of the inverse CDF, so
// every member of the sort chain's keep-set must come back (and the edges:
// u = 0, NaN, < 0 give the first member, u >= 1 the last).
std::string check_keep_set(Rng& rng, Device* other, int& undecided) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    SampleCase base = make_sample_case(rng, false);
    std::vector<float> row(static_cast<size_t>(base.v));
    for (int64_t t = 0; t < base.v; ++t) row[t] = base.logit(0, t);
    baseline::ChainParams p = base.row_params(0);
    baseline::Chain chain;
    baseline::sort_chain(row.data(), base.v, p, chain);
    if (chain.greedy || chain.kept == 0) continue;
    if (chain.degenerate) {
      ++undecided;
      continue;
    }
    std::vector<std::pair<int32_t, double>> members;
    double total = 0;
    for (int64_t i = 0; i < chain.kept; ++i) {
      members.emplace_back(chain.order[i].second, chain.prob[i]);
      total += chain.prob[i];
    }
    std::sort(members.begin(), members.end());
    std::vector<float> draws = {0.0f, std::numeric_limits<float>::quiet_NaN(), -0.5f, 1.0f, 2.0f};
    size_t step = std::max<size_t>(1, members.size() / 250);
    double cum = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      double width = members[i].second;
      if (i % step == 0 && width >= 2e-5 * total)
        draws.push_back(static_cast<float>((cum + width / 2) / total));
      cum += width;
    }
    SampleCase c = base;
    c.b = static_cast<int64_t>(draws.size());
    c.uniform = draws;
    size_t bytes = static_cast<size_t>(base.v) * dtype_size(base.dtype);
    c.logits.resize(bytes * c.b);
    for (int64_t r = 0; r < c.b; ++r) std::memcpy(c.logits.data() + r * bytes, base.logits.data(), bytes);
    c.params.assign(c.params_per_row ? static_cast<size_t>(c.b) : 1, p);
    c.seeds.assign(c.seeds_per_row ? static_cast<size_t>(c.b) : 1, base.seeds[0]);
    return check_tokens(c, other, undecided);
  }
  return "";
}

std::string check_dense(Rng& rng, Device* other, int&) {
  DenseCase c = make_dense_case(rng);
  std::vector<double> scores = reference_dense_scores(c);
  TopK got = run_dense(other ? *other : cpu(), c);
  if (other) return compare_topk_pair(scores, c.m, c.v, c.k, got, run_dense(cpu(), c), 1e-5);
  return compare_topk(scores, c.m, c.v, c.k, got, 1e-5);
}

std::string check_binary(Rng& rng, Device* other, int&) {
  BinaryCase c = make_binary_case(rng);
  std::vector<double> scores = reference_binary_scores(c);
  TopK got = run_binary(other ? *other : cpu(), c);
  if (other) return compare_topk_pair(scores, c.m, c.v, c.k, got, run_binary(cpu(), c), 1e-5);
  return compare_topk(scores, c.m, c.v, c.k, got, 1e-5);
}

std::string check_pack(Rng& rng, Device* other, int&) {
  PackCase c = make_pack_case(rng);
  std::vector<int32_t> want = other ? run_pack(cpu(), c) : reference_pack(c);
  return first_difference(run_pack(other ? *other : cpu(), c), want, "packed word");
}

std::string check_quantize(Rng& rng, Device* other, int&) {
  QuantizeCase c = make_quantize_case(rng);
  Quantized want = other ? run_quantize(cpu(), c) : reference_quantize(c);
  Quantized got = run_quantize(other ? *other : cpu(), c);
  std::string e = first_difference(got.scale, want.scale, "act_scale");
  return e.empty() ? first_difference(got.q, want.q, "act_q") : e;
}

struct OpCheck {
  const char* name;
  const char* what;  // on the CPU
  CaseCheck run;
};

const OpCheck kChecks[] = {
    {"apply_token_bitmask", "bit rule, all bytes incl. row padding", check_mask},
    {"bitmask_from_allowed", "bit rule", check_allowed},
    {"sample: greedy", "first argmax", check_greedy},
    {"sample: keep-set", "each member of the sort chain's keep-set, by explicit draws", check_keep_set},
    {"sample: Gumbel draw", "Philox + portable log on the chain's keep-set; batch position", check_draw},
    {"lm_head_topk_dense", "fp64 scores, indices + values (1e-5)", check_dense},
    {"lm_head_topk_binary", "exact int dots, indices + values (1e-5)", check_binary},
    {"pack_weights", "bit rule", check_pack},
    {"quantize_activations", "bit-exact scale and q", check_quantize},
};

}  // namespace

const cli::Command& check_command() {
  static const cli::Command c{
      "check",
      "Exactness self-check. On the CPU, random cases of every op against brute-force\n"
      "references (keep-sets against a sort-based chain, draws against Philox + Gumbel-max,\n"
      "top-k against fp64 scores); on every other backend present, the same cases compared\n"
      "with the CPU (tokens equal for the same seed/offset, top-k indices equal, masked logits\n"
      "bit-equal). Rows whose keep-set boundary is within 1e-6 relative are not judged\n"
      "(\"undecided\"). An op a non-CPU backend does not implement shows \"unsup\".\n"
      "Exits 1 on any failure.",
      "[--backend cpu|cuda|opencl|all] [--cases N] [--seed S] [--json]",
      {{"backend", "B", "cpu | cuda | opencl | all (default: all present)"},
       {"cases", "N", "random cases per op (default 40)"},
       {"seed", "S", "seed of the case generator (default 1)"},
       {"json", "", "print machine-readable results"}}};
  return c;
}

int run_check(const cli::Args& args) {
  std::string which = args.text("backend", "all");
  std::vector<nt_device_type> backends;
  if (which == "all") {
    backends = cli::present_backends();
    std::reverse(backends.begin(), backends.end());  // the CPU, the oracle, first
  } else {
    nt_device_type t = cli::parse_backend(which);
    if (!nt_backend_available(t)) {
      std::cerr << "nexttok check: the " << cli::backend_name(t) << " backend is not available\n";
      return cli::kUnavailable;
    }
    backends.push_back(t);
  }
  int cases = static_cast<int>(args.integer("cases", 40, 1, 100000));
  uint64_t seed = args.unsigned64("seed", 1);
  bool as_json = args.flag("json");

  std::vector<Outcome> outcomes;
  for (nt_device_type type : backends) {
    std::unique_ptr<Device> device = type == NT_DEVICE_CPU ? nullptr : make_device(type);
    for (const OpCheck& op : kChecks) {
      Outcome o;
      o.op = op.name;
      o.backend = cli::backend_name(type);
      if (type != NT_DEVICE_CPU && !device) {
        o.status = "skip";
        o.message = "no device hooks for this backend in the tool yet (device.cpp)";
        outcomes.push_back(o);
        continue;
      }
      if (!as_json) std::cerr << o.backend << ": " << op.name << "...\n";
      Rng rng(seed * 1000003 + (&op - kChecks));
      for (int i = 0; i < cases && o.status == "pass"; ++i, ++o.cases) {
        std::string error;
        try {
          error = op.run(rng, device.get(), o.undecided);
        } catch (const nexttok::Error& e) {
          // A backend may grow op by op; only the CPU, the oracle, must have them all.
          if (e.status() == NT_ERROR_UNSUPPORTED && type != NT_DEVICE_CPU) {
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
      if (o.status == "pass")
        o.message = type == NT_DEVICE_CPU ? std::string("vs ") + op.what : "equal to the cpu backend";
      outcomes.push_back(o);
    }
  }

  bool failed = false;
  for (const Outcome& o : outcomes) failed |= o.status == "FAIL";
  if (as_json) {
    std::cout << "{\"date\": " << json::quote(utc_now()) << ", \"commit\": " << json::quote(build_commit())
              << ", \"seed\": " << seed << ", \"cases\": " << cases
              << ", \"ok\": " << (failed ? "false" : "true") << ", \"results\": [\n";
    for (size_t i = 0; i < outcomes.size(); ++i) {
      const Outcome& o = outcomes[i];
      json::Object j;
      j.str("op", o.op).str("backend", o.backend).str("status", o.status).num("cases", o.cases)
          .num("undecided_rows", o.undecided).str("message", o.message);
      std::cout << "  " << j.done() << (i + 1 < outcomes.size() ? ",\n" : "\n");
    }
    std::cout << "]}\n";
  } else {
    std::cout << "nexttok check (" << utc_now() << ", commit " << build_commit() << ", seed " << seed
              << ", " << cases << " cases per op)\n\n";
    char line[512];
    std::snprintf(line, sizeof line, "%-22s %-7s %-5s %6s %9s  %s\n", "op", "backend", "", "cases",
                  "undecided", "checked against / first failure");
    std::cout << line;
    for (const Outcome& o : outcomes) {
      std::snprintf(line, sizeof line, "%-22s %-7s %-5s %6d %9d  %s\n", o.op.c_str(), o.backend.c_str(),
                    o.status.c_str(), o.cases, o.undecided, o.message.c_str());
      std::cout << line;
    }
    int unsupported = 0, skipped = 0;
    for (const Outcome& o : outcomes) {
      unsupported += o.status == "unsup";
      skipped += o.status == "skip";
    }
    std::cout << "\n" << (failed ? "FAILED" : "all checks passed");
    if (unsupported) std::cout << "; " << unsupported << " op(s) not implemented on a non-CPU backend (unsup)";
    if (skipped) std::cout << "; " << skipped << " skipped (no device hooks)";
    std::cout << "\n";
  }
  return failed ? cli::kFailed : cli::kOk;
}
