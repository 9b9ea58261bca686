#include "monotonic_clock.h"

#include <time.h>  // NOLINT(modernize-deprecated-headers): clock_gettime is POSIX, not <ctime>

namespace giul {

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace giul
