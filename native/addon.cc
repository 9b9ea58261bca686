#include "addon.h"

#include <cmath>
#include <string>

#include "device_reader.h"
#include "js_values.h"
#include "monotonic_clock.h"
#include "nvml_library.h"
#include "promise_worker.h"
#include "sampler.h"
#include "sampler_reference.h"
#include "sampler_registry.h"

namespace giul {
namespace {

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

}  // namespace

GiulAddon::GiulAddon(Napi::Env env, Napi::Object exports) {
  sampler_class_ = Napi::Persistent(SamplerReference::DefineClass(env));
  DefineAddon(exports,
              {
                  InstanceValue("layout", js::Layout(env), napi_enumerable),
                  InstanceValue("flags", js::Flags(env), napi_enumerable),
                  InstanceValue("ledgerLayout", js::LedgerLayoutObject(env), napi_enumerable),
                  InstanceMethod<&GiulAddon::NvmlInit>("nvmlInit", napi_enumerable),
                  InstanceMethod<&GiulAddon::DeviceInfo>("deviceInfo", napi_enumerable),
                  InstanceMethod<&GiulAddon::ComputeProcesses>("computeProcesses", napi_enumerable),
                  InstanceMethod<&GiulAddon::OpenSampler>("openSampler", napi_enumerable),
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
}

Napi::Value GiulAddon::NvmlInit(const Napi::CallbackInfo& info) {
  return PromiseWorker<NvmlLibrary::Info>::Run(
      info.Env(), "giul:nvmlInit",
      []() -> Result<NvmlLibrary::Info> {
        const auto& outcome = NvmlLibrary::Load();
        if (const auto* failure = std::get_if<Failure>(&outcome)) {
          return *failure;
        }
        return std::get<std::shared_ptr<const NvmlLibrary>>(outcome)->info();
      },
      js::FromInfo);
}

Napi::Value GiulAddon::DeviceInfo(const Napi::CallbackInfo& info) {
  unsigned int index = DeviceIndexArg(info, "deviceInfo");
  return PromiseWorker<DeviceInfoData>::Run(
      info.Env(), "giul:deviceInfo",
      [index]() -> Result<DeviceInfoData> {
        const auto& outcome = NvmlLibrary::Load();
        if (const auto* failure = std::get_if<Failure>(&outcome)) {
          return *failure;
        }
        return DeviceReader(std::get<std::shared_ptr<const NvmlLibrary>>(outcome)).ReadInfo(index);
      },
      js::FromDeviceInfo);
}

Napi::Value GiulAddon::ComputeProcesses(const Napi::CallbackInfo& info) {
  unsigned int index = DeviceIndexArg(info, "computeProcesses");
  return PromiseWorker<ProcessListData>::Run(
      info.Env(), "giul:computeProcesses",
      [index]() -> Result<ProcessListData> {
        const auto& outcome = NvmlLibrary::Load();
        if (const auto* failure = std::get_if<Failure>(&outcome)) {
          return *failure;
        }
        return DeviceReader(std::get<std::shared_ptr<const NvmlLibrary>>(outcome))
            .ReadProcesses(index);
      },
      js::FromProcessList);
}

Napi::Value GiulAddon::OpenSampler(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  unsigned int index = DeviceIndexArg(info, "openSampler");
  if (info.Length() < 2 || !info[1].IsNumber()) {
    throw Napi::TypeError::New(env, "openSampler(index, periodMs): periodMs must be a number");
  }
  int period_ms = Sampler::ClampPeriodMs(info[1].As<Napi::Number>().DoubleValue());

  // No NVML call here: only the outcome of a finished nvmlInit() is used.
  const NvmlLibrary::Outcome* outcome = NvmlLibrary::Loaded();
  if (outcome == nullptr) {
    return Failure(Failure::Code::kInitFailed, std::nullopt,
                   "openSampler needs nvmlInit() to have resolved first")
        .ToObject(env);
  }
  if (const auto* failure = std::get_if<Failure>(outcome)) {
    return failure->ToObject(env);
  }
  const auto& library = std::get<std::shared_ptr<const NvmlLibrary>>(*outcome);
  if (index >= library->info().device_count) {
    return Failure(Failure::Code::kDeviceNotFound, std::nullopt,
                   "no GPU at index " + std::to_string(index) + ": NVML counts " +
                       std::to_string(library->info().device_count) + " device(s)")
        .ToObject(env);
  }
  auto acquired = SamplerRegistry::Instance().Acquire(library, index, period_ms);
  if (const auto* failure = std::get_if<Failure>(&acquired)) {
    return failure->ToObject(env);
  }
  auto& reference = std::get<SamplerRegistry::Reference>(acquired);
  SamplerReference::Init init{nullptr, reference.sampler->ring(), reference.sampler->ledger(),
                              reference.sampler->epoch_ns(), index};
  init.lease = std::make_shared<SamplerLease>(reference);

  std::erase_if(leases_, [](const std::weak_ptr<SamplerLease>& weak) { return weak.expired(); });
  leases_.push_back(init.lease);
  return sampler_class_.New({Napi::External<SamplerReference::Init>::New(env, &init)});
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
