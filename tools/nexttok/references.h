// Brute-force references for `nexttok check` on the CPU: each rule of
// docs/SEMANTICS.md written directly, sharing no code with the library except
// the semantic core's Philox and portable log (the draw is defined by them).
#pragma once

#include <string>
#include <vector>

#include "check_ops.h"

std::vector<unsigned char> reference_mask(const MaskCase& c);
std::vector<int32_t> reference_allowed(const AllowedCase& c);

// Tokens the sampling rules give; decided[r] is false where the row is
// degenerate (a keep-set boundary within 1e-6 relative), so bits may differ.
struct SampleReference {
  std::vector<int64_t> tokens;
  std::vector<bool> decided;
};
SampleReference reference_sample(const SampleCase& c);

// The explicit-draw token of one row for uniform u, given the row's chain;
// sets *decided false when u * mass(S) lies within 1e-5 relative of a boundary.
int64_t reference_inverse_cdf(const baseline::Chain& chain, float u, bool* decided);

// Scores [m, v] in double.
std::vector<double> reference_dense_scores(const DenseCase& c);
std::vector<double> reference_binary_scores(const BinaryCase& c);

// Compares a top-k result with the scores: values within tol * max|score| of
// the row; indices equal wherever neighbouring scores are more than that apart.
// Returns "" or the first mismatch.
std::string compare_topk(const std::vector<double>& scores, int64_t m, int64_t v, int32_t k,
                         const TopK& got, double tol);
// Two backends' results on the same case: indices equal at well-separated
// positions (judged on the reference scores), values within tol.
std::string compare_topk_pair(const std::vector<double>& scores, int64_t m, int64_t v, int32_t k,
                              const TopK& a, const TopK& b, double tol);

std::vector<int32_t> reference_pack(const PackCase& c);
Quantized reference_quantize(const QuantizeCase& c);
