// quantize_activations: per row, scale = max|x| / 127 over the non-NaN entries
// (1 when that max is 0), q = clamp(rint(x / scale), -127, 127) with IEEE fp32
// division and round-half-even. A NaN quotient (a NaN entry, or inf / inf when
// the row holds an infinity) quantizes to 0.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu/ops.h"
#include "cpu/row_io.h"
#include "cpu/thread_pool.h"

namespace nt::cpu {

constexpr float kRoundBias = 12582912.0f;  // 1.5 * 2^23

void CpuBackend::quantize_activations(const nt_quantize_activations_args& a, void*) {
  const int64_t cols = a.x.shape[1];
  parallel_for(a.x.shape[0], 16, [&](int64_t begin, int64_t end, int) {
    for (int64_t m = begin; m < end; ++m) {
      const void* row = row_address(a.x, m);
      int8_t* q = static_cast<int8_t*>(a.act_q.data) + m * a.act_q.row_stride;
      float amax = 0.0f;
      for (int64_t j = 0; j < cols; ++j) {
        const float v = std::fabs(widen_element(row, a.x.dtype, j));
        if (v > amax) amax = v;  // false for NaN: NaN entries are skipped
      }
      const float scale = amax == 0.0f ? 1.0f : amax / 127.0f;
      for (int64_t j = 0; j < cols; ++j) {
        const float r = widen_element(row, a.x.dtype, j) / scale;
        // Clamping before rounding gives the same integer (rint is monotone
        // and +-127 are integers). Adding and removing 1.5 * 2^23 rounds
        // |y| <= 127 to an integer, half to even, like rint in the default
        // rounding mode, without a libm call.
        const float y = r != r ? 0.0f : std::min(std::max(r, -127.0f), 127.0f);
        q[j] = int8_t((y + kRoundBias) - kRoundBias);
      }
      static_cast<float*>(a.act_scale.data)[m] = scale;
    }
  });
}

}  // namespace nt::cpu
