#include "sampler_reference.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "sampler.h"

namespace giul {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// An ArrayBuffer over memory that `owner` keeps alive until the buffer is collected, so JS never
/// reads freed memory, even after release() and after the thread is gone.
template <typename T>
Napi::ArrayBuffer SharedBuffer(Napi::Env env, const std::shared_ptr<T>& owner) {
  auto* keep = new std::shared_ptr<T>(owner);
  try {
    return Napi::ArrayBuffer::New(
        env, owner->data(), owner->byte_length(),
        [](Napi::Env, void*, std::shared_ptr<T>* hint) { delete hint; }, keep);
  } catch (...) {
    delete keep;
    throw;
  }
}

}  // namespace

Napi::Function SamplerReference::DefineClass(Napi::Env env) {
  return ObjectWrap<SamplerReference>::DefineClass(
      env, "NativeSampler",
      {InstanceMethod<&SamplerReference::SetPeriod>("setPeriod"),
       InstanceMethod<&SamplerReference::SetDoorbell>("doorbell"),
       InstanceMethod<&SamplerReference::Wake>("wake"),
       InstanceMethod<&SamplerReference::Read>("read"),
       InstanceMethod<&SamplerReference::Release>("release")});
}

SamplerReference::SamplerReference(const Napi::CallbackInfo& info)
    : Napi::ObjectWrap<SamplerReference>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) {
    throw Napi::TypeError::New(env, "NativeSampler is made by openSampler()");
  }
  const Init& init = *info[0].As<Napi::External<Init>>().Data();
  lease_ = init.lease;

  Napi::ArrayBuffer buffer = SharedBuffer(env, init.ring);
  auto self = info.This().As<Napi::Object>();
  self.DefineProperties({
      Napi::PropertyDescriptor::Value("ok", Napi::Boolean::New(env, true), napi_enumerable),
      Napi::PropertyDescriptor::Value("buffer", buffer, napi_enumerable),
      Napi::PropertyDescriptor::Value("epochNs", Napi::BigInt::New(env, init.epoch_ns),
                                      napi_enumerable),
      Napi::PropertyDescriptor::Value("device", Napi::Number::New(env, init.device),
                                      napi_enumerable),
  });
}

SamplerReference::~SamplerReference() {
  if (lease_) {
    lease_->Release();
  }
  ReleaseDoorbell();
}

void SamplerReference::ReleaseDoorbell() {
  // An environment torn down closes its thread-safe functions (their finalisers run) before the
  // objects still alive are finalised: one already finalised is freed and is not released again.
  // Both run on this environment's thread, so the check cannot race the finaliser.
  if (doorbell_live_ && doorbell_ && !doorbell_->detached()) {
    doorbell_tsfn_.Release();
  }
  doorbell_live_ = false;
  doorbell_.reset();
}

Napi::Value SamplerReference::SetDoorbell(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsFunction()) {
    throw Napi::TypeError::New(env, "doorbell(callback): callback must be a function");
  }
  ReleaseDoorbell();
  // The finaliser runs on this thread when the function is released or the environment is torn
  // down; once it has detached the doorbell, the sampling thread never calls it again.
  auto* holder = new std::shared_ptr<Doorbell>();
  Napi::ThreadSafeFunction tsfn;
  try {
    tsfn = Napi::ThreadSafeFunction::New(
        env, info[0].As<Napi::Function>(), "giul-doorbell", 0, 1,
        [](Napi::Env, std::shared_ptr<Doorbell>* held) {
          if (*held) {
            (*held)->Detach();
          }
          delete held;
        },
        holder);
  } catch (...) {
    delete holder;
    throw;
  }
  *holder = std::make_shared<Doorbell>(tsfn);
  // The doorbell never holds the process open: whoever waits for it holds a timer of its own.
  tsfn.Unref(env);
  doorbell_ = *holder;
  doorbell_tsfn_ = tsfn;
  doorbell_live_ = true;
  lease_->SetDoorbell(doorbell_);
  return env.Undefined();
}

Napi::Value SamplerReference::Wake(const Napi::CallbackInfo& info) {
  if (doorbell_) {
    doorbell_->Arm(info.Length() > 1 && info[1].ToBoolean().Value());
  }
  if (info.Length() > 0 && info[0].ToBoolean().Value()) {
    lease_->RequestRead();
  }
  return info.Env().Undefined();
}

Napi::Value SamplerReference::Read(const Napi::CallbackInfo& info) {
  lease_->RequestRead();
  return info.Env().Undefined();
}

Napi::Value SamplerReference::SetPeriod(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsNumber()) {
    throw Napi::TypeError::New(info.Env(), "setPeriod(periodMs): periodMs must be a number");
  }
  lease_->SetPeriod(Sampler::ClampPeriodMs(info[0].As<Napi::Number>().DoubleValue()));
  return info.Env().Undefined();
}

Napi::Value SamplerReference::Release(const Napi::CallbackInfo& info) {
  lease_->Release();
  ReleaseDoorbell();
  return info.Env().Undefined();
}

}  // namespace giul
