#include "card_log_reference.h"

#include <cmath>
#include <string>

namespace giul {

int64_t CardLogLease::Append(double delta_weight, int64_t delta_count, double idle_w, double kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (released_) return kReleased;
  const int64_t k = log_->Append(delta_weight, delta_count, idle_w, kind);
  if (k >= 0) {
    weight_sum_ += delta_weight;
    count_sum_ += delta_count;
    if (count_sum_ <= 0) {
      count_sum_ = 0;
      weight_sum_ = 0;  // none of this lease's windows is open: what is left is rounding
    }
  }
  return k;
}

void CardLogLease::Release() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (released_) return;
  released_ = true;
  if (count_sum_ != 0 || weight_sum_ != 0) {
    log_->Append(-weight_sum_, -count_sum_, std::nan(""), CardLogLayout::kCompensationKind);
  }
  count_sum_ = 0;
  weight_sum_ = 0;
}

Napi::Function CardLogReference::DefineClass(Napi::Env env) {
  return ObjectWrap<CardLogReference>::DefineClass(
      env, "NativeCardLog",
      {InstanceMethod<&CardLogReference::Append>("append"),
       InstanceMethod<&CardLogReference::Reap>("reap"),
       InstanceMethod<&CardLogReference::Pids>("pids"),
       InstanceMethod<&CardLogReference::Release>("release")});
}

CardLogReference::CardLogReference(const Napi::CallbackInfo& info)
    : Napi::ObjectWrap<CardLogReference>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) {
    throw Napi::TypeError::New(env, "NativeCardLog is made by openCardLog()");
  }
  const Init& init = *info[0].As<Napi::External<Init>>().Data();
  lease_ = init.lease;
  const std::shared_ptr<CardLog>& log = lease_->log();
  // The mapping lives as long as the process (CardLog::Open caches it): the buffer needs no owner,
  // but holds one all the same.
  auto* keep = new std::shared_ptr<CardLog>(log);
  Napi::ArrayBuffer buffer;
  try {
    buffer = Napi::ArrayBuffer::New(
        env, log->log_data(), log->log_bytes(),
        [](Napi::Env, void*, std::shared_ptr<CardLog>* hint) { delete hint; }, keep);
  } catch (...) {
    delete keep;
    throw;
  }
  const bool host = log->scope() == CardLog::Scope::kHost;
  auto self = info.This().As<Napi::Object>();
  self.DefineProperties({
      Napi::PropertyDescriptor::Value("ok", Napi::Boolean::New(env, true), napi_enumerable),
      Napi::PropertyDescriptor::Value("scope", Napi::String::New(env, host ? "host" : "process"),
                                      napi_enumerable),
      Napi::PropertyDescriptor::Value(
          "reason", init.reason.empty() ? env.Null() : Napi::String::New(env, init.reason),
          napi_enumerable),
      Napi::PropertyDescriptor::Value("buffer", buffer, napi_enumerable),
      Napi::PropertyDescriptor::Value("epochNs", Napi::BigInt::New(env, log->epoch_ns()),
                                      napi_enumerable),
      Napi::PropertyDescriptor::Value("slot", Napi::Number::New(env, log->slot()), napi_enumerable),
  });
}

CardLogReference::~CardLogReference() {
  if (lease_) lease_->Release();
}

Napi::Value CardLogReference::Append(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "append(deltaWeight, deltaCount, idleW, kind): ";
  if (info.Length() < 4 || !info[0].IsNumber() || !info[1].IsNumber() || !info[2].IsNumber() ||
      !info[3].IsNumber()) {
    throw Napi::TypeError::New(env, std::string(usage) + "each argument must be a number");
  }
  const double dw = info[0].As<Napi::Number>().DoubleValue();
  const double dc = info[1].As<Napi::Number>().DoubleValue();
  const double idle = info[2].As<Napi::Number>().DoubleValue();
  const double kind = info[3].As<Napi::Number>().DoubleValue();
  if (!std::isfinite(dw)) {
    throw Napi::TypeError::New(env, std::string(usage) + "deltaWeight must be finite");
  }
  if (dc != -1 && dc != 0 && dc != 1) {
    throw Napi::TypeError::New(env, std::string(usage) + "deltaCount must be -1, 0 or 1");
  }
  if (dc > 0 && !(std::isfinite(idle) && idle >= 0)) {
    throw Napi::TypeError::New(env, std::string(usage) + "an open's idleW must be finite, >= 0");
  }
  if (!(kind >= CardLogLayout::kOpenKind && kind <= CardLogLayout::kMarkKind)) {
    throw Napi::TypeError::New(env, std::string(usage) + "kind must be 1 to 4");
  }
  return Napi::Number::New(
      env, static_cast<double>(lease_->Append(dw, static_cast<int64_t>(dc), idle, kind)));
}

Napi::Value CardLogReference::Reap(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), lease_->log()->Reap());
}

Napi::Value CardLogReference::Pids(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<int> pids = lease_->log()->Pids();
  Napi::Array out = Napi::Array::New(env, pids.size());
  for (size_t i = 0; i < pids.size(); i++) out.Set(i, Napi::Number::New(env, pids[i]));
  return out;
}

Napi::Value CardLogReference::Release(const Napi::CallbackInfo& info) {
  lease_->Release();
  return info.Env().Undefined();
}

}  // namespace giul
