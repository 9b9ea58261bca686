#include "ring.h"

#include <cstring>
#include <new>

namespace giul {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free);

Ring::Ring()
    : slot_count_(RingLayout::kHeaderSlots + RingLayout::kCapacity * RingLayout::kSampleSlots),
      slots_(AllocateZeroedSlots(slot_count_)) {
  auto* words = reinterpret_cast<unsigned char*>(slots_.get());
  new (words) std::atomic<uint32_t>(0);
  const uint32_t version = RingLayout::kVersion;
  std::memcpy(words + sizeof(uint32_t), &version, sizeof(version));
  slots_[RingLayout::kCapacitySlot] = static_cast<double>(RingLayout::kCapacity);
  slots_[RingLayout::kState] = RingLayout::kStarting;
}

std::atomic<uint32_t>& Ring::generation() {
  return *std::launder(reinterpret_cast<std::atomic<uint32_t>*>(slots_.get()));
}

void Ring::BeginWrite() {
  auto& g = generation();
  // A release store: a reader whose acquire load sees the odd generation sees every sample
  // completed before it (and may read those while this write is under way:
  // src/sources/native/seqlock.ts stableInSection). Not a read-modify-write: a locked instruction
  // per section slowed a writer appending without pause enough that readers never saw it hold still
  // (test/native.card-log.test.ts).
  g.store(g.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_release);
}

void Ring::EndWrite() {
  auto& g = generation();
  g.store(g.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

}  // namespace giul
