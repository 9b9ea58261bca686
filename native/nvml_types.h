// Our own declarations of the few NVML types, structs and functions giul uses (no nvml.h at build
// time). Layouts are x86_64/aarch64 LP64, as in the NVML header; see shared nvml-facts.md §1.
#pragma once

#include <cstdint>

namespace giul::nvml {

using Return = int;                   // nvmlReturn_t
using Device = struct DeviceOpaque*;  // nvmlDevice_t

inline constexpr Return kSuccess = 0;
inline constexpr Return kUninitialized = 1;
inline constexpr Return kInvalidArgument = 2;
inline constexpr Return kNotSupported = 3;
inline constexpr Return kNoPermission = 4;
inline constexpr Return kNotFound = 6;
inline constexpr Return kInsufficientSize = 7;
inline constexpr Return kDriverNotLoaded = 9;
inline constexpr Return kFunctionNotFound = 13;
inline constexpr Return kGpuIsLost = 15;
inline constexpr Return kResetRequired = 16;
inline constexpr Return kArgumentVersionMismatch = 25;

/// NVML_VALUE_NOT_AVAILABLE as an unsigned long long.
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;

/// NVML_FI_DEV_POWER_INSTANT: current GPU power in mW (scopeId 0 = GPU).
inline constexpr unsigned int kFieldPowerInstant = 186;

inline constexpr unsigned int kNameBufferSize = 96;
inline constexpr unsigned int kUuidBufferSize = 96;
inline constexpr unsigned int kDriverVersionBufferSize = 80;
inline constexpr unsigned int kProcessNameBufferSize = 1024;

enum class ValueType : int {
  kDouble = 0,
  kUnsignedInt = 1,
  kUnsignedLong = 2,
  kUnsignedLongLong = 3,
  kSignedLongLong = 4,
  kSignedInt = 5,
  kUnsignedShort = 6,
};

struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};

struct MemoryV1 {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct MemoryV2 {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
/// NVML_STRUCT_VERSION(Memory, 2) = sizeof(nvmlMemory_v2_t) | 2 << 24.
inline constexpr unsigned int kMemoryV2Version = 0x02000028;

struct ProcessInfoV1 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

struct ProcessInfoV2 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

/// The `_v3` entry of the 535.43.02–535.86.05 headers only (no version bump).
struct ProcessInfoR535 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
};

union Value {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
};

struct FieldValue {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  ValueType valueType;
  Return nvmlReturn;
  Value value;
};

/// nvmlDeviceAttributes_t (nvmlDeviceGetAttributes_v2): a MIG device's share of its card.
struct DeviceAttributes {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};

/// NVML_DEVICE_MIG_ENABLE; gpuInstanceId of a process when MIG is off.
inline constexpr unsigned int kMigEnabled = 1;
inline constexpr unsigned int kNoInstance = 0xFFFFFFFFu;

static_assert(sizeof(DeviceAttributes) == 40);
static_assert(sizeof(MemoryV1) == 24);
static_assert(sizeof(MemoryV2) == 40);
static_assert(sizeof(ProcessInfoV1) == 16);
static_assert(sizeof(ProcessInfoV2) == 24);
static_assert(sizeof(ProcessInfoR535) == 32);
static_assert(sizeof(FieldValue) == 40);

using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using GetCountFn = Return (*)(unsigned int*);
using GetHandleByIndexFn = Return (*)(unsigned int, Device*);
using GetStringFn = Return (*)(Device, char*, unsigned int);
using GetEnergyFn = Return (*)(Device, unsigned long long*);
using GetPowerUsageFn = Return (*)(Device, unsigned int*);
using GetFieldValuesFn = Return (*)(Device, int, FieldValue*);
using GetMemoryInfoFn = Return (*)(Device, void*);
using GetUtilizationFn = Return (*)(Device, Utilization*);
using GetProcessesFn = Return (*)(Device, unsigned int*, void*);
using SystemGetProcessNameFn = Return (*)(unsigned int, char*, unsigned int);
using SystemGetStringFn = Return (*)(char*, unsigned int);
// MIG (Ampere and newer): a card in MIG mode and its MIG devices (slices).
using GetMigModeFn = Return (*)(Device, unsigned int*, unsigned int*);
using GetUintFn = Return (*)(Device, unsigned int*);
using GetMigHandleFn = Return (*)(Device, unsigned int, Device*);
using GetAttributesFn = Return (*)(Device, struct DeviceAttributes*);

/// Decodes a field value by its valueType; false for a type we do not know.
inline bool DecodeFieldValue(const FieldValue& field, double* out) {
  switch (field.valueType) {
    case ValueType::kDouble:
      *out = field.value.dVal;
      return true;
    case ValueType::kUnsignedInt:
      *out = field.value.uiVal;
      return true;
    case ValueType::kUnsignedLong:
      *out = static_cast<double>(field.value.ulVal);
      return true;
    case ValueType::kUnsignedLongLong:
      *out = static_cast<double>(field.value.ullVal);
      return true;
    case ValueType::kSignedLongLong:
      *out = static_cast<double>(field.value.sllVal);
      return true;
    case ValueType::kSignedInt:
      *out = field.value.siVal;
      return true;
    case ValueType::kUnsignedShort:
      *out = field.value.usVal;
      return true;
  }
  return false;
}

}  // namespace giul::nvml
