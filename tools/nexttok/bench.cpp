// nexttok bench: BENCH.md's workloads on one backend, each row timed against
// its baseline in the same process on the same inputs.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>

#include "commands.h"
#include "json.h"
#include "membw.h"
#include "svg.h"
#include "timing.h"
#include "workloads.h"

namespace {

struct Result {
  const Row* row = nullptr;
  Timing ours, base;
  std::string error;
};

std::string time_text(double s) { return s > 0 ? duration_label(s) : "-"; }

std::string num(double v, int precision = 3) { return v > 0 ? fmt(v, precision) : "-"; }

struct Context {
  std::string date, backend, device, commit;
  int threads = 0;
  double bandwidth = 0;  // bytes/s: the better of the two measurements below
  double bandwidth_start = 0, bandwidth_end = 0;
  size_t bandwidth_bytes = 0;
  bool full = false;
  std::string policy;
};

void print_table(const Context& c, const std::vector<Result>& results) {
  std::ostringstream o;
  o << "## nexttok bench\n\n"
    << "- date: " << c.date << "\n- backend: " << c.backend << " (" << c.device << ")\n"
    << "- threads: " << c.threads << "\n- commit: " << c.commit << "\n"
    << "- memory read bandwidth: " << fmt(c.bandwidth / 1e9) << " GB/s (" << c.threads
    << " threads summing " << (c.bandwidth_bytes >> 20) << " MiB; the better of "
    << fmt(c.bandwidth_start / 1e9) << " before and " << fmt(c.bandwidth_end / 1e9) << " after the rows)\n"
    << "- sizes: " << (c.full ? "BENCH.md (--full)" : "scaled down for the CPU (--full for BENCH.md's)")
    << "\n- method: " << c.policy << "\n\n";
  std::set<std::string> seen;
  o << "Baselines:\n";
  for (const Result& r : results)
    if (seen.insert(r.row->baseline).second) o << "- " << r.row->baseline << "\n";
  o << "\n| id | row | MB moved (ours / baseline) | ours | GB/s | baseline | baseline GB/s | baseline/ours | ours/ideal | note |\n"
    << "|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const Result& r : results) {
    const Row& row = *r.row;
    double ours = r.ours.median_s, base = r.base.median_s;
    double ideal = row.weight_bytes > 0 ? row.weight_bytes / c.bandwidth : 0;
    std::string note = r.error.empty() ? "" : "ERROR: " + r.error;
    o << "| " << row.workload << (row.issue ? "*" : "") << " | " << row.name << " | "
      << fmt(row.bytes / 1e6) << " / " << fmt(row.baseline_bytes / 1e6) << " | " << time_text(ours) << " | " << num(ours > 0 ? row.bytes / ours / 1e9 : 0) << " | "
      << time_text(base) << " | " << num(base > 0 ? row.baseline_bytes / base / 1e9 : 0) << " | "
      << (ours > 0 && base > 0 ? fmt(base / ours) + "x" : "-") << " | "
      << (ideal > 0 && ours > 0 ? fmt(ours / ideal) : "-") << " | " << note << " |\n";
  }
  o << "\n`*` the two issue rows, always run. MB moved: the bytes each path must read and "
       "write at least. GB/s: those bytes / median. ours/ideal: median / (weight bytes / "
       "measured bandwidth).\n";
  std::cout << o.str();
}

void print_json(const Context& c, const std::vector<Result>& results) {
  std::cout << "{\"date\": " << json::quote(c.date) << ", \"backend\": " << json::quote(c.backend)
            << ", \"device\": " << json::quote(c.device) << ", \"threads\": " << c.threads
            << ", \"commit\": " << json::quote(c.commit)
            << ", \"bandwidth_gbps\": " << json::number(c.bandwidth / 1e9)
            << ", \"bandwidth_start_gbps\": " << json::number(c.bandwidth_start / 1e9)
            << ", \"bandwidth_end_gbps\": " << json::number(c.bandwidth_end / 1e9)
            << ", \"full\": " << (c.full ? "true" : "false") << ", \"rows\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const Row& row = *r.row;
    double ours = r.ours.median_s, base = r.base.median_s;
    double ideal = row.weight_bytes > 0 ? row.weight_bytes / c.bandwidth : 0;
    json::Object o;
    o.str("workload", row.workload).str("name", row.name).boolean("issue", row.issue)
        .str("baseline", row.baseline).num("bytes", row.bytes)
        .num("baseline_bytes", row.baseline_bytes)
        .num("ours_us", ours > 0 ? ours * 1e6 : NAN).num("ours_min_us", ours > 0 ? r.ours.min_s * 1e6 : NAN)
        .num("ours_reps", r.ours.reps)
        .num("baseline_us", base > 0 ? base * 1e6 : NAN)
        .num("baseline_min_us", base > 0 ? r.base.min_s * 1e6 : NAN).num("baseline_reps", r.base.reps)
        .num("ours_gbps", ours > 0 ? row.bytes / ours / 1e9 : NAN)
        .num("baseline_gbps", base > 0 ? row.baseline_bytes / base / 1e9 : NAN)
        .num("speedup", ours > 0 && base > 0 ? base / ours : NAN)
        .num("ideal_us", ideal > 0 ? ideal * 1e6 : NAN)
        .num("ours_over_ideal", ideal > 0 && ours > 0 ? ours / ideal : NAN)
        .str("error", r.error);
    std::cout << "  " << o.done() << (i + 1 < results.size() ? ",\n" : "\n");
  }
  std::cout << "]}\n";
}

}  // namespace

const cli::Command& bench_command() {
  static const cli::Command c{
      "bench",
      "Run BENCH.md's workloads (W1-W5, W3r, W7) on one backend. Each row times nexttok and, in the same\n"
      "process on the same inputs, the baseline a user runs today; it reports median time, GB/s\n"
      "against the bytes the op must move, and baseline/ours. On the CPU sizes are scaled down\n"
      "unless --full. The two issue rows (sample k50+p0.9 B=1 V=128,256; dense f32 head\n"
      "V=32,000 H=4,096 M=1) always run. Progress goes to stderr, the table to stdout.",
      "[--backend cpu|opencl] [--workload W1,...] [--full] [--reps N] [--json] [--svg FILE]",
      {{"backend", "B", "cpu | opencl (default cpu); the CUDA rows are bench/cuda_*_bench.py"},
       {"workload", "LIST", "comma-separated subset of W1,W2,W3,W3r,W4,W5,W7 (default: all); 'issue' alone runs just the two issue rows"},
       {"full", "", "BENCH.md's sizes on the CPU too (needs ~10 GB of memory and minutes)"},
       {"reps", "N", "timed runs per step (default: about 0.75 s worth, at least 5)"},
       {"seconds", "S", "target seconds per timed step when --reps is not given (default 0.75)"},
       {"json", "", "print machine-readable rows instead of the markdown table"},
       {"svg", "FILE", "also draw the results as a bar chart (log scale) into FILE"}}};
  return c;
}

int run_bench(const cli::Args& args) {
  const std::string backend = args.text("backend", "cpu");
  if (backend != "cpu" && backend != "opencl")
    throw cli::UsageError("--backend must be cpu or opencl (the CUDA rows are "
                          "bench/cuda_sampling_bench.py and bench/cuda_lm_head_bench.py)");
  const nt_device_type type = cli::parse_backend(backend);
  std::vector<std::string> workloads = args.list("workload");
  const std::vector<std::string> known = {"W1", "W2", "W3", "W3r", "W4", "W5", "W7", "issue"};
  for (const std::string& w : workloads)
    if (std::find(known.begin(), known.end(), w) == known.end()) {
      std::string names;
      for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
      throw cli::UsageError("--workload takes one of " + names + "; got '" + w + "'");
    }
  TimingPolicy policy;
  policy.reps = static_cast<int>(args.integer("reps", 0, 1, 1000000));
  policy.target_seconds = args.number("seconds", 0.75);
  if (!(policy.target_seconds > 0)) throw cli::UsageError("--seconds must be positive");

  std::string why;
  TestDevice* device = nt_backend_available(type) ? find_device(type, &why) : nullptr;
  if (device == nullptr) {
    std::cerr << "nexttok bench: the " << cli::backend_name(type) << " backend is not available"
              << (why.empty() ? "" : ": " + why) << "\n";
    return cli::kUnavailable;
  }

  Context ctx;
  ctx.date = utc_now();
  ctx.backend = cli::backend_name(type);
  ctx.device = device->description();
  ctx.commit = build_commit();
  ctx.threads = nt_cpu_num_threads();
  ctx.full = args.flag("full");
  size_t llc = last_level_cache_bytes();
  ctx.bandwidth_bytes = std::max<size_t>(size_t{512} << 20, 4 * llc);
  std::cerr << "measuring memory read bandwidth (" << (ctx.bandwidth_bytes >> 20) << " MiB)...\n";
  ctx.bandwidth_start = measure_read_bandwidth(ctx.threads, ctx.bandwidth_bytes);
  std::cerr << "  " << fmt(ctx.bandwidth_start / 1e9) << " GB/s\n";

  BenchConfig config;
  config.device = device;
  config.full = ctx.full;
  config.rotate_bytes = 2 * llc;
  config.max_input_bytes = size_t{256} << 20;
  config.threads = ctx.threads;
  ctx.policy = "warm-up, then the median of " +
               (policy.reps > 0 ? std::to_string(policy.reps) + " runs"
                                : "runs filling ~" + fmt(policy.target_seconds) + " s (>= 5; >= 3 for slow rows)") +
               "; inputs rotated over copies totalling >= 2x the " + std::to_string(llc >> 20) +
               " MiB last-level cache (up to 256 MiB)";

  std::vector<Row> all = benchmark_rows(config);
  std::vector<const Row*> selected;
  for (const Row& r : all)
    if (r.issue || workloads.empty() ||
        std::find(workloads.begin(), workloads.end(), r.workload) != workloads.end())
      selected.push_back(&r);

  std::vector<Result> results;
  bool failed = false;
  for (size_t i = 0; i < selected.size(); ++i) {
    const Row& row = *selected[i];
    Result res;
    res.row = &row;
    std::cerr << "[" << i + 1 << "/" << selected.size() << "] " << row.workload << " " << row.name
              << "\n" << std::flush;
    try {
      std::unique_ptr<Workload> w = row.make();
      w->prepare();
      auto sync = [&] { device->sync(); };
      res.ours = time_runs([&](int k) { w->run_ours(k); }, sync, policy);
      std::cerr << "    ours     " << duration_label(res.ours.median_s) << " (" << res.ours.reps
                << " runs)\n" << std::flush;
      res.base = time_runs([&](int k) { w->run_baseline(k); }, sync, policy);
      std::cerr << "    baseline " << duration_label(res.base.median_s) << " (" << res.base.reps
                << " runs)  -> " << fmt(res.base.median_s / res.ours.median_s) << "x\n" << std::flush;
    } catch (const std::exception& e) {
      res.error = e.what();
      failed = true;
      std::cerr << "    error: " << e.what() << "\n";
    }
    results.push_back(res);
  }

  // Measured again at the end: on a shared machine one reading can be low, and
  // the ideal-time ratios should not flatter the rows.
  ctx.bandwidth_end = measure_read_bandwidth(ctx.threads, ctx.bandwidth_bytes);
  ctx.bandwidth = std::max(ctx.bandwidth_start, ctx.bandwidth_end);
  std::cerr << "memory read bandwidth again: " << fmt(ctx.bandwidth_end / 1e9) << " GB/s\n";

  if (args.has("svg")) {
    std::vector<BarRow> bars;
    for (const Result& r : results)
      bars.push_back({r.row->workload + (r.row->issue ? "* " : " ") + r.row->name, r.ours.median_s,
                      r.base.median_s, r.error.empty() ? "" : ("error: " + r.error).substr(0, 90)});
    std::string subtitle = ctx.date + " | " + ctx.backend + " (" + ctx.device + "), " +
                           std::to_string(ctx.threads) + " threads | commit " + ctx.commit +
                           " | read bandwidth " + fmt(ctx.bandwidth / 1e9) + " GB/s";
    bench_chart(bars, "nexttok bench: median time per call, nexttok vs baseline", subtitle)
        .save(args.text("svg", ""));
    std::cerr << "wrote " << args.text("svg", "") << "\n";
  }
  if (args.flag("json"))
    print_json(ctx, results);
  else
    print_table(ctx, results);
  return failed ? cli::kFailed : cli::kOk;
}
