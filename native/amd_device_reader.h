// Reads one AMD card's state and its processes through AMD SMI, in the shapes the NVML reader
// fills (DeviceInfoData, ProcessListData). Blocking calls: run off the JS thread.
#pragma once

#include <memory>

#include "amdsmi_library.h"
#include "device_reader.h"

namespace giul {

/// What the counter check found of one card: its counter refused (why), or used; and, for an
/// MI250 die pair, the other die and whether this die's counter counts both (`reports`).
struct AmdCounterVerdict {
  std::optional<std::string> refused;
  std::optional<unsigned int> partner;
  bool reports = false;
};

/// One die's reads over the counter check.
struct DieReads {
  amdsmi::Handle handle = nullptr;
  bool counter_ok = true;
  bool power_ok = true;
  double first_mj = 0;
  double counted_mj = 0;
  double integral_mj = 0;
  double prev_mw = 0;

  bool Usable() const { return handle != nullptr && counter_ok && power_ok; }
  void Start(const AmdSmiLibrary& lib);
  void Step(const AmdSmiLibrary& lib, int64_t dt_ns);
  void Finish(const AmdSmiLibrary& lib);
};

class AmdDeviceReader {
 public:
  explicit AmdDeviceReader(std::shared_ptr<const AmdSmiLibrary> library);

  /// The card's name, UUID, memory and power; its energy counter counts as present only once it
  /// has agreed with integrated power (see CheckCounter), which is checked once per card.
  Result<DeviceInfoData> ReadInfo(unsigned int index) const;
  Result<ProcessListData> ReadProcesses(unsigned int index) const;

  /// How long the counter check integrates power, and the ratio it accepts. Zeus accepts 0.1-10x
  /// (some MI100 and MI210 counters are frozen or count at the wrong rate); giul's bars trust the
  /// counter as the card's energy, so it accepts what one telemetry can differ by: an MI250 die
  /// that counts its partner's energy too (2x under an even load) is refused.
  static constexpr int kCheckMs = 500;
  static constexpr int kCheckStepMs = 25;
  static constexpr double kMinRatio = 2.0 / 3.0;
  static constexpr double kMaxRatio = 1.5;

 private:
  /// The counter of card `index` against its integrated power over kCheckMs, and against the
  /// power of it and the other die of its pair (index ^ 1) together; checked once per card.
  AmdCounterVerdict CheckCounter(unsigned int index) const;
  static AmdCounterVerdict Judge(const DieReads& self, const DieReads& other, unsigned int partner);
  /// Marks a partition of a partitioned socket whose energy another partition's counter counts
  /// (or the one that counts it); `own`: whether this card's counter answered.
  void SharedBySocket(unsigned int index, bool own, DeviceInfoData& info) const;

  std::shared_ptr<const AmdSmiLibrary> library_;
};

/// Whether the card's counter check (AmdDeviceReader::ReadInfo) refused its counter: the sampling
/// thread then never reads it (its faults would be a sampler's, and each read holds the lock).
bool AmdCounterRefused(unsigned int index);

}  // namespace giul
