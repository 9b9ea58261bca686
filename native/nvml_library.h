// libnvidia-ml.so.1 loaded at run time: the symbols giul uses (versioned first, older ones as a
// fallback), initialised once per process and shared by every environment and thread. A load that
// failed is not kept: the next Load() tries again (the driver may have been loaded since).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dl_handle.h"
#include "failure.h"
#include "nvml_types.h"

namespace giul {

class NvmlLibrary {
 public:
  /// Which process-list entry the chosen symbol fills.
  enum class ProcessAbi { kNone, kV1, kV2, kV3, kR535 };

  /// What nvmlInit() reports to JS.
  struct Info {
    std::string library;
    std::optional<std::string> driver_version;
    std::optional<std::string> nvml_version;
    unsigned int device_count = 0;
    /// Feature → symbol serving it (nullopt when the library lacks every candidate).
    std::vector<std::pair<std::string, std::optional<std::string>>> symbols;
  };

  using Outcome = Result<std::shared_ptr<const NvmlLibrary>>;

  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  NvmlLibrary(NvmlLibrary&&) = delete;
  NvmlLibrary& operator=(NvmlLibrary&&) = delete;

  /// Loads and initialises NVML. Once a load has succeeded every call shares its library for the
  /// life of the process; while loads fail, each call tries again (one load at a time: a call that
  /// waited for another's load gets that load's outcome). Blocks while a load runs: call it off
  /// the JS thread.
  static Outcome Load();
  /// The outcome of the last load that finished, if any. Never waits for a load in progress and
  /// makes no NVML call.
  static std::optional<Outcome> Loaded();

  /// "GPU is lost (15)": a name for an nvmlReturn_t that needs no library.
  static std::string DescribeReturn(int nvml_return);

  const Info& info() const { return info_; }
  ProcessAbi process_abi() const { return process_abi_; }

  // The resolved functions; optional ones are nullptr when the library lacks them.
  nvml::GetHandleByIndexFn get_handle = nullptr;
  nvml::GetStringFn get_name = nullptr;
  nvml::GetStringFn get_uuid = nullptr;
  nvml::GetEnergyFn get_energy = nullptr;
  nvml::GetPowerUsageFn get_power_usage = nullptr;
  nvml::GetPowerUsageFn get_power_limit = nullptr;
  nvml::GetFieldValuesFn get_field_values = nullptr;
  nvml::GetMemoryInfoFn get_memory_v2 = nullptr;
  nvml::GetMemoryInfoFn get_memory_v1 = nullptr;
  nvml::GetUtilizationFn get_utilization = nullptr;
  nvml::GetProcessesFn get_processes = nullptr;
  nvml::SystemGetProcessNameFn get_process_name = nullptr;
  // MIG: all present, or get_mig_mode is nullptr (a driver older than R450).
  nvml::GetMigModeFn get_mig_mode = nullptr;
  nvml::GetUintFn get_max_mig_count = nullptr;
  nvml::GetMigHandleFn get_mig_handle = nullptr;
  nvml::GetUintFn get_gpu_instance_id = nullptr;
  nvml::GetUintFn get_compute_instance_id = nullptr;
  nvml::GetAttributesFn get_attributes = nullptr;

 private:
  explicit NvmlLibrary(std::string path);
  static Outcome LoadOnce();
  void* Resolve(const char* feature, std::initializer_list<const char*> candidates);
  void ChooseProcessAbi();

  DlHandle handle_;
  Info info_;
  ProcessAbi process_abi_ = ProcessAbi::kNone;
  nvml::ShutdownFn shutdown_ = nullptr;
  bool initialised_ = false;
};

}  // namespace giul
