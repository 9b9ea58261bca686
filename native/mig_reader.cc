#include "mig_reader.h"

#include <cstring>

namespace giul {
namespace {

std::optional<std::string> ReadString(nvml::GetStringFn fn, nvml::Device device) {
  if (fn == nullptr) {
    return std::nullopt;
  }
  std::string buffer(nvml::kUuidBufferSize, '\0');
  if (fn(device, buffer.data(), nvml::kUuidBufferSize) != nvml::kSuccess) {
    return std::nullopt;
  }
  buffer.resize(std::strlen(buffer.c_str()));
  return buffer;
}

std::optional<unsigned int> ReadUint(nvml::GetUintFn fn, nvml::Device device) {
  unsigned int value = 0;
  if (fn == nullptr || fn(device, &value) != nvml::kSuccess) {
    return std::nullopt;
  }
  return value;
}

/// The slice's memory (MiB): MemoryInfo_v2 where present, else v1.
void ReadMemory(const NvmlLibrary& lib, nvml::Device device, MigSliceData& out) {
  constexpr double kMib = 1024.0 * 1024.0;
  if (lib.get_memory_v2 != nullptr) {
    nvml::MemoryV2 mem{};
    mem.version = nvml::kMemoryV2Version;
    if (lib.get_memory_v2(device, &mem) == nvml::kSuccess) {
      out.memory_total_mib = static_cast<double>(mem.total) / kMib;
      out.memory_used_mib = static_cast<double>(mem.used) / kMib;
      return;
    }
  }
  if (lib.get_memory_v1 != nullptr) {
    nvml::MemoryV1 mem{};
    if (lib.get_memory_v1(device, &mem) == nvml::kSuccess) {
      out.memory_total_mib = static_cast<double>(mem.total) / kMib;
      out.memory_used_mib = static_cast<double>(mem.used) / kMib;
    }
  }
}

}  // namespace

Result<MigData> ReadMig(const std::shared_ptr<const NvmlLibrary>& library, unsigned int index) {
  const NvmlLibrary& lib = *library;
  MigData out;
  out.index = index;
  if (index >= lib.info().device_count) {
    return Failure(Failure::Code::kDeviceNotFound, std::nullopt,
                   "no GPU at index " + std::to_string(index) + ": NVML counts " +
                       std::to_string(lib.info().device_count) + " device(s)");
  }
  nvml::Device card = nullptr;
  nvml::Return r = lib.get_handle(index, &card);
  if (r != nvml::kSuccess) {
    return Failure::FromNvml(r, "nvmlDeviceGetHandleByIndex(" + std::to_string(index) + ")");
  }
  if (lib.get_mig_mode == nullptr) {
    out.note = lib.info().library + " exports no MIG calls (a driver older than R450)";
    return out;
  }
  unsigned int current = 0;
  unsigned int pending = 0;
  r = lib.get_mig_mode(card, &current, &pending);
  if (r != nvml::kSuccess) {
    out.note = "nvmlDeviceGetMigMode returned " + NvmlLibrary::DescribeReturn(r);
    return out;
  }
  out.supported = true;
  out.enabled = current == nvml::kMigEnabled;
  if (!out.enabled) {
    return out;
  }
  out.card_slices = ReadUint(lib.get_max_mig_count, card);
  for (unsigned int slot = 0; slot < out.card_slices.value_or(0); ++slot) {
    nvml::Device mig = nullptr;
    // NOT_FOUND: no MIG device in that slot.
    if (lib.get_mig_handle(card, slot, &mig) != nvml::kSuccess) {
      continue;
    }
    MigSliceData slice;
    slice.slot = slot;
    slice.uuid = ReadString(lib.get_uuid, mig);
    slice.name = ReadString(lib.get_name, mig);
    slice.gpu_instance_id = ReadUint(lib.get_gpu_instance_id, mig);
    slice.compute_instance_id = ReadUint(lib.get_compute_instance_id, mig);
    nvml::DeviceAttributes attributes{};
    if (lib.get_attributes(mig, &attributes) == nvml::kSuccess) {
      slice.slices = attributes.gpuInstanceSliceCount;
    }
    ReadMemory(lib, mig, slice);
    out.slices.push_back(std::move(slice));
  }
  return out;
}

}  // namespace giul
