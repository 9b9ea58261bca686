#include "amdsmi_library.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "shared_load.h"

namespace giul {
namespace {

/// Where libamd_smi is looked for when GIUL_AMDSMI_LIBRARY is unset: the 26.x soname first.
constexpr std::array<const char*, 4> kCandidates = {"libamd_smi.so.26",
                                                    "/opt/rocm/lib/libamd_smi.so.26",
                                                    "libamd_smi.so", "/opt/rocm/lib/libamd_smi.so"};

const char* StatusName(int status) {
  switch (status) {
    case 0:
      return "success";
    case 1:
      return "invalid parameters";
    case 2:
      return "not supported";
    case 3:
      return "not yet implemented";
    case 4:
      return "failed to load module";
    case 6:
      return "libdrm error";
    case 7:
      return "API call failed";
    case 8:
      return "timeout";
    case 9:
      return "retry";
    case 10:
      return "permission denied";
    case 12:
      return "I/O error";
    case 18:
      return "init error";
    case 30:
      return "processor busy";
    case 31:
      return "processor not found";
    case 32:
      return "processor not initialised";
    case 34:
      return "driver not loaded";
    case 40:
      return "no data";
    default:
      return "error";
  }
}

SharedLoad<AmdSmiLibrary>& State() {
  static auto* state = new SharedLoad<AmdSmiLibrary>();
  return *state;
}

Failure AmdFailure(Failure::Code code, std::optional<int> status, std::string reason) {
  return Failure(code, status, std::move(reason), Failure::Vendor::kAmd);
}

}  // namespace

AmdSmiLibrary::AmdSmiLibrary(std::string path) : handle_(path) { info_.library = std::move(path); }

AmdSmiLibrary::~AmdSmiLibrary() {
  if (initialised_ && shut_down_ != nullptr) {
    shut_down_();
  }
}

std::string AmdSmiLibrary::DescribeStatus(int status) {
  return std::string(StatusName(status)) + " (" + std::to_string(status) + ")";
}

AmdSmiLibrary::Outcome AmdSmiLibrary::LoadOnce() {
  const char* named = std::getenv("GIUL_AMDSMI_LIBRARY");
  if (named != nullptr && *named != '\0') {
    return LoadFrom(named, true);
  }
  std::string tried;
  for (const char* path : kCandidates) {
    Outcome outcome = LoadFrom(path, false);
    const auto* failure = std::get_if<Failure>(&outcome);
    if (failure == nullptr || failure->code() != Failure::Code::kLibraryNotFound) {
      return outcome;
    }
    tried += tried.empty() ? path : std::string(", ") + path;
  }
  return AmdFailure(Failure::Code::kLibraryNotFound, std::nullopt,
                    "libamd_smi was not found (tried " + tried +
                        "). Install ROCm 7's amd-smi-lib, or set "
                        "GIUL_AMDSMI_LIBRARY=/path/to/libamd_smi.so.26.");
}

AmdSmiLibrary::Outcome AmdSmiLibrary::LoadFrom(const std::string& path, bool named) {
  std::shared_ptr<AmdSmiLibrary> lib(new AmdSmiLibrary(path));
  if (!lib->handle_.valid()) {
    std::string reason = "dlopen(\"" + path + "\") failed: " + lib->handle_.error();
    if (named) {
      reason += ". GIUL_AMDSMI_LIBRARY names a library that cannot be loaded; fix or unset it.";
    }
    return AmdFailure(Failure::Code::kLibraryNotFound, std::nullopt, std::move(reason));
  }
  const DlHandle& h = lib->handle_;
  auto init = reinterpret_cast<amdsmi::InitFn>(h.Symbol("amdsmi_init"));
  auto version = reinterpret_cast<amdsmi::GetLibVersionFn>(h.Symbol("amdsmi_get_lib_version"));
  auto sockets =
      reinterpret_cast<amdsmi::GetSocketHandlesFn>(h.Symbol("amdsmi_get_socket_handles"));
  auto processors =
      reinterpret_cast<amdsmi::GetProcessorHandlesFn>(h.Symbol("amdsmi_get_processor_handles"));
  if (init == nullptr || version == nullptr || sockets == nullptr || processors == nullptr) {
    return AmdFailure(Failure::Code::kSymbolNotFound, std::nullopt,
                      path +
                          " lacks amdsmi_init, amdsmi_get_lib_version or the handle calls: it "
                          "is not a usable AMD SMI library.");
  }
  // The version struct's first word is the library's major (26) in 26.x and its year (24) before:
  // either way the number of its soname. Read into a buffer larger than any of its layouts.
  std::array<uint32_t, 16> words{};
  amdsmi::Status r = version(words.data());
  if (r != amdsmi::kSuccess) {
    return AmdFailure(Failure::Code::kInitFailed, r,
                      "amdsmi_get_lib_version returned " + DescribeStatus(r) + " from " + path);
  }
  lib->info_.version =
      std::to_string(words[0]) + "." + std::to_string(words[1]) + "." + std::to_string(words[2]);
  if (words[0] != amdsmi::kMajor) {
    return AmdFailure(Failure::Code::kVersionRefused, std::nullopt,
                      path + " is AMD SMI " + lib->info_.version +
                          ", whose structs giul does not read (it reads AMD SMI 26.x, ROCm 7): "
                          "install ROCm 7's amd-smi-lib, or let giul read the amd-smi tool.");
  }
  lib->shut_down_ = reinterpret_cast<amdsmi::ShutDownFn>(h.Symbol("amdsmi_shut_down"));
  r = init(amdsmi::kInitAmdGpus);
  if (r != amdsmi::kSuccess) {
    std::string reason = "amdsmi_init returned " + DescribeStatus(r) + " from " + path + ".";
    if (r == amdsmi::kDriverNotLoaded) {
      reason += " The amdgpu kernel driver is not running (modprobe amdgpu; check amd-smi).";
    } else if (r == amdsmi::kNoPerm) {
      reason += " The process may not open /dev/kfd or /dev/dri: check its groups (render, video).";
    }
    return AmdFailure(r == amdsmi::kDriverNotLoaded ? Failure::Code::kDriverNotLoaded
                                                    : Failure::Code::kInitFailed,
                      r, std::move(reason));
  }
  lib->initialised_ = true;

  uint32_t socket_count = 0;
  r = sockets(&socket_count, nullptr);
  std::vector<amdsmi::Handle> socket_handles(socket_count);
  if (r == amdsmi::kSuccess && socket_count > 0) {
    r = sockets(&socket_count, socket_handles.data());
    socket_handles.resize(socket_count);
  }
  for (amdsmi::Handle socket : socket_handles) {
    uint32_t count = 0;
    if (r != amdsmi::kSuccess || (r = processors(socket, &count, nullptr)) != amdsmi::kSuccess) {
      break;
    }
    std::vector<amdsmi::Handle> found(count);
    if (count > 0 && (r = processors(socket, &count, found.data())) != amdsmi::kSuccess) {
      break;
    }
    found.resize(count);
    lib->sockets_.insert(
        lib->sockets_.end(), found.size(),
        static_cast<unsigned int>(lib->sockets_.empty() ? 0 : lib->sockets_.back() + 1));
    lib->handles_.insert(lib->handles_.end(), found.begin(), found.end());
  }
  if (r != amdsmi::kSuccess) {
    return AmdFailure(Failure::Code::kCallFailed, r,
                      "listing AMD GPUs returned " + DescribeStatus(r) + " from " + path);
  }
  lib->info_.device_count = static_cast<unsigned int>(lib->handles_.size());

  lib->get_uuid = reinterpret_cast<amdsmi::GetUuidFn>(h.Symbol("amdsmi_get_gpu_device_uuid"));
  lib->get_asic_info =
      reinterpret_cast<amdsmi::GetAsicInfoFn>(h.Symbol("amdsmi_get_gpu_asic_info"));
  lib->get_vram_usage =
      reinterpret_cast<amdsmi::GetVramUsageFn>(h.Symbol("amdsmi_get_gpu_vram_usage"));
  lib->get_energy = reinterpret_cast<amdsmi::GetEnergyCountFn>(h.Symbol("amdsmi_get_energy_count"));
  lib->get_power_info = reinterpret_cast<amdsmi::GetPowerInfoFn>(h.Symbol("amdsmi_get_power_info"));
  lib->get_process_list =
      reinterpret_cast<amdsmi::GetProcessListFn>(h.Symbol("amdsmi_get_gpu_process_list"));
  return std::shared_ptr<const AmdSmiLibrary>(std::move(lib));
}

AmdSmiLibrary::Outcome AmdSmiLibrary::Load() { return State().Load(LoadOnce); }

std::optional<AmdSmiLibrary::Outcome> AmdSmiLibrary::Loaded() { return State().Loaded(); }

/// mJ per count of an accumulator whose library reports `resolution_uj`: the exact 2^-16 J where
/// it reports the rounded 15.3 µJ (accumulator × 15.3 overstates energy by 0.27 %), its own
/// figure where a card reports another unit.
double AmdMjPerCount(float resolution_uj) {
  const double exact = amdsmi::kCounterUnitUj;
  if (!(resolution_uj > 0) || std::fabs(resolution_uj - exact) <= 0.01 * exact) {
    return exact / 1000.0;
  }
  return static_cast<double>(resolution_uj) / 1000.0;
}

}  // namespace giul
