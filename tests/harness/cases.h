// Random cases of every operation, each run on a device and judged by the
// references of the harness: the table `nexttok check` runs on every backend
// present. A check draws its whole case from the generator it is given, so the
// seed and the case number reproduce a failure.
#pragma once

#include <string>
#include <vector>

#include "harness/data.h"
#include "harness/test_device.h"

namespace ntt {

struct CaseCheck {
  const char* op;       // the operation, and which of its behaviours
  const char* against;  // what the device's result is compared with
  // Runs one random case on `dev`: "" when it passes, else the first mismatch.
  // An op that fails throws OpError (run_ops.h).
  std::string (*run)(TestDevice& dev, Rng& rng);
};

const std::vector<CaseCheck>& case_checks();

}  // namespace ntt
