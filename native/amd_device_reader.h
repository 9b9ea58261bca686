// Reads one AMD card's state and its processes through AMD SMI, in the shapes the NVML reader
// fills (DeviceInfoData, ProcessListData). Blocking calls: run off the JS thread.
#pragma once

#include <memory>

#include "amdsmi_library.h"
#include "device_reader.h"

namespace giul {

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
  /// nullopt when the counter agrees with power (or power cannot be read to check it), else why
  /// it is not used.
  std::optional<std::string> CheckCounter(unsigned int index) const;

  std::shared_ptr<const AmdSmiLibrary> library_;
};

/// Whether the card's counter check (AmdDeviceReader::ReadInfo) refused its counter: the sampling
/// thread then never reads it (its faults would be a sampler's, and each read holds the lock).
bool AmdCounterRefused(unsigned int index);

}  // namespace giul
