// Our own declarations of the few AMD SMI types and functions giul uses (no amdsmi.h at build
// time), as AMD SMI 26.x (ROCm 7, libamd_smi.so.26) lays them out on LP64. Earlier majors (24, 25:
// ROCm 6) lay amdsmi_power_info_t and amdsmi_proc_info_t out otherwise: AmdSmiLibrary refuses them.
#pragma once

#include <cstdint>

namespace giul::amdsmi {

using Status = int;    // amdsmi_status_t
using Handle = void*;  // amdsmi_processor_handle, amdsmi_socket_handle

inline constexpr Status kSuccess = 0;
inline constexpr Status kInval = 1;
inline constexpr Status kNotSupported = 2;
inline constexpr Status kNotYetImplemented = 3;
inline constexpr Status kNoPerm = 10;
inline constexpr Status kNotFound = 31;
inline constexpr Status kNotInit = 32;
inline constexpr Status kDriverNotLoaded = 34;
inline constexpr Status kNoData = 40;

/// AMDSMI_INIT_AMD_GPUS.
inline constexpr uint64_t kInitAmdGpus = 1u << 1;
/// The major version whose layouts these are.
inline constexpr uint32_t kMajor = 26;
/// A field the card does not report reads as its type's maximum.
inline constexpr uint32_t kUnsupported32 = 0xFFFFFFFFu;
/// The energy accumulator's unit: 2^-16 J (the kernel's gpu_metrics), 15.2587890625 µJ.
inline constexpr double kCounterUnitUj = 1e6 / 65536.0;
inline constexpr unsigned int kUuidSize = 38;
inline constexpr unsigned int kStringLength = 256;

/// amdsmi_version_t of 26.x: {major, minor, release, build}. (24.x began with a year, 24.)
struct Version {
  uint32_t major;
  uint32_t minor;
  uint32_t release;
  const char* build;
};

/// amdsmi_power_info_t of 26.x (W; unsupported fields read kUnsupported32).
struct PowerInfo {
  uint64_t socket_power;
  uint32_t current_socket_power;
  uint32_t average_socket_power;
  uint64_t gfx_voltage;
  uint64_t soc_voltage;
  uint64_t mem_voltage;
  uint32_t power_limit;
  uint64_t reserved[18];
};

/// amdsmi_vram_usage_t (MB).
struct VramUsage {
  uint32_t vram_total;
  uint32_t vram_used;
  uint32_t reserved[2];
};

/// amdsmi_proc_info_t of 26.x.
struct ProcInfo {
  char name[kStringLength];
  uint32_t pid;
  uint64_t mem;
  struct {
    uint64_t gfx;
    uint64_t enc;
    uint32_t reserved[12];
  } engine_usage;
  struct {
    uint64_t gtt_mem;
    uint64_t cpu_mem;
    uint64_t vram_mem;
    uint32_t reserved[10];
  } memory_usage;
  char container_name[kStringLength];
  uint32_t cu_occupancy;
  uint32_t evicted_time;
  uint32_t reserved[10];
};

static_assert(sizeof(PowerInfo) == 192, "amdsmi_power_info_t (26.x)");
static_assert(sizeof(ProcInfo) == 704, "amdsmi_proc_info_t (26.x)");
static_assert(sizeof(Version) == 24, "amdsmi_version_t (26.x)");

/// amdsmi_get_gpu_asic_info fills a struct that begins with market_name[256]; the rest is not
/// read, and the buffer handed to it is far larger than the struct.
inline constexpr unsigned int kAsicInfoBuffer = 4096;

using InitFn = Status (*)(uint64_t);
using ShutDownFn = Status (*)();
using GetLibVersionFn = Status (*)(void*);
using GetSocketHandlesFn = Status (*)(uint32_t*, Handle*);
using GetProcessorHandlesFn = Status (*)(Handle, uint32_t*, Handle*);
using GetUuidFn = Status (*)(Handle, unsigned int*, char*);
using GetAsicInfoFn = Status (*)(Handle, void*);
using GetVramUsageFn = Status (*)(Handle, VramUsage*);
using GetEnergyCountFn = Status (*)(Handle, uint64_t*, float*, uint64_t*);
using GetPowerInfoFn = Status (*)(Handle, PowerInfo*);
using GetProcessListFn = Status (*)(Handle, uint32_t*, ProcInfo*);

}  // namespace giul::amdsmi
