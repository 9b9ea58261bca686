// Zero-filled slot buffers for the ring and the event log, allocated without writing every page.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace giul {

/// Frees what AllocateZeroedSlots allocated.
struct FreeSlots {
  void operator()(double* slots) const noexcept { std::free(slots); }
};

using ZeroedSlots = std::unique_ptr<double[], FreeSlots>;

/// `count` doubles, all 0.0 (all-zero bits), from calloc: a buffer of megabytes comes from fresh
/// pages that the kernel zeroes as they are first touched, instead of being written through at once
/// (`new double[n]()` wrote every page of the ring and the event log: about 25 ms on the thread
/// that opened a sampler, on a virtual machine). Throws std::bad_alloc when there is no memory.
inline ZeroedSlots AllocateZeroedSlots(size_t count) {
  auto* slots = static_cast<double*>(std::calloc(count, sizeof(double)));
  if (slots == nullptr) throw std::bad_alloc();
  return ZeroedSlots(slots);
}

}  // namespace giul
