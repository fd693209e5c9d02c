// Running verify_draft / verify_tree on a TestDevice: target rows with a gap of
// large values after each (a backend that ignores the stride picks them up),
// outputs poisoned, a workspace of exactly the queried size; the target logits
// must come back unchanged.
#include <cmath>
#include <stdexcept>

#include "harness/run_util.h"
#include "harness/verify_ops.h"

namespace ntt {

RowSampleParams VerifyCase::request_params(int64_t b) const {
  return case_row_params(*this, b);
}

std::vector<float> normal_logits(Rng& rng, int64_t n, double scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(scale * rng.normal());
  return v;
}

// A random distribution over V tokens (exp of N(0, 1.5), normalized in fp32).
std::vector<float> random_distribution(Rng& rng, int64_t vocab) {
  std::vector<float> q(static_cast<size_t>(vocab));
  float z = 0;
  for (float& x : q) z += x = float(std::exp(1.5 * rng.normal()));
  for (float& x : q) x /= z;
  return q;
}

int64_t first_argmax(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isnan(x[i]) && x[i] != -INFINITY && (best < 0 || x[i] > x[best])) best = i;
  return best;
}

// Drafts: the row's argmax (likely accepted) or any token, counts 0..max_draft.
VerifyCase random_verify_chain(Rng& rng, int64_t requests, int64_t vocab, int64_t max_draft,
                        bool with_probs, nt_dtype dtype) {
  VerifyCase c;
  c.requests = requests;
  c.vocab = vocab;
  c.width = max_draft + 1;
  c.dtype = dtype;
  c.cu.push_back(0);
  for (int64_t b = 0; b < requests; ++b) c.cu.push_back(c.cu.back() + int32_t(rng.integer(0, max_draft)));
  const int64_t td = c.cu.back();
  c.logits = normal_logits(rng, (td + requests) * vocab, 2.5);
  for (float& x : c.logits) x = round_to(dtype, x);
  for (int64_t b = 0; b < requests; ++b)
    for (int64_t j = c.cu[size_t(b)]; j < c.cu[size_t(b) + 1]; ++j) {
      const int64_t row = j + b;
      c.draft_ids.push_back(rng.coin(0.6) ? int32_t(first_argmax(&c.logits[size_t(row * vocab)], vocab))
                                          : int32_t(rng.integer(0, vocab - 1)));
    }
  if (with_probs)
    for (int64_t j = 0; j < td; ++j) {
      const auto q = random_distribution(rng, vocab);
      c.draft_probs.insert(c.draft_probs.end(), q.begin(), q.end());
    }
  return c;
}

// A random tree per request: node d > 0 hangs under a random earlier node;
// children are chained in node order. Tokens: a row's argmax or any token.
VerifyCase random_verify_tree(Rng& rng, int64_t requests, int64_t vocab, int64_t nodes, int64_t width) {
  VerifyCase c;
  c.tree = true;
  c.requests = requests;
  c.vocab = vocab;
  c.nodes = nodes;
  c.width = width;
  c.with_nodes = true;
  c.logits = normal_logits(rng, requests * nodes * vocab, 2.5);
  c.candidates.assign(size_t(requests * nodes), 0);
  c.next_token.assign(size_t(requests * nodes), -1);
  c.next_sibling.assign(size_t(requests * nodes), -1);
  for (int64_t b = 0; b < requests; ++b) {
    std::vector<int64_t> last_child(size_t(nodes), -1);
    c.candidates[size_t(b * nodes)] = rng.integer(0, vocab - 1);
    for (int64_t d = 1; d < nodes; ++d) {
      const int64_t parent = rng.integer(0, d - 1);
      const float* prow = &c.logits[size_t((b * nodes + parent) * vocab)];
      c.candidates[size_t(b * nodes + d)] = rng.coin(0.4) ? first_argmax(prow, vocab) : rng.integer(0, vocab - 1);
      if (last_child[size_t(parent)] < 0) c.next_token[size_t(b * nodes + parent)] = d;
      else c.next_sibling[size_t(b * nodes + last_child[size_t(parent)])] = d;
      last_child[size_t(parent)] = d;
    }
  }
  return c;
}

VerifyResult run_verify(TestDevice& dev, const VerifyCase& c) {
  const int64_t rows = c.target_rows(), stride = c.vocab + c.row_gap;
  const auto encoded = encode(c.dtype, with_gaps(c.logits, rows, c.vocab, stride, c.dtype));
  auto logits = to_device(dev, encoded);
  const SamplingBuffers sampling(dev, c);
  const size_t out_n = size_t(c.requests * c.width);
  auto out_ids = to_device(dev, std::vector<int32_t>(std::max<size_t>(out_n, 1), kPoisonI32));
  auto out_nodes = to_device(dev, std::vector<int32_t>(std::max<size_t>(out_n, 1), kPoisonI32));
  auto num = to_device(dev, std::vector<int32_t>(size_t(std::max<int64_t>(c.requests, 1)), kPoisonI32));
  const nt_tensor target = logits->matrix(c.dtype, rows, c.vocab, stride);
  const nt_tensor ids_view = out_ids->matrix(NT_I32, c.requests, c.width);
  const nt_tensor num_view = num->vector(NT_I32, c.requests);

  if (!c.tree) {
    const std::vector<int32_t> drafts = c.draft_ids.empty() ? std::vector<int32_t>{0} : c.draft_ids;
    auto draft_ids = to_device(dev, drafts);
    auto cu = to_device(dev, c.cu);
    std::unique_ptr<Buffer> probs = c.draft_probs.empty() ? nullptr : to_device(dev, c.draft_probs);
    nt_verify_draft_args a{};
    a.target_logits = target;
    a.draft_ids = draft_ids->vector(NT_I32, int64_t(c.draft_ids.size()));
    a.cu_num_draft = cu->vector(NT_I32, int64_t(c.cu.size()));
    if (probs) a.draft_probs = probs->matrix(NT_F32, int64_t(c.draft_ids.size()), c.vocab);
    sampling.set(c, a);
    a.out_ids = ids_view;
    a.num_emitted = num_view;
    run_with_workspace(dev, a, "nt_verify_draft", nt_verify_draft_workspace_size, nt_verify_draft);
  } else {
    auto cand = to_device(dev, c.candidates);
    auto next = to_device(dev, c.next_token);
    auto sib = to_device(dev, c.next_sibling);
    nt_verify_tree_args a{};
    a.target_logits = target;
    a.candidates = cand->matrix(NT_I64, c.requests, c.nodes);
    a.retrieve_next_token = next->matrix(NT_I64, c.requests, c.nodes);
    a.retrieve_next_sibling = sib->matrix(NT_I64, c.requests, c.nodes);
    sampling.set(c, a);
    a.out_ids = ids_view;
    if (c.with_nodes) a.out_nodes = out_nodes->matrix(NT_I32, c.requests, c.width);
    a.num_emitted = num_view;
    run_with_workspace(dev, a, "nt_verify_tree", nt_verify_tree_workspace_size, nt_verify_tree);
  }
  if (from_device<uint8_t>(*logits, encoded.size()) != encoded)
    throw std::runtime_error("verify changed its target logits");
  VerifyResult r;
  r.out_ids = from_device<int32_t>(*out_ids, out_n);
  if (c.with_nodes) r.out_nodes = from_device<int32_t>(*out_nodes, out_n);
  r.num_emitted = from_device<int32_t>(*num, size_t(c.requests));
  return r;
}

}  // namespace ntt
