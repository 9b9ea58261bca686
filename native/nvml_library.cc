#include "nvml_library.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "shared_load.h"

namespace giul {
namespace {

constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

const char* ReturnName(int nvml_return) {
  switch (nvml_return) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 5:
      return "Already Initialized";
    case 6:
      return "Not Found";
    case 7:
      return "Insufficient Size";
    case 8:
      return "Insufficient External Power";
    case 9:
      return "Driver Not Loaded";
    case 10:
      return "Timeout";
    case 11:
      return "Interrupt Request Issue";
    case 12:
      return "NVML Shared Library Not Found";
    case 13:
      return "Function Not Found";
    case 14:
      return "Corrupted infoROM";
    case 15:
      return "GPU is lost";
    case 16:
      return "GPU requires reset";
    case 17:
      return "The operating system has blocked the request";
    case 18:
      return "Driver/library version mismatch";
    case 19:
      return "In use";
    case 20:
      return "Insufficient Memory";
    case 21:
      return "No data";
    case 25:
      return "Argument version mismatch";
    case 26:
      return "Deprecated";
    case 27:
      return "Not ready";
    case 28:
      return "GPU not found";
    case 29:
      return "Invalid state";
    case 999:
      return "Unknown Error";
    default:
      return "error";
  }
}

// "535.54.03" → {535, 54}; {0, 0} when it does not parse.
std::pair<int, int> MajorMinor(const std::string& version) {
  int major = 0;
  int minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) {
    return {0, 0};
  }
  return {major, minor};
}

std::optional<std::string> ReadSystemString(void* symbol, unsigned int size) {
  if (symbol == nullptr) {
    return std::nullopt;
  }
  std::string buffer(size, '\0');
  auto fn = reinterpret_cast<nvml::SystemGetStringFn>(symbol);
  if (fn(buffer.data(), size) != nvml::kSuccess) {
    return std::nullopt;
  }
  buffer.resize(buffer.find('\0') == std::string::npos ? size : buffer.find('\0'));
  return buffer;
}

SharedLoad<NvmlLibrary>& State() {
  static auto* state = new SharedLoad<NvmlLibrary>();
  return *state;
}

}  // namespace

NvmlLibrary::NvmlLibrary(std::string path) : handle_(path) { info_.library = std::move(path); }

NvmlLibrary::~NvmlLibrary() {
  if (initialised_ && shutdown_ != nullptr) {
    shutdown_();
  }
}

std::string NvmlLibrary::DescribeReturn(int nvml_return) {
  return std::string(ReturnName(nvml_return)) + " (" + std::to_string(nvml_return) + ")";
}

void* NvmlLibrary::Resolve(const char* feature, std::initializer_list<const char*> candidates) {
  for (const char* name : candidates) {
    if (void* symbol = handle_.Symbol(name)) {
      if (feature != nullptr) {
        info_.symbols.emplace_back(feature, name);
      }
      return symbol;
    }
  }
  if (feature != nullptr) {
    info_.symbols.emplace_back(feature, std::nullopt);
  }
  return nullptr;
}

void NvmlLibrary::ChooseProcessAbi() {
  // _v2 (24-byte entries) is exported from 450.66 on and never changed shape; _v3 had a 32-byte
  // entry in the 535.43–535.86 headers with no version bump; v1 has 16-byte entries.
  if (void* v2 = handle_.Symbol("nvmlDeviceGetComputeRunningProcesses_v2")) {
    get_processes = reinterpret_cast<nvml::GetProcessesFn>(v2);
    process_abi_ = ProcessAbi::kV2;
    info_.symbols.emplace_back("processes", "nvmlDeviceGetComputeRunningProcesses_v2");
    return;
  }
  if (void* v3 = handle_.Symbol("nvmlDeviceGetComputeRunningProcesses_v3")) {
    get_processes = reinterpret_cast<nvml::GetProcessesFn>(v3);
    auto [major, minor] = MajorMinor(info_.driver_version.value_or(""));
    process_abi_ =
        (major == 535 && minor >= 43 && minor <= 86) ? ProcessAbi::kR535 : ProcessAbi::kV3;
    info_.symbols.emplace_back("processes", "nvmlDeviceGetComputeRunningProcesses_v3");
    return;
  }
  if (void* v1 = handle_.Symbol("nvmlDeviceGetComputeRunningProcesses")) {
    get_processes = reinterpret_cast<nvml::GetProcessesFn>(v1);
    process_abi_ = ProcessAbi::kV1;
    info_.symbols.emplace_back("processes", "nvmlDeviceGetComputeRunningProcesses");
    return;
  }
  info_.symbols.emplace_back("processes", std::nullopt);
}

namespace {

/// The MIG calls (R450 and newer): all of them, or none (get_mig_mode left nullptr).
void ResolveMig(NvmlLibrary& lib, const DlHandle& handle) {
  auto mode = reinterpret_cast<nvml::GetMigModeFn>(handle.Symbol("nvmlDeviceGetMigMode"));
  auto max_count =
      reinterpret_cast<nvml::GetUintFn>(handle.Symbol("nvmlDeviceGetMaxMigDeviceCount"));
  auto by_index =
      reinterpret_cast<nvml::GetMigHandleFn>(handle.Symbol("nvmlDeviceGetMigDeviceHandleByIndex"));
  auto gi = reinterpret_cast<nvml::GetUintFn>(handle.Symbol("nvmlDeviceGetGpuInstanceId"));
  auto ci = reinterpret_cast<nvml::GetUintFn>(handle.Symbol("nvmlDeviceGetComputeInstanceId"));
  auto attributes =
      reinterpret_cast<nvml::GetAttributesFn>(handle.Symbol("nvmlDeviceGetAttributes_v2"));
  if (mode == nullptr || max_count == nullptr || by_index == nullptr || gi == nullptr ||
      ci == nullptr || attributes == nullptr) {
    return;
  }
  lib.get_mig_mode = mode;
  lib.get_max_mig_count = max_count;
  lib.get_mig_handle = by_index;
  lib.get_gpu_instance_id = gi;
  lib.get_compute_instance_id = ci;
  lib.get_attributes = attributes;
}

}  // namespace

NvmlLibrary::Outcome NvmlLibrary::LoadOnce() {
  const char* override_path = std::getenv("GIUL_NVML_LIBRARY");
  std::string path =
      (override_path != nullptr && *override_path != '\0') ? override_path : kDefaultLibrary;
  std::shared_ptr<NvmlLibrary> lib(new NvmlLibrary(path));
  if (!lib->handle_.valid()) {
    std::string reason = "dlopen(\"" + path + "\") failed: " + lib->handle_.error() + ". ";
    if (override_path != nullptr && *override_path != '\0') {
      reason += "GIUL_NVML_LIBRARY names a library that cannot be loaded; fix or unset it.";
    } else {
      reason +=
          "Install the NVIDIA driver (it ships libnvidia-ml.so.1), put its folder on the loader "
          "path (ldconfig or LD_LIBRARY_PATH), or set "
          "GIUL_NVML_LIBRARY=/path/to/libnvidia-ml.so.1.";
    }
    return Failure(Failure::Code::kLibraryNotFound, std::nullopt, std::move(reason));
  }

  auto init = reinterpret_cast<nvml::InitFn>(lib->Resolve("init", {"nvmlInit_v2", "nvmlInit"}));
  auto count = reinterpret_cast<nvml::GetCountFn>(
      lib->Resolve("count", {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}));
  lib->get_handle = reinterpret_cast<nvml::GetHandleByIndexFn>(
      lib->Resolve("handle", {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}));
  const auto& symbols = lib->info_.symbols;
  auto missing = std::ranges::find_if(symbols, [](const auto& entry) { return !entry.second; });
  if (missing != symbols.end()) {
    return Failure(Failure::Code::kSymbolNotFound, std::nullopt,
                   path + " has no symbol for '" + missing->first +
                       "' (tried the _v2 and unversioned names): it is not a usable NVML library. "
                       "Point GIUL_NVML_LIBRARY at the driver's libnvidia-ml.so.1.");
  }
  lib->shutdown_ = reinterpret_cast<nvml::ShutdownFn>(lib->handle_.Symbol("nvmlShutdown"));

  const std::string init_name = *lib->info_.symbols.front().second;
  nvml::Return r = init();
  if (r == nvml::kDriverNotLoaded) {
    return Failure(Failure::Code::kDriverNotLoaded, r,
                   init_name + " returned Driver Not Loaded (9): " + path +
                       " was found but the NVIDIA kernel driver is not running. Load it "
                       "(modprobe nvidia, or reboot after installing the driver) and check that "
                       "nvidia-smi works.");
  }
  if (r != nvml::kSuccess) {
    std::string reason = init_name + " returned " + DescribeReturn(r) + " from " + path + ".";
    if (r == 18) {
      reason +=
          " The user-space library and the kernel driver differ: reboot, or reinstall the driver.";
    } else if (r == nvml::kNoPermission) {
      reason +=
          " The process may not open /dev/nvidia*: check the device permissions or container "
          "flags.";
    } else {
      reason += " Check that nvidia-smi works.";
    }
    auto code = (r == nvml::kGpuIsLost || r == nvml::kResetRequired) ? Failure::Code::kGpuLost
                                                                     : Failure::Code::kInitFailed;
    return Failure(code, r, std::move(reason));
  }
  lib->initialised_ = true;

  unsigned int device_count = 0;
  r = count(&device_count);
  if (r != nvml::kSuccess) {
    return Failure::FromNvml(r, *lib->info_.symbols[1].second);
  }
  lib->info_.device_count = device_count;

  lib->get_name = reinterpret_cast<nvml::GetStringFn>(lib->Resolve("name", {"nvmlDeviceGetName"}));
  lib->get_uuid = reinterpret_cast<nvml::GetStringFn>(lib->Resolve("uuid", {"nvmlDeviceGetUUID"}));
  lib->get_energy = reinterpret_cast<nvml::GetEnergyFn>(
      lib->Resolve("energy", {"nvmlDeviceGetTotalEnergyConsumption"}));
  lib->get_power_usage =
      reinterpret_cast<nvml::GetPowerUsageFn>(lib->Resolve("power", {"nvmlDeviceGetPowerUsage"}));
  // The limit the card enforces (mW): the least of every limiter; the software one otherwise.
  lib->get_power_limit = reinterpret_cast<nvml::GetPowerUsageFn>(lib->Resolve(
      "powerLimit", {"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"}));
  lib->get_field_values = reinterpret_cast<nvml::GetFieldValuesFn>(
      lib->Resolve("fieldValues", {"nvmlDeviceGetFieldValues"}));
  lib->get_memory_v2 =
      reinterpret_cast<nvml::GetMemoryInfoFn>(lib->handle_.Symbol("nvmlDeviceGetMemoryInfo_v2"));
  lib->get_memory_v1 =
      reinterpret_cast<nvml::GetMemoryInfoFn>(lib->handle_.Symbol("nvmlDeviceGetMemoryInfo"));
  lib->info_.symbols.emplace_back(
      "memory",
      lib->get_memory_v2 != nullptr   ? std::optional<std::string>("nvmlDeviceGetMemoryInfo_v2")
      : lib->get_memory_v1 != nullptr ? std::optional<std::string>("nvmlDeviceGetMemoryInfo")
                                      : std::nullopt);
  lib->get_utilization = reinterpret_cast<nvml::GetUtilizationFn>(
      lib->Resolve("utilization", {"nvmlDeviceGetUtilizationRates"}));

  void* driver_version = lib->handle_.Symbol("nvmlSystemGetDriverVersion");
  lib->info_.driver_version = ReadSystemString(driver_version, nvml::kDriverVersionBufferSize);
  lib->info_.nvml_version = ReadSystemString(lib->handle_.Symbol("nvmlSystemGetNVMLVersion"),
                                             nvml::kDriverVersionBufferSize);

  lib->ChooseProcessAbi();
  lib->get_process_name = reinterpret_cast<nvml::SystemGetProcessNameFn>(
      lib->Resolve("processName", {"nvmlSystemGetProcessName"}));
  ResolveMig(*lib, lib->handle_);
  lib->info_.symbols.emplace_back("driverVersion",
                                  driver_version != nullptr
                                      ? std::optional<std::string>("nvmlSystemGetDriverVersion")
                                      : std::nullopt);
  return std::shared_ptr<const NvmlLibrary>(std::move(lib));
}

NvmlLibrary::Outcome NvmlLibrary::Load() {
  // No std::call_once: it would keep a failure for the life of the process, and a driver loaded
  // after start-up would never be seen.
  return State().Load(LoadOnce);
}

std::optional<NvmlLibrary::Outcome> NvmlLibrary::Loaded() { return State().Loaded(); }

}  // namespace giul
