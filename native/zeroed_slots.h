// Zero-filled slot buffers for the ring and the event log, allocated without writing every page.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#endif

namespace giul {

/// Frees what AllocateZeroedSlots allocated (`bytes`: its size, for munmap).
struct FreeSlots {
  size_t bytes = 0;
  void operator()(double* slots) const noexcept {
#if defined(__unix__) || defined(__APPLE__)
    munmap(slots, bytes);
#else
    std::free(slots);
#endif
  }
};

using ZeroedSlots = std::unique_ptr<double[], FreeSlots>;

/// `count` doubles, all 0.0 (all-zero bits), in fresh pages that the kernel zeroes as they are
/// first touched, instead of written through at once: `new double[n]()` wrote every page of the
/// ring and the event log (6.7 MB) on the thread that opened a sampler, about 25 ms on a virtual
/// machine; calloc does the same once malloc reuses freed memory for them (its mmap threshold rises
/// after the first free). Throws std::bad_alloc when there is no memory.
inline ZeroedSlots AllocateZeroedSlots(size_t count) {
  const size_t bytes = count * sizeof(double);
#if defined(__unix__) || defined(__APPLE__)
  void* slots = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) throw std::bad_alloc();
#else
  void* slots = std::calloc(count, sizeof(double));
  if (slots == nullptr) throw std::bad_alloc();
#endif
  return ZeroedSlots(static_cast<double*>(slots), FreeSlots{bytes});
}

}  // namespace giul
