// CLOCK_MONOTONIC, the clock of process.hrtime.bigint().
#pragma once

#include <cstdint>

namespace giul {

/// clock_gettime(CLOCK_MONOTONIC) in ns.
int64_t MonotonicNs();

}  // namespace giul
