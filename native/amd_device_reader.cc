#include "amd_device_reader.h"

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "monotonic_clock.h"

namespace giul {
namespace {

Failure AmdCallFailed(const char* call, int status) {
  Failure::Code code =
      status == amdsmi::kNotSupported ? Failure::Code::kNotSupported : Failure::Code::kCallFailed;
  return Failure(code, status,
                 std::string(call) + " returned " + AmdSmiLibrary::DescribeStatus(status),
                 Failure::Vendor::kAmd);
}

/// Counter checks already made, by card: a card's counter is checked once per process.
struct CheckCache {
  std::mutex mutex;
  std::map<unsigned int, std::optional<std::string>> verdicts;
};

CheckCache& Checks() {
  static auto* cache = new CheckCache();
  return *cache;
}

std::optional<double> Watts(uint32_t value) {
  if (value == amdsmi::kUnsupported32) {
    return std::nullopt;
  }
  return static_cast<double>(value);
}

}  // namespace

bool AmdCounterRefused(unsigned int index) {
  CheckCache& cache = Checks();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto it = cache.verdicts.find(index);
  return it != cache.verdicts.end() && it->second.has_value();
}

AmdDeviceReader::AmdDeviceReader(std::shared_ptr<const AmdSmiLibrary> library)
    : library_(std::move(library)) {}

Result<DeviceInfoData> AmdDeviceReader::ReadInfo(unsigned int index) const {
  const AmdSmiLibrary& lib = *library_;
  amdsmi::Handle handle = lib.handle(index);
  if (handle == nullptr) {
    return Failure(Failure::Code::kDeviceNotFound, std::nullopt,
                   "no AMD GPU at index " + std::to_string(index) + ": AMD SMI counts " +
                       std::to_string(lib.info().device_count),
                   Failure::Vendor::kAmd);
  }
  DeviceInfoData info;
  info.index = index;
  if (lib.get_asic_info != nullptr) {
    std::vector<char> asic(amdsmi::kAsicInfoBuffer, '\0');
    if (lib.Call([&] { return lib.get_asic_info(handle, asic.data()); }) == amdsmi::kSuccess) {
      info.name = std::string(asic.data(), strnlen(asic.data(), amdsmi::kStringLength));
    }
  }
  if (lib.get_uuid != nullptr) {
    char uuid[amdsmi::kUuidSize + 26] = {};
    unsigned int length = sizeof(uuid);
    if (lib.Call([&] { return lib.get_uuid(handle, &length, uuid); }) == amdsmi::kSuccess) {
      info.uuid = std::string(uuid, strnlen(uuid, sizeof(uuid)));
    }
  }
  if (lib.get_vram_usage != nullptr) {
    amdsmi::VramUsage vram{};
    amdsmi::Status r = lib.Call([&] { return lib.get_vram_usage(handle, &vram); });
    if (r == amdsmi::kSuccess) {
      info.memory_total_mib = vram.vram_total;
      info.memory_used_mib = vram.vram_used;
      info.memory_free_mib = static_cast<double>(vram.vram_total) - vram.vram_used;
    } else {
      info.notes.emplace_back(
          "memory", "amdsmi_get_gpu_vram_usage returned " + AmdSmiLibrary::DescribeStatus(r));
    }
  }
  if (lib.get_power_info != nullptr) {
    amdsmi::PowerInfo power{};
    amdsmi::Status r = lib.Call([&] { return lib.get_power_info(handle, &power); });
    if (r == amdsmi::kSuccess) {
      std::optional<double> current = Watts(power.current_socket_power);
      std::optional<double> average = Watts(power.average_socket_power);
      info.instant_power = current.has_value();
      info.power_usage = average.has_value();
      info.power_w = current ? current : average;
      info.power_limit_w = Watts(power.power_limit);
    } else {
      info.notes.emplace_back("power",
                              "amdsmi_get_power_info returned " + AmdSmiLibrary::DescribeStatus(r));
    }
  }
  if (lib.get_energy != nullptr) {
    uint64_t accumulator = 0;
    uint64_t timestamp = 0;
    float resolution = 0;
    amdsmi::Status r =
        lib.Call([&] { return lib.get_energy(handle, &accumulator, &resolution, &timestamp); });
    if (r == amdsmi::kSuccess) {
      std::optional<std::string> refused = CheckCounter(index);
      info.energy_counter = !refused.has_value();
      if (refused) {
        info.notes.emplace_back("energyCounter", *refused);
      }
    } else {
      info.notes.emplace_back(
          "energyCounter", "amdsmi_get_energy_count returned " + AmdSmiLibrary::DescribeStatus(r));
    }
  }
  return info;
}

std::optional<std::string> AmdDeviceReader::CheckCounter(unsigned int index) const {
  CheckCache& cache = Checks();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.verdicts.find(index);
    if (it != cache.verdicts.end()) {
      return it->second;
    }
  }
  const AmdSmiLibrary& lib = *library_;
  amdsmi::Handle handle = lib.handle(index);
  auto counter_mj = [&](bool* ok) {
    uint64_t accumulator = 0;
    uint64_t timestamp = 0;
    float resolution = 0;
    *ok = lib.Call([&] { return lib.get_energy(handle, &accumulator, &resolution, &timestamp); }) ==
          amdsmi::kSuccess;
    return static_cast<double>(accumulator) * AmdMjPerCount(resolution);
  };
  auto power_mw = [&](bool* ok) {
    amdsmi::PowerInfo power{};
    *ok = lib.get_power_info != nullptr &&
          lib.Call([&] { return lib.get_power_info(handle, &power); }) == amdsmi::kSuccess;
    std::optional<double> w = Watts(power.current_socket_power);
    if (!w) {
      w = Watts(power.average_socket_power);
    }
    *ok = *ok && w.has_value();
    return w.value_or(0) * 1000.0;
  };
  bool ok = true;
  bool power_ok = true;
  const double first = counter_mj(&ok);
  double integral_mj = 0;
  double prev_mw = power_mw(&power_ok);
  int64_t prev_t = MonotonicNs();
  for (int waited = 0; ok && power_ok && waited < kCheckMs; waited += kCheckStepMs) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kCheckStepMs));
    const double mw = power_mw(&power_ok);
    const int64_t t = MonotonicNs();
    integral_mj += (prev_mw + mw) / 2 * static_cast<double>(t - prev_t) / 1e9;
    prev_mw = mw;
    prev_t = t;
  }
  const double counted = counter_mj(&ok) - first;
  std::optional<std::string> verdict;
  if (!ok) {
    verdict = "the energy counter could not be read twice in a row";
  } else if (power_ok && integral_mj > 0) {
    const double ratio = counted / integral_mj;
    if (!(ratio >= kMinRatio && ratio <= kMaxRatio)) {
      verdict = "the energy counter disagrees with integrated power (it counted " +
                std::to_string(static_cast<int>(ratio * 100 + 0.5)) + " % of it over " +
                std::to_string(kCheckMs) + " ms; 67 %–150 % is accepted)";
    }
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.verdicts.emplace(index, verdict);
  return verdict;
}

Result<ProcessListData> AmdDeviceReader::ReadProcesses(unsigned int index) const {
  const AmdSmiLibrary& lib = *library_;
  amdsmi::Handle handle = lib.handle(index);
  if (handle == nullptr || lib.get_process_list == nullptr) {
    return Failure(Failure::Code::kNotSupported, std::nullopt,
                   handle == nullptr ? "no AMD GPU at index " + std::to_string(index)
                                     : "the library does not export amdsmi_get_gpu_process_list",
                   Failure::Vendor::kAmd);
  }
  ProcessListData out;
  out.t_ns = MonotonicNs();
  std::vector<amdsmi::ProcInfo> list(16);
  for (int tries = 0; tries < 4; ++tries) {
    uint32_t count = static_cast<uint32_t>(list.size());
    amdsmi::Status r = lib.Call([&] { return lib.get_process_list(handle, &count, list.data()); });
    if (r == amdsmi::kSuccess && count <= list.size()) {
      for (uint32_t i = 0; i < count; ++i) {
        ProcessData process;
        process.pid = list[i].pid;
        process.used_mib = static_cast<double>(list[i].mem) / (1024.0 * 1024.0);
        process.name = std::string(list[i].name, strnlen(list[i].name, amdsmi::kStringLength));
        out.processes.push_back(std::move(process));
      }
      return out;
    }
    if (r != amdsmi::kSuccess && r != 39 /* AMDSMI_STATUS_MORE_DATA */) {
      return AmdCallFailed("amdsmi_get_gpu_process_list", r);
    }
    list.resize(std::max<size_t>(count, list.size() * 2));
  }
  return AmdCallFailed("amdsmi_get_gpu_process_list", 39);
}

}  // namespace giul
