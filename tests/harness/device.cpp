#include "harness/device.h"

#include <cstdlib>
#include <sstream>

namespace ntt {
namespace {

bool env_true(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string s(v);
  return s == "true" || s == "1" || s == "TRUE" || s == "True" || s == "yes";
}

bool listed_in_env(const char* name, const std::string& device) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  std::stringstream list(v);
  std::string item;
  while (std::getline(list, item, ','))
    if (item == device) return true;
  return false;
}

}  // namespace

void DeviceTest::SetUp() {
  device_ = &device(GetParam());
  std::string why;
  if (device_->present(&why)) return;
  const bool required = (env_true("CI") && device_->required_in_ci()) ||
                        listed_in_env("NEXTTOK_TEST_REQUIRE", device_->name());
  if (required) FAIL() << "required test device '" << device_->name() << "' is missing: " << why;
  GTEST_SKIP() << "device '" << device_->name() << "' not present: " << why;
}

std::string device_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace ntt
