// Speculative verification in the harness: a case (chain or tree layout), random
// cases, its runner on a TestDevice (poisoned outputs, exactly the queried workspace,
// strided target rows) and the brute-force reference of one request, written
// from docs/SEMANTICS.md ("Speculative verification") in fp64 on the sort-based
// keep-set of reference_sample_row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/run_ops.h"

namespace ntt {

struct VerifyCase {
  bool tree = false;
  int64_t requests = 0, vocab = 1;
  int64_t width = 1;          // S: out_ids columns (chain: max_draft + 1)
  int64_t row_gap = 0;        // elements after each target row (strided rows)
  nt_dtype dtype = NT_F32;
  std::vector<float> logits;  // target rows x vocab, each representable in dtype
  // Chain layout.
  std::vector<int32_t> draft_ids;   // [Td]
  std::vector<int32_t> cu;          // [B+1]
  std::vector<float> draft_probs;   // [Td, V] or empty (one-hot drafts)
  // Tree layout.
  int64_t nodes = 0;                // D
  std::vector<int64_t> candidates, next_token, next_sibling;  // [B, D]
  bool with_nodes = false;          // ask for out_nodes
  Param<float> temperature = scalar(1.0f);
  Param<int32_t> top_k = scalar<int32_t>(0);
  Param<float> top_p = scalar(1.0f);
  Param<float> min_p = scalar(0.0f);
  Param<uint64_t> seed = scalar<uint64_t>(0);
  Param<uint64_t> offset = scalar<uint64_t>(0);
  uint32_t flags = 0;

  int64_t target_rows() const { return tree ? requests * nodes : int64_t(draft_ids.size()) + requests; }
  RowSampleParams request_params(int64_t b) const;  // seed/offset/row_tag left for the walk
};

// Random inputs: N(0, scale) logits; a distribution over V tokens (exp of
// N(0, 1.5), normalized); the first index of the largest value (NaN and -inf
// never count; -1 if none).
std::vector<float> normal_logits(Rng& rng, int64_t n, double scale);
std::vector<float> random_distribution(Rng& rng, int64_t vocab);
int64_t first_argmax(const float* x, int64_t n);
// A chain case: 0..max_draft drafts a request, each its row's argmax (likely
// accepted) or any token; N(0, 2.5) target logits; draft probs when asked.
VerifyCase random_verify_chain(Rng& rng, int64_t requests, int64_t vocab, int64_t max_draft,
                               bool with_probs, nt_dtype dtype);
// A tree case: node d > 0 under a random earlier node, children chained in node
// order, tokens their parent row's argmax or any token; out_nodes asked for.
VerifyCase random_verify_tree(Rng& rng, int64_t requests, int64_t vocab, int64_t nodes,
                              int64_t width);

struct VerifyResult {
  std::vector<int32_t> out_ids;      // [B, S]
  std::vector<int32_t> out_nodes;    // [B, S] when asked for
  std::vector<int32_t> num_emitted;  // [B]
};

VerifyResult run_verify(TestDevice& dev, const VerifyCase& c);

struct VerifyReference {
  std::vector<int32_t> tokens;  // the emitted tokens (no -1 padding)
  std::vector<int32_t> nodes;   // tree: the node of each accepted token, -1 for the last
  bool degenerate = false;      // a decision within kDegenerateMargin: compare nothing
  std::string why;
};

VerifyReference reference_verify(const VerifyCase& c, int64_t request);

// The Philox word-1 tag of SEMANTICS.md, spelled out here again.
uint32_t reference_verify_tag(bool seeds_per_request, int64_t request, int64_t position);
// The acceptance uniform of the k-th candidate at a position.
double reference_accept_uniform(uint64_t seed, uint64_t offset, uint32_t tag, uint32_t k);

}  // namespace ntt
