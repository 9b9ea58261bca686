// Reads one device's state and its compute processes. Blocking NVML calls: run off the JS thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "failure.h"
#include "nvml_library.h"

namespace giul {

struct DeviceInfoData {
  unsigned int index = 0;
  std::optional<std::string> name;
  std::optional<std::string> uuid;
  std::optional<double> memory_total_mib;
  std::optional<double> memory_used_mib;
  std::optional<double> memory_free_mib;
  std::optional<double> utilization_pct;
  bool energy_counter = false;
  bool instant_power = false;
  bool power_usage = false;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
  /// AMD: cards whose energy one counter counts (an MI250 die pair; the partitions of an MI300X
  /// socket): the card whose counter it is, all of them, and which kind ("pair", "partition").
  std::optional<unsigned int> shared_at;
  std::vector<unsigned int> shared_cards;
  std::string shared_kind;
  std::vector<std::pair<std::string, std::string>> notes;
};

struct ProcessData {
  unsigned int pid = 0;
  std::optional<double> used_mib;
  std::optional<std::string> name;
  /// The MIG GPU instance it runs on (card in MIG mode, v2 entries and newer).
  std::optional<unsigned int> gpu_instance_id;
};

struct ProcessListData {
  int64_t t_ns = 0;
  std::vector<ProcessData> processes;
};

class DeviceReader {
 public:
  explicit DeviceReader(std::shared_ptr<const NvmlLibrary> library);

  Result<DeviceInfoData> ReadInfo(unsigned int index) const;
  Result<ProcessListData> ReadProcesses(unsigned int index) const;

 private:
  Result<nvml::Device> Handle(unsigned int index) const;

  std::shared_ptr<const NvmlLibrary> library_;
};

}  // namespace giul
