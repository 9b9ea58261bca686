// A card's MIG mode and its MIG devices (slices): what a Node naming a slice needs to find the
// card it is on and its share of it. Blocking NVML calls: run off the JS thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "failure.h"
#include "nvml_library.h"

namespace giul {

struct MigSliceData {
  unsigned int slot = 0;
  std::optional<std::string> uuid;
  std::optional<std::string> name;
  std::optional<unsigned int> gpu_instance_id;
  std::optional<unsigned int> compute_instance_id;
  /// The GPU instance's slices of the card (a 3g profile: 3).
  std::optional<unsigned int> slices;
  std::optional<double> memory_total_mib;
  std::optional<double> memory_used_mib;
};

struct MigData {
  unsigned int index = 0;
  /// The card answered nvmlDeviceGetMigMode (false: the library or the card has no MIG).
  bool supported = false;
  bool enabled = false;
  /// nvmlDeviceGetMaxMigDeviceCount: the card's slices (7 on A100/H100/H200).
  std::optional<unsigned int> card_slices;
  std::vector<MigSliceData> slices;
  /// Why `supported` is false, or what could not be read.
  std::optional<std::string> note;
};

/// The card at `index`: its MIG mode and every MIG device present.
Result<MigData> ReadMig(const std::shared_ptr<const NvmlLibrary>& library, unsigned int index);

}  // namespace giul
