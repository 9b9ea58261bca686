// The addon's AMD SMI methods: amdInit, amdDeviceInfo, amdProcesses and openSampler(…, "amd").
// Each loads the library first (off the JS thread) as the NVML methods load NVML.
#include <memory>
#include <string>

#include "addon.h"
#include "amd_device_reader.h"
#include "amdsmi_library.h"
#include "card_reads.h"
#include "js_values.h"
#include "promise_call.h"
#include "shared_load.h"

namespace giul {

Napi::Value GiulAddon::AmdInit(const Napi::CallbackInfo& info) {
  bool keep_alive = KeepAliveArg(info, 0, "amdInit");
  return PromiseCall<AmdSmiLibrary::Info>::Run(
      info.Env(), "giul:amdInit",
      []() -> Result<AmdSmiLibrary::Info> {
        return WithLibrary<AmdSmiLibrary::Info, AmdSmiLibrary>(
            [](const auto& library) -> Result<AmdSmiLibrary::Info> { return library->info(); });
      },
      js::FromAmdInfo, keep_alive);
}

Napi::Value GiulAddon::AmdDeviceInfo(const Napi::CallbackInfo& info) {
  unsigned int index = DeviceIndexArg(info, "amdDeviceInfo");
  bool keep_alive = KeepAliveArg(info, 1, "amdDeviceInfo");
  return PromiseCall<DeviceInfoData>::Run(
      info.Env(), "giul:amdDeviceInfo",
      [index]() -> Result<DeviceInfoData> {
        return WithLibrary<DeviceInfoData, AmdSmiLibrary>(
            [index](const auto& library) { return AmdDeviceReader(library).ReadInfo(index); });
      },
      js::FromDeviceInfo, keep_alive);
}

Napi::Value GiulAddon::AmdProcesses(const Napi::CallbackInfo& info) {
  unsigned int index = DeviceIndexArg(info, "amdProcesses");
  bool keep_alive = KeepAliveArg(info, 1, "amdProcesses");
  return PromiseCall<ProcessListData>::Run(
      info.Env(), "giul:amdProcesses",
      [index]() -> Result<ProcessListData> {
        return WithLibrary<ProcessListData, AmdSmiLibrary>(
            [index](const auto& library) { return AmdDeviceReader(library).ReadProcesses(index); });
      },
      js::FromProcessList, keep_alive);
}

Napi::Value GiulAddon::OpenAmdSampler(Napi::Env env, unsigned int index, int period_ms) {
  // No AMD SMI call here: only the outcome of a finished amdInit() is used.
  std::optional<AmdSmiLibrary::Outcome> outcome = AmdSmiLibrary::Loaded();
  if (!outcome) {
    return Failure(Failure::Code::kInitFailed, std::nullopt,
                   "openSampler(…, \"amd\") needs amdInit() to have resolved first",
                   Failure::Vendor::kAmd)
        .ToObject(env);
  }
  if (const auto* failure = std::get_if<Failure>(&*outcome)) {
    return failure->ToObject(env);
  }
  const auto& library = std::get<std::shared_ptr<const AmdSmiLibrary>>(*outcome);
  if (index >= library->info().device_count) {
    return Failure(Failure::Code::kDeviceNotFound, std::nullopt,
                   "no AMD GPU at index " + std::to_string(index) + ": AMD SMI counts " +
                       std::to_string(library->info().device_count),
                   Failure::Vendor::kAmd)
        .ToObject(env);
  }
  auto acquired = SamplerRegistry::Instance().Acquire(
      CardVendor::kAmd, index, [&] { return MakeAmdReads(library, index); }, period_ms);
  if (const auto* failure = std::get_if<Failure>(&acquired)) {
    return failure->ToObject(env);
  }
  return WrapSampler(env, std::get<SamplerRegistry::Reference>(acquired), index);
}

}  // namespace giul
