// The addon's per-environment instance (main thread and each worker): the GiulBinding surface of
// binding.d.ts. Its destructor (the environment's teardown) drops every sampler reference the
// environment still holds, closing on each device's event log the windows they left open.
#pragma once

#include <napi.h>

#include <memory>
#include <vector>

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
  Napi::Value OpenSampler(const Napi::CallbackInfo& info);
  Napi::Value SamplerThreads(const Napi::CallbackInfo& info);
  Napi::Value MonotonicNs(const Napi::CallbackInfo& info);

  Napi::FunctionReference sampler_class_;
  std::vector<std::weak_ptr<SamplerLease>> leases_;
};

}  // namespace giul
