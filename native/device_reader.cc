#include "device_reader.h"

#include <cmath>
#include <cstring>

#include "monotonic_clock.h"

namespace giul {
namespace {

constexpr double kBytesPerMib = 1024.0 * 1024.0;

bool IsLost(nvml::Return r) { return r == nvml::kGpuIsLost || r == nvml::kResetRequired; }

double Mib(unsigned long long bytes) {
  return std::round(static_cast<double>(bytes) / kBytesPerMib);
}

std::string Missing(const char* symbol) {
  return std::string("the library does not export ") + symbol;
}

std::string Failed(const char* symbol, nvml::Return r) {
  return std::string(symbol) + " returned " + NvmlLibrary::DescribeReturn(r);
}

std::optional<std::string> ReadString(nvml::GetStringFn fn, nvml::Device device, unsigned int size,
                                      nvml::Return* r) {
  std::string buffer(size, '\0');
  *r = fn(device, buffer.data(), size);
  if (*r != nvml::kSuccess) {
    return std::nullopt;
  }
  buffer.resize(std::strlen(buffer.c_str()));
  return buffer;
}

// One process-list entry, whatever the ABI of the symbol that filled it.
struct RawProcess {
  unsigned int pid;
  unsigned long long used;
};

size_t EntrySize(NvmlLibrary::ProcessAbi abi) {
  switch (abi) {
    case NvmlLibrary::ProcessAbi::kV1:
      return sizeof(nvml::ProcessInfoV1);
    case NvmlLibrary::ProcessAbi::kV2:
    case NvmlLibrary::ProcessAbi::kV3:
      return sizeof(nvml::ProcessInfoV2);
    case NvmlLibrary::ProcessAbi::kR535:
      return sizeof(nvml::ProcessInfoR535);
    case NvmlLibrary::ProcessAbi::kNone:
      return 0;
  }
  return 0;
}

RawProcess EntryAt(const std::vector<unsigned char>& buffer, size_t entry_size, size_t i) {
  // Every ABI starts with {unsigned int pid; unsigned long long usedGpuMemory at offset 8}.
  RawProcess out{};
  std::memcpy(&out.pid, buffer.data() + i * entry_size, sizeof(out.pid));
  std::memcpy(&out.used, buffer.data() + i * entry_size + 8, sizeof(out.used));
  return out;
}

}  // namespace

DeviceReader::DeviceReader(std::shared_ptr<const NvmlLibrary> library)
    : library_(std::move(library)) {}

Result<nvml::Device> DeviceReader::Handle(unsigned int index) const {
  const auto& info = library_->info();
  if (index >= info.device_count) {
    return Failure(Failure::Code::kDeviceNotFound, std::nullopt,
                   "no GPU at index " + std::to_string(index) + ": NVML counts " +
                       std::to_string(info.device_count) + " device(s)");
  }
  nvml::Device device = nullptr;
  nvml::Return r = library_->get_handle(index, &device);
  if (r != nvml::kSuccess) {
    std::string reason = "nvmlDeviceGetHandleByIndex(" + std::to_string(index) + ") returned " +
                         NvmlLibrary::DescribeReturn(r);
    if (IsLost(r)) {
      return Failure(Failure::Code::kGpuLost, r,
                     reason + "; the GPU fell off the bus or needs a reset");
    }
    if (r == nvml::kNoPermission) {
      reason += "; this process may not use that GPU (cgroups, container or MIG permissions)";
    }
    return Failure(Failure::Code::kDeviceNotFound, r, std::move(reason));
  }
  return device;
}

Result<DeviceInfoData> DeviceReader::ReadInfo(unsigned int index) const {
  auto handle = Handle(index);
  if (auto* failure = std::get_if<Failure>(&handle)) {
    return *failure;
  }
  nvml::Device device = std::get<nvml::Device>(handle);
  const NvmlLibrary& lib = *library_;
  DeviceInfoData out;
  out.index = index;
  std::optional<Failure> lost;
  auto note = [&](const char* field, std::string why) {
    out.notes.emplace_back(field, std::move(why));
  };
  auto failed = [&](const char* field, const char* symbol, nvml::Return r) {
    if (IsLost(r) && !lost) {
      lost = Failure::FromNvml(r, std::string(symbol) + " on GPU " + std::to_string(index));
    }
    note(field, Failed(symbol, r));
  };

  nvml::Return r = nvml::kSuccess;
  if (lib.get_name == nullptr) {
    note("name", Missing("nvmlDeviceGetName"));
  } else if (!(out.name = ReadString(lib.get_name, device, nvml::kNameBufferSize, &r))) {
    failed("name", "nvmlDeviceGetName", r);
  }
  if (lib.get_uuid == nullptr) {
    note("uuid", Missing("nvmlDeviceGetUUID"));
  } else if (!(out.uuid = ReadString(lib.get_uuid, device, nvml::kUuidBufferSize, &r))) {
    failed("uuid", "nvmlDeviceGetUUID", r);
  }

  // Memory: _v2 (whose `used` excludes reserved memory) first, v1 when the driver refuses _v2.
  bool memory_read = false;
  if (lib.get_memory_v2 != nullptr) {
    nvml::MemoryV2 memory{};
    memory.version = nvml::kMemoryV2Version;
    r = lib.get_memory_v2(device, &memory);
    if (r == nvml::kSuccess) {
      out.memory_total_mib = Mib(memory.total);
      out.memory_used_mib = Mib(memory.used);
      out.memory_free_mib = Mib(memory.free);
      memory_read = true;
    } else if (lib.get_memory_v1 == nullptr ||
               (r != nvml::kFunctionNotFound && r != nvml::kArgumentVersionMismatch &&
                r != nvml::kInvalidArgument)) {
      for (const char* field : {"memoryTotalMib", "memoryUsedMib", "memoryFreeMib"}) {
        failed(field, "nvmlDeviceGetMemoryInfo_v2", r);
      }
      memory_read = true;  // answered (with an error): do not ask v1 as well
    }
  }
  if (!memory_read) {
    if (lib.get_memory_v1 == nullptr) {
      for (const char* field : {"memoryTotalMib", "memoryUsedMib", "memoryFreeMib"}) {
        note(field, Missing("nvmlDeviceGetMemoryInfo"));
      }
    } else {
      nvml::MemoryV1 memory{};
      r = lib.get_memory_v1(device, &memory);
      if (r == nvml::kSuccess) {
        out.memory_total_mib = Mib(memory.total);
        out.memory_used_mib = Mib(memory.used);
        out.memory_free_mib = Mib(memory.free);
      } else {
        for (const char* field : {"memoryTotalMib", "memoryUsedMib", "memoryFreeMib"}) {
          failed(field, "nvmlDeviceGetMemoryInfo", r);
        }
      }
    }
  }

  if (lib.get_utilization == nullptr) {
    note("utilizationPct", Missing("nvmlDeviceGetUtilizationRates"));
  } else {
    nvml::Utilization utilization{};
    r = lib.get_utilization(device, &utilization);
    if (r == nvml::kSuccess) {
      out.utilization_pct = utilization.gpu;
    } else {
      failed("utilizationPct", "nvmlDeviceGetUtilizationRates", r);
    }
  }

  if (lib.get_energy == nullptr) {
    note("energyCounter", Missing("nvmlDeviceGetTotalEnergyConsumption"));
  } else {
    unsigned long long energy = 0;
    r = lib.get_energy(device, &energy);
    out.energy_counter = r == nvml::kSuccess;
    if (!out.energy_counter) {
      failed("energyCounter", "nvmlDeviceGetTotalEnergyConsumption", r);
    }
  }

  std::optional<double> instant_mw;
  if (lib.get_field_values == nullptr) {
    note("instantPower", Missing("nvmlDeviceGetFieldValues"));
  } else {
    nvml::FieldValue field{};
    field.fieldId = nvml::kFieldPowerInstant;
    field.scopeId = 0;
    r = lib.get_field_values(device, 1, &field);
    double value = 0;
    if (r != nvml::kSuccess) {
      failed("instantPower", "nvmlDeviceGetFieldValues", r);
    } else if (field.nvmlReturn != nvml::kSuccess) {
      failed("instantPower", "nvmlDeviceGetFieldValues(186)", field.nvmlReturn);
    } else if (!nvml::DecodeFieldValue(field, &value)) {
      note("instantPower", "field 186 came back with unknown valueType " +
                               std::to_string(static_cast<int>(field.valueType)));
    } else {
      instant_mw = value;
      out.instant_power = true;
    }
  }

  std::optional<double> usage_mw;
  if (lib.get_power_usage == nullptr) {
    note("powerUsage", Missing("nvmlDeviceGetPowerUsage"));
  } else {
    unsigned int power = 0;
    r = lib.get_power_usage(device, &power);
    if (r == nvml::kSuccess) {
      usage_mw = power;
      out.power_usage = true;
    } else {
      failed("powerUsage", "nvmlDeviceGetPowerUsage", r);
    }
  }
  if (instant_mw) {
    out.power_w = *instant_mw / 1000.0;
  } else if (usage_mw) {
    out.power_w = *usage_mw / 1000.0;
  } else {
    note("powerW", "neither field 186 nor nvmlDeviceGetPowerUsage answered");
  }

  if (lost) {
    return *lost;
  }
  return out;
}

Result<ProcessListData> DeviceReader::ReadProcesses(unsigned int index) const {
  const NvmlLibrary& lib = *library_;
  if (lib.get_processes == nullptr) {
    return Failure(
        Failure::Code::kSymbolNotFound, std::nullopt,
        lib.info().library +
            " exports no nvmlDeviceGetComputeRunningProcesses (_v2, _v3 or unversioned)");
  }
  auto handle = Handle(index);
  if (auto* failure = std::get_if<Failure>(&handle)) {
    return *failure;
  }
  nvml::Device device = std::get<nvml::Device>(handle);
  const size_t entry_size = EntrySize(lib.process_abi());

  // Two-call pattern: ask with room for none to learn the count, then over-allocate because the
  // list can grow between the calls; retry a few times if it grew past the slack.
  ProcessListData out;
  int64_t started = MonotonicNs();
  unsigned int count = 0;
  std::vector<unsigned char> buffer;
  nvml::Return r = lib.get_processes(device, &count, nullptr);
  for (int attempt = 0; r == nvml::kInsufficientSize && attempt < 4; ++attempt) {
    count += 16;
    buffer.assign(static_cast<size_t>(count) * entry_size, 0);
    r = lib.get_processes(device, &count, buffer.data());
  }
  out.t_ns = started + (MonotonicNs() - started) / 2;
  if (r != nvml::kSuccess) {
    return Failure::FromNvml(
        r, "nvmlDeviceGetComputeRunningProcesses on GPU " + std::to_string(index));
  }
  if (buffer.empty()) {
    count = 0;  // SUCCESS with room for none: no processes
  }
  for (unsigned int i = 0; i < count; ++i) {
    RawProcess raw = EntryAt(buffer, entry_size, i);
    ProcessData process;
    process.pid = raw.pid;
    if (raw.used != nvml::kValueNotAvailable) {
      process.used_mib = Mib(raw.used);
    }
    if (lib.get_process_name != nullptr) {
      std::string name(nvml::kProcessNameBufferSize, '\0');
      if (lib.get_process_name(raw.pid, name.data(), nvml::kProcessNameBufferSize) ==
          nvml::kSuccess) {
        name.resize(std::strlen(name.c_str()));
        process.name = std::move(name);
      }
    }
    out.processes.push_back(std::move(process));
  }
  return out;
}

}  // namespace giul
