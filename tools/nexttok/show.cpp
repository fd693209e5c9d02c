// nexttok show: one row's sorted distribution, carved by top-k, top-p and
// min-p, with the histogram of nexttok's draws over the expected renormalised
// probabilities of the keep-set, as a self-contained SVG.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include "commands.h"
#include "harness/reference.h"
#include "nexttok/nexttok.hpp"
#include "svg.h"
#include "workloads.h"

namespace {

struct Cut {
  const char* name;
  int64_t length;  // the prefix this filter keeps
  const char* color;
};

}  // namespace

const cli::Command& show_command() {
  static const cli::Command c{
      "show",
      "Draw one row's sorted probability distribution (top ~100 tokens, log-y), the region each\n"
      "of top-k, top-p and min-p cuts, the final keep-set, and the frequencies of N draws by\n"
      "nexttok's sample (seed S, offsets 0..N-1) over the expected renormalised probabilities.\n"
      "The keep-set and cuts come from the harness's sort-based reference; exits 1 if a draw\n"
      "falls outside it.",
      "[--vocab N] [--temperature T] [--top-k K] [--top-p P] [--min-p M] [--draws N] [--seed S]\n"
      "             [--logits peaked|flat] [--bars N] -o FILE.svg",
      {{"vocab", "N", "vocabulary size (default 32000)"},
       {"temperature", "T", "temperature, > 0 (default 1.0)"},
       {"top-k", "K", "top-k, 0 = off (default 50)"},
       {"top-p", "P", "top-p in (0, 1], 1 = off (default 0.9)"},
       {"min-p", "M", "min-p in [0, 1], 0 = off (default 0.05)"},
       {"draws", "N", "number of draws (default 5000)"},
       {"seed", "S", "sampling seed; also draws the logits (default 1)"},
       {"logits", "KIND", "peaked: N(0,2) + 4 peaks in [10,16]; flat: N(0,1) (default flat)"},
       {"bars", "N", "tokens shown (default 100)"},
       {"output", "FILE", "the SVG to write (required)", 'o'}}};
  return c;
}

int run_show(const cli::Args& args) {
  const int64_t vocab = args.integer("vocab", 32000, 2, int64_t{1} << 31);
  ntt::RowSampleParams p;
  p.temperature = static_cast<float>(args.number("temperature", 1.0));
  p.top_k = static_cast<int32_t>(args.integer("top-k", 50, 0, INT32_MAX));
  p.top_p = static_cast<float>(args.number("top-p", 0.9));
  p.min_p = static_cast<float>(args.number("min-p", 0.05));
  const int64_t draws = args.integer("draws", 5000, 1, 10000000);
  const uint64_t seed = args.unsigned64("seed", 1);
  const int64_t bars_wanted = args.integer("bars", 100, 5, 1000);
  std::string path = args.text("output", "");
  if (path.empty()) throw cli::UsageError("-o FILE.svg is required");
  if (!(p.temperature > 0)) throw cli::UsageError("--temperature must be > 0 (greedy has nothing to draw)");
  if (!(p.top_p > 0 && p.top_p <= 1)) throw cli::UsageError("--top-p must be in (0, 1]");
  if (!(p.min_p >= 0 && p.min_p <= 1)) throw cli::UsageError("--min-p must be in [0, 1]");
  LogitKind kind;
  try {
    kind = parse_logit_kind(args.text("logits", "flat"));
  } catch (const std::invalid_argument& e) {
    throw cli::UsageError(e.what());
  }

  Rng rng(seed);
  const std::vector<float> logits = logits_row(rng, vocab, kind);

  // The keep-set and each filter's cut, by the sort-based reference.
  p.seed = seed;
  const ntt::SampleReference chain = ntt::reference_sample_row(logits.data(), vocab, p);
  const int64_t finite = static_cast<int64_t>(chain.order.size());
  const int64_t kept = static_cast<int64_t>(chain.keep.size());
  const std::vector<double>& prob = chain.weight;
  double z_all = 0, z_kept = 0;
  for (int64_t i = 0; i < finite; ++i) z_all += prob[i];
  for (int64_t i = 0; i < kept; ++i) z_kept += prob[i];
  std::vector<int64_t> rank(static_cast<size_t>(vocab), -1);
  for (int64_t i = 0; i < finite; ++i) rank[chain.order[i]] = i;

  // nexttok's draws: one row, offsets 0..N-1, as a decoder advancing its step.
  std::cerr << "drawing " << draws << " tokens...\n";
  std::vector<int64_t> counts(static_cast<size_t>(finite), 0);
  int64_t outside = 0, unranked = 0;
  nexttok::SampleParams sp;
  sp.temperature.scalar = p.temperature;
  sp.top_k.scalar = p.top_k;
  sp.top_p.scalar = p.top_p;
  sp.min_p.scalar = p.min_p;
  sp.seed.scalar = seed;
  int64_t token = -1;
  nt_sample_args a = nexttok::sample_args(nexttok::matrix(logits.data(), 1, vocab),
                                          nexttok::vector(&token, 1), sp);
  std::vector<unsigned char> ws(nexttok::sample_workspace_size(a));
  for (int64_t d = 0; d < draws; ++d) {
    a.offset.scalar = static_cast<uint64_t>(d);
    nexttok::sample(a, ws.data(), ws.size());
    int64_t r = token >= 0 && token < vocab ? rank[token] : -1;
    if (r >= 0) ++counts[r];
    unranked += r < 0;
    outside += r < 0 || r >= kept;
  }
  double tv = 0;
  for (int64_t i = 0; i < finite; ++i) {
    double q = i < kept ? prob[i] / z_kept : 0;
    tv += std::fabs(static_cast<double>(counts[i]) / draws - q);
  }
  tv = 0.5 * (tv + static_cast<double>(unranked) / draws);

  // ---- the picture ----
  const int64_t bars = std::min(bars_wanted, finite);
  const double left = 84, right = 260, top = 150, plot_h = 380;
  const double plot_w = std::max(600.0, 7.0 * bars), width = left + plot_w + right, height = top + plot_h + 56;
  const double bar_w = plot_w / bars;
  double lo = 1;
  for (int64_t i = 0; i < bars; ++i) lo = std::min(lo, prob[i] / z_all);
  for (int64_t i = 0; i < std::min(bars, kept); ++i)
    if (counts[i] > 0) lo = std::min(lo, 0.5 * counts[i] / draws);
  double y_lo = std::pow(10.0, std::floor(std::log10(lo) - 0.2)), y_hi = 1.0;
  auto y_of = [&](double v) {
    v = std::max(v, y_lo);
    return top + plot_h * (1 - std::log10(v / y_lo) / std::log10(y_hi / y_lo));
  };
  auto x_of = [&](double rank_pos) { return left + rank_pos * bar_w; };

  Svg svg(width, height);
  std::string title = "nexttok sample: V=" + with_commas(vocab) + " (" + logit_kind_name(kind) +
                      " logits), T=" + fmt(p.temperature) + ", top-k " +
                      (p.top_k > 0 ? std::to_string(p.top_k) : std::string("off")) + ", top-p " +
                      (p.top_p < 1 ? fmt(p.top_p) : std::string("off")) + ", min-p " +
                      (p.min_p > 0 ? fmt(p.min_p) : std::string("off"));
  svg.text(12, 24, title, 16, "start", "font-weight=\"bold\"");
  svg.text(12, 44,
           "keep-set: " + with_commas(kept) + " of " + with_commas(finite) + " tokens (" +
               fmt(100 * z_kept / z_all) + "% of the mass); " + with_commas(draws) +
               " draws (seed " + std::to_string(seed) + ", offsets 0.." + std::to_string(draws - 1) +
               "); total variation to the renormalised keep-set " + fmt(tv, 2) +
               "; draws outside the keep-set: " + std::to_string(outside),
           11, "start", std::string("fill=\"") + (outside ? "#c00" : "#444") + "\"");
  if (kept > bars)
    svg.text(12, 60, "the keep-set is longer than the " + std::to_string(bars) +
                         " tokens shown; the cuts beyond are marked at the right edge", 11, "start", "fill=\"#444\"");

  // One ribbon per filter above the plot: what that filter alone removes.
  Cut cuts[] = {{"top-k", int64_t(chain.n_top_k), "#d62728"}, {"top-p", int64_t(chain.n_top_p), "#9467bd"},
                 {"min-p", int64_t(chain.n_min_p), "#2ca02c"}};
  for (int c = 0; c < 3; ++c) {
    double y = 76 + 20 * c;
    svg.text(left - 8, y + 11, cuts[c].name, 11, "end");
    svg.rect(left, y, plot_w, 14, "#f0f0f0");
    std::string label;
    if (cuts[c].length < bars) {
      svg.rect(x_of(cuts[c].length), y, plot_w - cuts[c].length * bar_w, 14, cuts[c].color, "fill-opacity=\"0.55\"");
      label = "cuts after rank " + with_commas(cuts[c].length);
    } else if (cuts[c].length < finite) {
      label = "cuts after rank " + with_commas(cuts[c].length) + " (off the plot)";
    } else {
      label = "off / cuts nothing";
    }
    svg.text(left + plot_w + 8, y + 11, label, 10, "start", std::string("fill=\"") + cuts[c].color + "\"");
  }

  // Removed region (outside the final keep-set) shaded.
  if (kept < bars) svg.rect(x_of(kept), top, plot_w - kept * bar_w, plot_h, "#eeeeee");
  for (double t = y_lo; t <= y_hi * 1.0001; t *= 10) {
    svg.line(left, y_of(t), left + plot_w, y_of(t), "#d8d8d8");
    svg.text(left - 6, y_of(t) + 4, "1e" + std::to_string(static_cast<int>(std::lround(std::log10(t)))), 10, "end");
  }
  for (int64_t i = 0; i < bars; ++i) {
    double pv = prob[i] / z_all;
    svg.rect(x_of(i) + bar_w * 0.1, y_of(pv), bar_w * 0.8, top + plot_h - y_of(pv),
             i < kept ? "#9ecae1" : "#bdbdbd");
  }
  // Each filter's cut as a dashed line through its ribbon and the plot.
  for (const Cut& c : cuts)
    if (c.length < bars)
      svg.line(x_of(c.length), 76, x_of(c.length), top + plot_h, c.color, 1.2, "stroke-dasharray=\"4,3\"");
  if (kept < bars) {
    svg.line(x_of(kept), top - 4, x_of(kept), top + plot_h, "#000", 2);
    bool room_left = kept * bar_w > 160;
    svg.text(x_of(kept) + (room_left ? -4 : 4), top + 14,
             "keep-set: ranks 1-" + with_commas(kept), 11, room_left ? "end" : "start",
             "font-weight=\"bold\"");
  }
  // Expected renormalised probability (tick with a +-2 sigma whisker for N
  // draws) and the observed frequency of each kept token.
  for (int64_t i = 0; i < bars; ++i) {
    double cx = x_of(i + 0.5);
    if (i < kept) {
      double q = prob[i] / z_kept, sigma = std::sqrt(q * (1 - q) / draws);
      svg.line(cx, y_of(q + 2 * sigma), cx, y_of(std::max(q - 2 * sigma, y_lo)), "#333", 1);
      svg.line(cx - bar_w * 0.4, y_of(q), cx + bar_w * 0.4, y_of(q), "#000", 2);
    }
    if (counts[i] > 0) {
      double f = static_cast<double>(counts[i]) / draws;
      svg.circle(cx, y_of(f), std::min(4.0, bar_w * 0.35), i < kept ? "#ff7f0e" : "#d00",
                 "stroke=\"#7a3d00\" stroke-width=\"0.6\"");
    }
  }
  svg.line(left, top + plot_h, left + plot_w, top + plot_h, "#333");
  svg.line(left, top, left, top + plot_h, "#333");
  int64_t step = bars <= 20 ? 1 : bars <= 50 ? 5 : 10;
  for (int64_t r = step; r <= bars; r += step) {
    svg.line(x_of(r - 0.5), top + plot_h, x_of(r - 0.5), top + plot_h + 4, "#333");
    svg.text(x_of(r - 0.5), top + plot_h + 16, std::to_string(r), 10, "middle");
  }
  svg.text(left + plot_w / 2, top + plot_h + 36, "rank (tokens sorted by T-scaled logit, descending)", 12, "middle");
  svg.text(18, top + plot_h / 2, "probability (log scale)", 12, "middle",
           "transform=\"rotate(-90 18 " + fmt(top + plot_h / 2, 6) + ")\"");

  // Legend.
  double lx = left + plot_w + 14, ly = top + 20;
  svg.rect(lx, ly - 9, 12, 10, "#9ecae1");
  svg.text(lx + 18, ly, "p (full softmax), kept", 10);
  svg.rect(lx, ly + 9, 12, 10, "#bdbdbd");
  svg.text(lx + 18, ly + 18, "p, removed", 10);
  svg.line(lx, ly + 32, lx + 12, ly + 32, "#000", 2);
  svg.text(lx + 18, ly + 36, "expected: p / mass(keep-set)", 10);
  svg.line(lx + 6, ly + 42, lx + 6, ly + 56, "#333");
  svg.text(lx + 18, ly + 54, "+-2 sigma for N draws", 10);
  svg.circle(lx + 6, ly + 68, 4, "#ff7f0e", "stroke=\"#7a3d00\" stroke-width=\"0.6\"");
  svg.text(lx + 18, ly + 72, "observed frequency", 10);
  svg.circle(lx + 6, ly + 86, 4, "#d00");
  svg.text(lx + 18, ly + 90, "drawn outside keep-set", 10);
  svg.rect(lx, ly + 100, 12, 10, "#eeeeee", "stroke=\"#ccc\"");
  svg.text(lx + 18, ly + 109, "removed region", 10);
  svg.save(path);
  std::cerr << "wrote " << path << " (keep-set " << kept << " tokens, TV " << fmt(tv, 2)
            << ", " << outside << " draws outside)\n";
  return outside ? cli::kFailed : cli::kOk;
}
