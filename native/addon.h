// The addon's per-environment instance (main thread and each worker): the GiulBinding surface of
// binding.d.ts. Its destructor (the environment's teardown) drops every sampler reference the
// environment still holds, and closes on each card's event log the windows it left open.
// Argument helpers shared by addon.cc and addon_amd.cc are declared at the end.
#pragma once

#include <napi.h>

#include <memory>
#include <vector>

#include "card_log_reference.h"
#include "sampler_lease.h"
#include "sampler_registry.h"

namespace giul {

class GiulAddon : public Napi::Addon<GiulAddon> {
 public:
  GiulAddon(Napi::Env env, Napi::Object exports);
  ~GiulAddon();
  GiulAddon(const GiulAddon&) = delete;
  GiulAddon& operator=(const GiulAddon&) = delete;
  GiulAddon(GiulAddon&&) = delete;
  GiulAddon& operator=(GiulAddon&&) = delete;

 private:
  Napi::Value NvmlInit(const Napi::CallbackInfo& info);
  Napi::Value DeviceInfo(const Napi::CallbackInfo& info);
  Napi::Value ComputeProcesses(const Napi::CallbackInfo& info);
  Napi::Value MigDevices(const Napi::CallbackInfo& info);
  // AMD SMI's counterparts of nvmlInit, deviceInfo and computeProcesses (addon_amd.cc).
  Napi::Value AmdInit(const Napi::CallbackInfo& info);
  Napi::Value AmdDeviceInfo(const Napi::CallbackInfo& info);
  Napi::Value AmdProcesses(const Napi::CallbackInfo& info);
  Napi::Value OpenSampler(const Napi::CallbackInfo& info);
  /// The sampler of an AMD card (openSampler(index, periodMs, "amd")).
  Napi::Value OpenAmdSampler(Napi::Env env, unsigned int index, int period_ms);
  /// The JS object over a sampler reference just acquired.
  Napi::Value WrapSampler(Napi::Env env, SamplerRegistry::Reference& reference, unsigned int index);
  Napi::Value OpenCardLog(const Napi::CallbackInfo& info);
  Napi::Value SamplerThreads(const Napi::CallbackInfo& info);
  Napi::Value MonotonicNs(const Napi::CallbackInfo& info);

  Napi::FunctionReference sampler_class_;
  Napi::FunctionReference card_log_class_;
  std::vector<std::weak_ptr<SamplerLease>> leases_;
  std::vector<std::weak_ptr<CardLogLease>> card_logs_;
};

/// The device index at info[0], an integer >= 0 (a TypeError naming `method` otherwise).
unsigned int DeviceIndexArg(const Napi::CallbackInfo& info, const char* method);
/// The `{ keepAlive }` option at `at` (default true).
bool KeepAliveArg(const Napi::CallbackInfo& info, size_t at, const char* method);

}  // namespace giul
