// What the gtest suites include: the op runners and references of the harness
// (run_ops.h) with the DeviceTest fixture (device.h).
#pragma once

#include "harness/device.h"
#include "harness/run_ops.h"
#include "harness/verify_ops.h"
