// The addon's per-environment instance (main thread and each worker): the GiulBinding surface of
// binding.d.ts. Its destructor (the environment's teardown) drops every sampler reference the
// environment still holds, and closes on each card's event log the windows it left open.
#pragma once

#include <napi.h>

#include <memory>
#include <vector>

#include "card_log_reference.h"
#include "sampler_lease.h"

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
  Napi::Value OpenSampler(const Napi::CallbackInfo& info);
  Napi::Value OpenCardLog(const Napi::CallbackInfo& info);
  Napi::Value SamplerThreads(const Napi::CallbackInfo& info);
  Napi::Value MonotonicNs(const Napi::CallbackInfo& info);

  Napi::FunctionReference sampler_class_;
  Napi::FunctionReference card_log_class_;
  std::vector<std::weak_ptr<SamplerLease>> leases_;
  std::vector<std::weak_ptr<CardLogLease>> card_logs_;
};

}  // namespace giul
