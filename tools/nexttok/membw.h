// The machine's memory read bandwidth: the yardstick for "GB/s" and for the
// ideal weight-read time of the LM heads.
#pragma once

#include <cstddef>

// Best of several multithreaded read passes over `bytes` (>> last-level cache),
// in bytes per second.
double measure_read_bandwidth(int threads, size_t bytes);
