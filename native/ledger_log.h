// A device's event log: windows opening, closing and changing weight on the card, appended by any
// thread of the process (every JS environment) and shared with TypeScript as Float64 slots under a
// seqlock, like the ring. Layout constants mirror LedgerLayout in binding.d.ts. The sampling
// thread never touches it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>

#include "zeroed_slots.h"

namespace giul {

struct LedgerLayout {
  static constexpr uint32_t kVersion = 2;
  static constexpr size_t kHeaderSlots = 8;
  static constexpr size_t kEntrySlots = 10;
  static constexpr size_t kCapacity = 65536;

  // Header slots (slot 0 holds the seqlock generation and the layout version).
  static constexpr size_t kPublished = 1;
  static constexpr size_t kCapacitySlot = 2;
  static constexpr size_t kIdleW = 3;
  static constexpr size_t kOpen = 4;
  static constexpr size_t kWeight = 5;

  // Entry slots.
  static constexpr size_t kT = 0;
  static constexpr size_t kRingHead = 1;
  static constexpr size_t kWeightBefore = 2;
  static constexpr size_t kWeightAfter = 3;
  static constexpr size_t kCountAfter = 4;
  /// Which reference appended it (its id among the sampler's references).
  static constexpr size_t kRef = 5;
  /// What the appending environment said of it, stored as given (NaN when it said nothing): its
  /// window's number, the window's own weight after it, and its kind (see binding.d.ts).
  static constexpr size_t kOwner = 6;
  static constexpr size_t kOwn = 7;
  static constexpr size_t kKind = 8;
  /// The idle floor the event's append was given (an open's; NaN otherwise).
  static constexpr size_t kEventIdleW = 9;
};

class LedgerLog {
 public:
  /// One change to the windows open on the card.
  struct Event {
    double delta_weight = 0;
    int64_t delta_count = 0;
    /// The idle floor of an opening window (ignored unless delta_count > 0 and not compensating).
    double idle_w = 0;
    /// Appended for a dropped reference: never refused, and leaves hIdleW alone unless the card
    /// empties.
    bool compensation = false;
    /// The appending reference's id, and what its environment said of the event (kRef, kOwner,
    /// kOwn, kKind).
    double ref = std::numeric_limits<double>::quiet_NaN();
    double owner = std::numeric_limits<double>::quiet_NaN();
    double own = std::numeric_limits<double>::quiet_NaN();
    double kind = std::numeric_limits<double>::quiet_NaN();
  };

  /// What an append did.
  struct Outcome {
    /// The entry's sequence number, or -1 when an open was refused for its idle floor.
    int64_t sequence = -1;
    /// What the event did to the count of open windows (a close past zero is clamped to none).
    int64_t count_delta = 0;
    /// The entry's kT (CLOCK_MONOTONIC ns minus the epoch), when it was appended.
    int64_t t = 0;
  };

  /// The sequence number of a refused open.
  static constexpr int64_t kIdleConflict = -1;

  explicit LedgerLog(int64_t epoch_ns);
  LedgerLog(const LedgerLog&) = delete;
  LedgerLog& operator=(const LedgerLog&) = delete;
  LedgerLog(LedgerLog&&) = delete;
  LedgerLog& operator=(LedgerLog&&) = delete;

  void* data() { return slots_.get(); }
  size_t byte_length() const { return slot_count_ * sizeof(double); }

  /// Appends one event under the log's lock: stamps it (CLOCK_MONOTONIC minus the epoch, and
  /// ring_head read just before the clock), then writes the entry and the header under the seqlock.
  Outcome Append(const Event& event, const std::atomic<uint64_t>& ring_head);

 private:
  std::atomic<uint32_t>& generation();
  double* entry(uint64_t k) {
    return &slots_[LedgerLayout::kHeaderSlots +
                   (k % LedgerLayout::kCapacity) * LedgerLayout::kEntrySlots];
  }

  const int64_t epoch_ns_;
  const size_t slot_count_;
  const ZeroedSlots slots_;

  std::mutex mutex_;
  uint64_t published_ = 0;  // guarded by mutex_
  int64_t open_ = 0;        // guarded by mutex_
  double weight_ = 0;       // guarded by mutex_
  double idle_w_;           // guarded by mutex_: NaN while none is open
};

}  // namespace giul
