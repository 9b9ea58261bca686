// The sampler ring: Float64 slots shared with TypeScript, guarded by a seqlock whose generation is
// the uint32 at byte offset 0. Layout constants mirror RingLayout in binding.d.ts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "zeroed_slots.h"

namespace giul {

struct RingLayout {
  static constexpr uint32_t kVersion = 2;
  static constexpr size_t kHeaderSlots = 16;
  static constexpr size_t kSampleSlots = 10;
  static constexpr size_t kCapacity = 16384;

  // Header slots (slot 0 holds the seqlock generation and the layout version).
  static constexpr size_t kHead = 1;
  static constexpr size_t kCapacitySlot = 2;
  static constexpr size_t kPeriodNs = 3;
  static constexpr size_t kState = 4;
  static constexpr size_t kLastError = 5;
  static constexpr size_t kCounter = 6;
  static constexpr size_t kPowerSource = 7;
  static constexpr size_t kCounterStepNs = 8;
  /// The power readings' resolution (mW): 1 for NVML, 1000 for AMD SMI's whole watts.
  static constexpr size_t kPowerQuantumMw = 9;

  // Sample slots.
  static constexpr size_t kT = 0;
  static constexpr size_t kEnergyMj = 1;
  static constexpr size_t kPowerMw = 2;
  static constexpr size_t kIntegralMj = 3;
  static constexpr size_t kFlags = 4;
  static constexpr size_t kError = 5;
  static constexpr size_t kFaults = 6;
  static constexpr size_t kReadNs = 7;
  static constexpr size_t kPowerT = 8;
  static constexpr size_t kPowerReadNs = 9;

  // hState values.
  static constexpr double kStarting = 0;
  static constexpr double kRunning = 1;
  static constexpr double kFailed = 2;
  static constexpr double kStopped = 3;
};

struct SampleFlag {
  static constexpr uint32_t kEnergyOk = 1;
  static constexpr uint32_t kPowerOk = 2;
  static constexpr uint32_t kCounterBackwards = 4;
  static constexpr uint32_t kCounterJump = 8;
  static constexpr uint32_t kReadFailed = 16;
  static constexpr uint32_t kFaults = kCounterBackwards | kCounterJump | kReadFailed;
};

class Ring {
 public:
  Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  Ring(Ring&&) = delete;
  Ring& operator=(Ring&&) = delete;

  void* data() { return slots_.get(); }
  size_t byte_length() const { return slot_count_ * sizeof(double); }

  /// Seqlock writer: the generation goes odd before the writes and even after them.
  void BeginWrite();
  void EndWrite();

  double& header(size_t slot) { return slots_[slot]; }
  double* sample(uint64_t k) {
    return &slots_[RingLayout::kHeaderSlots +
                   (k % RingLayout::kCapacity) * RingLayout::kSampleSlots];
  }

 private:
  std::atomic<uint32_t>& generation();

  size_t slot_count_;
  ZeroedSlots slots_;
};

}  // namespace giul
