#include "device_reader.h"

#include <cmath>
#include <cstring>
#include <span>
#include <string>

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
  unsigned int gpu_instance_id;
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
  // Every ABI starts with {unsigned int pid; unsigned long long usedGpuMemory at offset 8}; v2
  // and later have gpuInstanceId at 16.
  RawProcess out{};
  out.gpu_instance_id = nvml::kNoInstance;
  std::memcpy(&out.pid, buffer.data() + i * entry_size, sizeof(out.pid));
  std::memcpy(&out.used, buffer.data() + i * entry_size + 8, sizeof(out.used));
  if (entry_size >= sizeof(nvml::ProcessInfoV2)) {
    std::memcpy(&out.gpu_instance_id, buffer.data() + i * entry_size + 16,
                sizeof(out.gpu_instance_id));
  }
  return out;
}

// ---- ReadInfo's table ----------------------------------------------------------------------

/// What the reads fill: the contract's fields, and the two power readings powerW is chosen from.
struct InfoReadings {
  DeviceInfoData info;
  std::optional<double> instant_mw;
  std::optional<double> usage_mw;
};

/// How one read ended: answered (its fields are set), failed (in the row's symbol unless another
/// call is named), or neither, with a note saying why its fields stay empty.
struct Outcome {
  enum class Kind { kAnswered, kFailed, kNote };
  Kind kind = Kind::kAnswered;
  nvml::Return r = nvml::kSuccess;
  const char* call = nullptr;
  std::string note;
};

Outcome Answered() { return {}; }
Outcome FailedWith(nvml::Return r, const char* call = nullptr) {
  return {Outcome::Kind::kFailed, r, call, {}};
}
Outcome NoteThat(std::string why) {
  return {Outcome::Kind::kNote, nvml::kSuccess, nullptr, std::move(why)};
}

/// One row of ReadInfo: the fields it fills (their keys in `notes`), the symbol it calls (named
/// in the note when the library lacks it or the call fails), whether the library has it, and the
/// read, which calls NVML and on success sets the fields.
struct InfoRead {
  std::span<const char* const> fields;
  const char* symbol;
  bool (*present)(const NvmlLibrary& lib);
  Outcome (*read)(const NvmlLibrary& lib, nvml::Device device, InfoReadings& out);
};

Outcome ReadName(const NvmlLibrary& lib, nvml::Device device, InfoReadings& out) {
  nvml::Return r = nvml::kSuccess;
  out.info.name = ReadString(lib.get_name, device, nvml::kNameBufferSize, &r);
  return out.info.name ? Answered() : FailedWith(r);
}

Outcome ReadUuid(const NvmlLibrary& lib, nvml::Device device, InfoReadings& out) {
  nvml::Return r = nvml::kSuccess;
  out.info.uuid = ReadString(lib.get_uuid, device, nvml::kUuidBufferSize, &r);
  return out.info.uuid ? Answered() : FailedWith(r);
}

template <typename Memory>
void SetMemory(const Memory& memory, DeviceInfoData& info) {
  info.memory_total_mib = Mib(memory.total);
  info.memory_used_mib = Mib(memory.used);
  info.memory_free_mib = Mib(memory.free);
}

Outcome ReadMemory(const NvmlLibrary& lib, nvml::Device device, InfoReadings& out) {
  // _v2 (whose `used` excludes reserved memory) first, v1 when the driver refuses _v2.
  if (lib.get_memory_v2 != nullptr) {
    nvml::MemoryV2 memory{};
    memory.version = nvml::kMemoryV2Version;
    nvml::Return r = lib.get_memory_v2(device, &memory);
    if (r == nvml::kSuccess) {
      SetMemory(memory, out.info);
      return Answered();
    }
    if (lib.get_memory_v1 == nullptr ||
        (r != nvml::kFunctionNotFound && r != nvml::kArgumentVersionMismatch &&
         r != nvml::kInvalidArgument)) {
      return FailedWith(r, "nvmlDeviceGetMemoryInfo_v2");  // answered: do not ask v1 as well
    }
  }
  nvml::MemoryV1 memory{};
  nvml::Return r = lib.get_memory_v1(device, &memory);
  if (r != nvml::kSuccess) {
    return FailedWith(r);
  }
  SetMemory(memory, out.info);
  return Answered();
}

Outcome ReadUtilization(const NvmlLibrary& lib, nvml::Device device, InfoReadings& out) {
  nvml::Utilization utilization{};
  nvml::Return r = lib.get_utilization(device, &utilization);
  if (r != nvml::kSuccess) {
    return FailedWith(r);
  }
  out.info.utilization_pct = utilization.gpu;
  return Answered();
}

Outcome ReadEnergyCounter(const NvmlLibrary& lib, nvml::Device device, InfoReadings& out) {
  unsigned long long energy = 0;
  nvml::Return r = lib.get_energy(device, &energy);
  out.info.energy_counter = r == nvml::kSuccess;
  return out.info.energy_counter ? Answered() : FailedWith(r);
}

Outcome ReadInstantPower(const NvmlLibrary& lib, nvml::Device device, InfoReadings& out) {
  nvml::FieldValue field{};
  field.fieldId = nvml::kFieldPowerInstant;
  field.scopeId = 0;
  nvml::Return r = lib.get_field_values(device, 1, &field);
  if (r != nvml::kSuccess) {
    return FailedWith(r);
  }
  if (field.nvmlReturn != nvml::kSuccess) {
    return FailedWith(field.nvmlReturn, "nvmlDeviceGetFieldValues(186)");
  }
  double value = 0;
  if (!nvml::DecodeFieldValue(field, &value)) {
    return NoteThat("field 186 came back with unknown valueType " +
                    std::to_string(static_cast<int>(field.valueType)));
  }
  out.instant_mw = value;
  out.info.instant_power = true;
  return Answered();
}

Outcome ReadPowerUsage(const NvmlLibrary& lib, nvml::Device device, InfoReadings& out) {
  unsigned int power = 0;
  nvml::Return r = lib.get_power_usage(device, &power);
  if (r != nvml::kSuccess) {
    return FailedWith(r);
  }
  out.usage_mw = power;
  out.info.power_usage = true;
  return Answered();
}

Outcome ReadPowerLimit(const NvmlLibrary& lib, nvml::Device device, InfoReadings& out) {
  unsigned int limit = 0;
  nvml::Return r = lib.get_power_limit(device, &limit);
  if (r != nvml::kSuccess) {
    return FailedWith(r);
  }
  if (limit == 0) {
    return NoteThat("the card reports a power limit of 0 mW");
  }
  out.info.power_limit_w = limit / 1000.0;
  return Answered();
}

constexpr const char* kNameField[] = {"name"};
constexpr const char* kUuidField[] = {"uuid"};
constexpr const char* kMemoryFields[] = {"memoryTotalMib", "memoryUsedMib", "memoryFreeMib"};
constexpr const char* kUtilizationField[] = {"utilizationPct"};
constexpr const char* kEnergyCounterField[] = {"energyCounter"};
constexpr const char* kInstantPowerField[] = {"instantPower"};
constexpr const char* kPowerUsageField[] = {"powerUsage"};
constexpr const char* kPowerLimitField[] = {"powerLimitW"};

/// ReadInfo's reads, in the order they are made (and their notes written).
constexpr InfoRead kInfoReads[] = {
    {kNameField, "nvmlDeviceGetName",
     [](const NvmlLibrary& lib) { return lib.get_name != nullptr; }, ReadName},
    {kUuidField, "nvmlDeviceGetUUID",
     [](const NvmlLibrary& lib) { return lib.get_uuid != nullptr; }, ReadUuid},
    {kMemoryFields, "nvmlDeviceGetMemoryInfo",
     [](const NvmlLibrary& lib) {
       return lib.get_memory_v2 != nullptr || lib.get_memory_v1 != nullptr;
     },
     ReadMemory},
    {kUtilizationField, "nvmlDeviceGetUtilizationRates",
     [](const NvmlLibrary& lib) { return lib.get_utilization != nullptr; }, ReadUtilization},
    {kEnergyCounterField, "nvmlDeviceGetTotalEnergyConsumption",
     [](const NvmlLibrary& lib) { return lib.get_energy != nullptr; }, ReadEnergyCounter},
    {kInstantPowerField, "nvmlDeviceGetFieldValues",
     [](const NvmlLibrary& lib) { return lib.get_field_values != nullptr; }, ReadInstantPower},
    {kPowerUsageField, "nvmlDeviceGetPowerUsage",
     [](const NvmlLibrary& lib) { return lib.get_power_usage != nullptr; }, ReadPowerUsage},
    {kPowerLimitField, "nvmlDeviceGetEnforcedPowerLimit",
     [](const NvmlLibrary& lib) { return lib.get_power_limit != nullptr; }, ReadPowerLimit},
};

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
  InfoReadings readings;
  DeviceInfoData& out = readings.info;
  out.index = index;
  std::optional<Failure> lost;
  auto note = [&](std::span<const char* const> fields, const std::string& why) {
    for (const char* field : fields) {
      out.notes.emplace_back(field, why);
    }
  };

  for (const InfoRead& row : kInfoReads) {
    if (!row.present(lib)) {
      note(row.fields, Missing(row.symbol));
      continue;
    }
    Outcome outcome = row.read(lib, device, readings);
    switch (outcome.kind) {
      case Outcome::Kind::kAnswered:
        break;
      case Outcome::Kind::kFailed: {
        const char* call = outcome.call != nullptr ? outcome.call : row.symbol;
        if (IsLost(outcome.r) && !lost) {
          lost =
              Failure::FromNvml(outcome.r, std::string(call) + " on GPU " + std::to_string(index));
        }
        note(row.fields, Failed(call, outcome.r));
        break;
      }
      case Outcome::Kind::kNote:
        note(row.fields, outcome.note);
        break;
    }
  }

  if (readings.instant_mw) {
    out.power_w = *readings.instant_mw / 1000.0;
  } else if (readings.usage_mw) {
    out.power_w = *readings.usage_mw / 1000.0;
  } else {
    out.notes.emplace_back("powerW", "neither field 186 nor nvmlDeviceGetPowerUsage answered");
  }

  if (lost) {
    return *lost;
  }
  return std::move(readings.info);
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
    if (raw.gpu_instance_id != nvml::kNoInstance) {
      process.gpu_instance_id = raw.gpu_instance_id;
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
