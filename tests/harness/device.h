// The gtest layer of the harness: every cross-backend test is a TEST_P over
// DeviceTest, instantiated once per device compiled into the harness. A device
// compiled in but without hardware skips, unless the environment says it must
// be there (CI=true for devices CI always provides, NEXTTOK_TEST_REQUIRE=name,...),
// in which case the test fails.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "harness/test_device.h"
#include "nexttok/nexttok.hpp"

namespace ntt {

// Fixture of every cross-backend test: param = device name.
class DeviceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  TestDevice& dev() { return *device_; }
  bool is_cpu() const { return device_->type() == NT_DEVICE_CPU; }

 private:
  TestDevice* device_ = nullptr;
};

std::string device_param_name(const ::testing::TestParamInfo<std::string>& info);

// Runs fn, a call through the C++ layer, which must throw nexttok::Error with
// NT_ERROR_INVALID_ARGUMENT and a message naming `arg` (quoted, as the library
// names arguments).
template <class Fn>
void expect_invalid_argument(Fn&& fn, const std::string& arg) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one naming '" << arg << "'";
  } catch (const nexttok::Error& e) {
    EXPECT_EQ(e.status(), NT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("'" + arg + "'"), std::string::npos) << e.what();
  }
}

}  // namespace ntt

#define NTT_INSTANTIATE_ON_DEVICES(suite) \
  INSTANTIATE_TEST_SUITE_P(Devices, suite, ::testing::ValuesIn(::ntt::device_names()), \
                           ::ntt::device_param_name)
