// Masks a random row through the installed library and checks the result.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <nexttok/nexttok.hpp>

int main() {
  const int vocab = 100;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(rng);
  std::vector<int32_t> mask(4, 0);
  for (int t = 0; t < vocab; t += 3) mask[t / 32] |= int32_t(1u << (t % 32));
  const std::vector<float> before = logits;
  nexttok::apply_token_bitmask(nexttok::matrix(logits.data(), 1, vocab),
                               nexttok::matrix(mask.data(), 1, 4));
  for (int t = 0; t < vocab; ++t) {
    const bool allowed = t % 3 == 0;
    if (allowed ? logits[t] != before[t] : !std::isinf(logits[t])) {
      std::printf("token %d wrong after masking\n", t);
      return 1;
    }
  }
  std::printf("nexttok %s found by find_package and working\n", nt_version_string());
  return 0;
}
