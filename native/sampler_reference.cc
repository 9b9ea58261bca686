#include "sampler_reference.h"

#include "sampler.h"

namespace giul {

Napi::Function SamplerReference::DefineClass(Napi::Env env) {
  return ObjectWrap<SamplerReference>::DefineClass(
      env, "NativeSampler",
      {InstanceMethod<&SamplerReference::SetPeriod>("setPeriod"),
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

  // The ring is kept alive by the ArrayBuffer's finaliser, so JS never reads freed memory, even
  // after release() and after the thread is gone.
  auto* keep = new std::shared_ptr<Ring>(init.ring);
  Napi::ArrayBuffer buffer;
  try {
    buffer = Napi::ArrayBuffer::New(
        env, init.ring->data(), init.ring->byte_length(),
        [](Napi::Env, void*, std::shared_ptr<Ring>* hint) { delete hint; }, keep);
  } catch (...) {
    delete keep;
    throw;
  }
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
  return info.Env().Undefined();
}

}  // namespace giul
