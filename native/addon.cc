#include "addon.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "card_log_reference.h"
#include "card_reads.h"
#include "device_reader.h"
#include "js_values.h"
#include "mig_reader.h"
#include "module_pin.h"
#include "monotonic_clock.h"
#include "nvml_library.h"
#include "promise_call.h"
#include "sampler.h"
#include "sampler_reference.h"
#include "sampler_registry.h"
#include "shared_load.h"

namespace giul {

unsigned int DeviceIndexArg(const Napi::CallbackInfo& info, const char* method) {
  if (info.Length() < 1 || !info[0].IsNumber()) {
    throw Napi::TypeError::New(info.Env(), std::string(method) + "(index): index must be a number");
  }
  double index = info[0].As<Napi::Number>().DoubleValue();
  if (!(index >= 0) || index != std::floor(index) || index > 4294967295.0) {
    throw Napi::TypeError::New(info.Env(),
                               std::string(method) + "(index): index must be an integer >= 0");
  }
  return static_cast<unsigned int>(index);
}

bool KeepAliveArg(const Napi::CallbackInfo& info, size_t at, const char* method) {
  if (info.Length() <= at || info[at].IsUndefined() || info[at].IsNull()) {
    return true;
  }
  if (!info[at].IsObject()) {
    throw Napi::TypeError::New(info.Env(), std::string(method) + ": options must be an object");
  }
  Napi::Value keep_alive = info[at].As<Napi::Object>().Get("keepAlive");
  if (keep_alive.IsUndefined()) {
    return true;
  }
  if (!keep_alive.IsBoolean()) {
    throw Napi::TypeError::New(info.Env(),
                               std::string(method) + ": options.keepAlive must be a boolean");
  }
  return keep_alive.As<Napi::Boolean>().Value();
}

GiulAddon::GiulAddon(Napi::Env env, Napi::Object exports) {
  // Threads of this library outlive environments (and, stuck in a driver call, any join): its
  // code must stay mapped however many environments load and unload it.
  PinThisModule();
  sampler_class_ = Napi::Persistent(SamplerReference::DefineClass(env));
  card_log_class_ = Napi::Persistent(CardLogReference::DefineClass(env));
  DefineAddon(exports,
              {
                  InstanceValue("layout", js::Layout(env), napi_enumerable),
                  InstanceValue("flags", js::Flags(env), napi_enumerable),
                  InstanceValue("cardLogLayout", js::CardLogLayoutObject(env), napi_enumerable),
                  InstanceMethod<&GiulAddon::NvmlInit>("nvmlInit", napi_enumerable),
                  InstanceMethod<&GiulAddon::DeviceInfo>("deviceInfo", napi_enumerable),
                  InstanceMethod<&GiulAddon::ComputeProcesses>("computeProcesses", napi_enumerable),
                  InstanceMethod<&GiulAddon::MigDevices>("migDevices", napi_enumerable),
                  InstanceMethod<&GiulAddon::AmdInit>("amdInit", napi_enumerable),
                  InstanceMethod<&GiulAddon::AmdDeviceInfo>("amdDeviceInfo", napi_enumerable),
                  InstanceMethod<&GiulAddon::AmdProcesses>("amdProcesses", napi_enumerable),
                  InstanceMethod<&GiulAddon::OpenSampler>("openSampler", napi_enumerable),
                  InstanceMethod<&GiulAddon::OpenCardLog>("openCardLog", napi_enumerable),
                  InstanceMethod<&GiulAddon::SamplerThreads>("samplerThreads", napi_enumerable),
                  InstanceMethod<&GiulAddon::MonotonicNs>("monotonicNs", napi_enumerable),
              });
}

GiulAddon::~GiulAddon() {
  for (auto& weak : leases_) {
    if (auto lease = weak.lock()) {
      lease->Release();
    }
  }
  for (auto& weak : card_logs_) {
    if (auto lease = weak.lock()) {
      lease->Release();
    }
  }
}

Napi::Value GiulAddon::NvmlInit(const Napi::CallbackInfo& info) {
  bool keep_alive = KeepAliveArg(info, 0, "nvmlInit");
  return PromiseCall<NvmlLibrary::Info>::Run(
      info.Env(), "giul:nvmlInit",
      []() -> Result<NvmlLibrary::Info> {
        return WithLibrary<NvmlLibrary::Info, NvmlLibrary>(
            [](const auto& library) -> Result<NvmlLibrary::Info> { return library->info(); });
      },
      js::FromInfo, keep_alive);
}

Napi::Value GiulAddon::DeviceInfo(const Napi::CallbackInfo& info) {
  unsigned int index = DeviceIndexArg(info, "deviceInfo");
  bool keep_alive = KeepAliveArg(info, 1, "deviceInfo");
  return PromiseCall<DeviceInfoData>::Run(
      info.Env(), "giul:deviceInfo",
      [index]() -> Result<DeviceInfoData> {
        return WithLibrary<DeviceInfoData, NvmlLibrary>(
            [index](const auto& library) -> Result<DeviceInfoData> {
              return DeviceReader(library).ReadInfo(index);
            });
      },
      js::FromDeviceInfo, keep_alive);
}

Napi::Value GiulAddon::ComputeProcesses(const Napi::CallbackInfo& info) {
  unsigned int index = DeviceIndexArg(info, "computeProcesses");
  bool keep_alive = KeepAliveArg(info, 1, "computeProcesses");
  return PromiseCall<ProcessListData>::Run(
      info.Env(), "giul:computeProcesses",
      [index]() -> Result<ProcessListData> {
        return WithLibrary<ProcessListData, NvmlLibrary>(
            [index](const auto& library) -> Result<ProcessListData> {
              return DeviceReader(library).ReadProcesses(index);
            });
      },
      js::FromProcessList, keep_alive);
}

Napi::Value GiulAddon::MigDevices(const Napi::CallbackInfo& info) {
  unsigned int index = DeviceIndexArg(info, "migDevices");
  bool keep_alive = KeepAliveArg(info, 1, "migDevices");
  return PromiseCall<MigData>::Run(
      info.Env(), "giul:migDevices",
      [index]() -> Result<MigData> {
        return WithLibrary<MigData, NvmlLibrary>(
            [index](const auto& library) -> Result<MigData> { return ReadMig(library, index); });
      },
      js::FromMig, keep_alive);
}

Napi::Value GiulAddon::OpenSampler(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  unsigned int index = DeviceIndexArg(info, "openSampler");
  if (info.Length() < 2 || !info[1].IsNumber()) {
    throw Napi::TypeError::New(env, "openSampler(index, periodMs): periodMs must be a number");
  }
  int period_ms = Sampler::ClampPeriodMs(info[1].As<Napi::Number>().DoubleValue());
  if (info.Length() > 2 && !info[2].IsUndefined()) {
    if (!info[2].IsString() || (info[2].As<Napi::String>().Utf8Value() != "amd" &&
                                info[2].As<Napi::String>().Utf8Value() != "nvidia")) {
      throw Napi::TypeError::New(
          env, "openSampler(index, periodMs, vendor): vendor must be \"nvidia\" or \"amd\"");
    }
    if (info[2].As<Napi::String>().Utf8Value() == "amd") {
      return OpenAmdSampler(env, index, period_ms);
    }
  }

  // No NVML call here: only the outcome of a finished nvmlInit() is used.
  std::optional<NvmlLibrary::Outcome> outcome = NvmlLibrary::Loaded();
  if (!outcome) {
    return Failure(Failure::Code::kInitFailed, std::nullopt,
                   "openSampler needs nvmlInit() to have resolved first")
        .ToObject(env);
  }
  if (const auto* failure = std::get_if<Failure>(&*outcome)) {
    return failure->ToObject(env);
  }
  const auto& library = std::get<std::shared_ptr<const NvmlLibrary>>(*outcome);
  if (index >= library->info().device_count) {
    return Failure(Failure::Code::kDeviceNotFound, std::nullopt,
                   "no GPU at index " + std::to_string(index) + ": NVML counts " +
                       std::to_string(library->info().device_count) + " device(s)")
        .ToObject(env);
  }
  auto acquired = SamplerRegistry::Instance().Acquire(
      CardVendor::kNvidia, index, [&] { return MakeNvmlReads(library, index); }, period_ms);
  if (const auto* failure = std::get_if<Failure>(&acquired)) {
    return failure->ToObject(env);
  }
  return WrapSampler(env, std::get<SamplerRegistry::Reference>(acquired), index);
}

Napi::Value GiulAddon::WrapSampler(Napi::Env env, SamplerRegistry::Reference& reference,
                                   unsigned int index) {
  SamplerReference::Init init{nullptr, reference.sampler->ring(), reference.sampler->epoch_ns(),
                              index};
  init.lease = std::make_shared<SamplerLease>(reference);

  std::erase_if(leases_, [](const std::weak_ptr<SamplerLease>& weak) { return weak.expired(); });
  leases_.push_back(init.lease);
  return sampler_class_.New({Napi::External<SamplerReference::Init>::New(env, &init)});
}

Napi::Value GiulAddon::OpenCardLog(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "openCardLog(key, group[, processOnly]): ";
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsString()) {
    throw Napi::TypeError::New(env, std::string(usage) + "key and group must be strings");
  }
  const bool process_only = info.Length() > 2 && info[2].ToBoolean().Value();
  CardLog::Opened opened = CardLog::Open(info[0].As<Napi::String>().Utf8Value(),
                                         info[1].As<Napi::String>().Utf8Value(), process_only);
  if (opened.log == nullptr) {
    Napi::Object refused = Napi::Object::New(env);
    refused.Set("ok", false);
    refused.Set("reason", opened.reason);
    return refused;
  }
  CardLogReference::Init init{std::make_shared<CardLogLease>(opened.log), opened.reason};
  std::erase_if(card_logs_, [](const std::weak_ptr<CardLogLease>& weak) { return weak.expired(); });
  card_logs_.push_back(init.lease);
  return card_log_class_.New({Napi::External<CardLogReference::Init>::New(env, &init)});
}

Napi::Value GiulAddon::SamplerThreads(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), SamplerRegistry::Instance().AliveThreads());
}

Napi::Value GiulAddon::MonotonicNs(const Napi::CallbackInfo& info) {
  return Napi::BigInt::New(info.Env(), giul::MonotonicNs());
}

}  // namespace giul

using giul::GiulAddon;
NODE_API_NAMED_ADDON(giul, GiulAddon)
