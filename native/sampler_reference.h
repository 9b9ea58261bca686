// The JS object openSampler() returns (NativeSampler): buffer, epochNs, device, setPeriod(),
// doorbell(), wake(), read(), release(). Its finaliser drops the reference if
// release() was never called.
#pragma once

#include <napi.h>

#include <memory>

#include "doorbell.h"
#include "ring.h"
#include "sampler_lease.h"

namespace giul {

class SamplerReference : public Napi::ObjectWrap<SamplerReference> {
 public:
  /// What the constructor is handed (through a Napi::External; the class is not exported).
  struct Init {
    std::shared_ptr<SamplerLease> lease;
    std::shared_ptr<Ring> ring;
    int64_t epoch_ns;
    unsigned int device;
  };

  static Napi::Function DefineClass(Napi::Env env);

  explicit SamplerReference(const Napi::CallbackInfo& info);
  ~SamplerReference() override;

 private:
  Napi::Value SetPeriod(const Napi::CallbackInfo& info);
  Napi::Value Release(const Napi::CallbackInfo& info);
  Napi::Value SetDoorbell(const Napi::CallbackInfo& info);
  Napi::Value Wake(const Napi::CallbackInfo& info);
  Napi::Value Read(const Napi::CallbackInfo& info);
  /// Lets go of the doorbell's thread-safe function (its finaliser detaches the doorbell).
  void ReleaseDoorbell();

  std::shared_ptr<SamplerLease> lease_;
  std::shared_ptr<Doorbell> doorbell_;
  Napi::ThreadSafeFunction doorbell_tsfn_;
  bool doorbell_live_ = false;
};

}  // namespace giul
