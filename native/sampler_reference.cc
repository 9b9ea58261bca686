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
       InstanceMethod<&SamplerReference::LedgerAppend>("ledgerAppend"),
       InstanceMethod<&SamplerReference::LedgerAppendStamped>("ledgerAppendStamped"),
       InstanceMethod<&SamplerReference::SetDoorbell>("doorbell"),
       InstanceMethod<&SamplerReference::Wake>("wake"),
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
  Napi::ArrayBuffer ledger = SharedBuffer(env, init.ledger);
  auto self = info.This().As<Napi::Object>();
  self.DefineProperties({
      Napi::PropertyDescriptor::Value("ok", Napi::Boolean::New(env, true), napi_enumerable),
      Napi::PropertyDescriptor::Value("buffer", buffer, napi_enumerable),
      Napi::PropertyDescriptor::Value("ledger", ledger, napi_enumerable),
      Napi::PropertyDescriptor::Value("epochNs", Napi::BigInt::New(env, init.epoch_ns),
                                      napi_enumerable),
      Napi::PropertyDescriptor::Value("device", Napi::Number::New(env, init.device),
                                      napi_enumerable),
      // The kRef of what this reference appends to the event log.
      Napi::PropertyDescriptor::Value(
          "refId", Napi::Number::New(env, static_cast<double>(init.lease->id())), napi_enumerable),
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
    doorbell_->Arm();
  }
  if (info.Length() > 0 && info[0].ToBoolean().Value()) {
    lease_->RequestRead();
  }
  return info.Env().Undefined();
}

Napi::Value SamplerReference::SetPeriod(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsNumber()) {
    throw Napi::TypeError::New(info.Env(), "setPeriod(periodMs): periodMs must be a number");
  }
  lease_->SetPeriod(Sampler::ClampPeriodMs(info[0].As<Napi::Number>().DoubleValue()));
  return info.Env().Undefined();
}

int64_t SamplerReference::Append(const Napi::CallbackInfo& info, const char* usage, int64_t* t) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsNumber() || !info[1].IsNumber() || !info[2].IsNumber()) {
    throw Napi::TypeError::New(env, std::string(usage) + "each argument must be a number");
  }
  const double delta_weight = info[0].As<Napi::Number>().DoubleValue();
  const double delta_count = info[1].As<Napi::Number>().DoubleValue();
  const double idle_w = info[2].As<Napi::Number>().DoubleValue();
  if (!std::isfinite(delta_weight)) {
    throw Napi::TypeError::New(env, std::string(usage) + "deltaWeight must be finite");
  }
  if (delta_count != -1 && delta_count != 0 && delta_count != 1) {
    throw Napi::TypeError::New(env, std::string(usage) + "deltaCount must be -1, 0 or 1");
  }
  if (delta_count > 0 && !std::isfinite(idle_w)) {
    throw Napi::TypeError::New(env, std::string(usage) + "an open's idleW must be finite");
  }
  // Optional: what the environment says of the event (its window, the window's weight after it,
  // its kind), stored as given.
  double tag[3] = {kNaN, kNaN, kNaN};
  for (size_t i = 0; i < 3 && 3 + i < info.Length(); i++) {
    if (!info[3 + i].IsNumber()) {
      throw Napi::TypeError::New(env, std::string(usage) + "owner, own and kind must be numbers");
    }
    tag[i] = info[3 + i].As<Napi::Number>().DoubleValue();
  }
  return lease_->LedgerAppend(delta_weight, static_cast<int>(delta_count), idle_w, tag, t);
}

Napi::Value SamplerReference::LedgerAppend(const Napi::CallbackInfo& info) {
  const int64_t sequence =
      Append(info, "ledgerAppend(deltaWeight, deltaCount, idleW[, owner, own, kind]): ", nullptr);
  return Napi::Number::New(info.Env(), static_cast<double>(sequence));
}

Napi::Value SamplerReference::LedgerAppendStamped(const Napi::CallbackInfo& info) {
  int64_t t = 0;
  const int64_t sequence =
      Append(info, "ledgerAppendStamped(deltaWeight, deltaCount, idleW[, owner, own, kind]): ", &t);
  return Napi::Number::New(info.Env(), static_cast<double>(sequence < 0 ? sequence : t));
}

Napi::Value SamplerReference::Release(const Napi::CallbackInfo& info) {
  lease_->Release();
  ReleaseDoorbell();
  return info.Env().Undefined();
}

}  // namespace giul
