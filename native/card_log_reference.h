// The JS object openCardLog() returns (NativeCardLog): the card's event log as a buffer, append(),
// reap(), pids(), release(). Its lease remembers the weight and windows its environment appended,
// so that dropping it (release(), the finaliser, the environment's teardown) closes what the
// environment left open.
#pragma once

#include <napi.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "card_log.h"

namespace giul {

/// One environment's hold on a card's log.
class CardLogLease {
 public:
  static constexpr int64_t kReleased = -2;

  explicit CardLogLease(std::shared_ptr<CardLog> log) : log_(std::move(log)) {}
  ~CardLogLease() { Release(); }
  CardLogLease(const CardLogLease&) = delete;
  CardLogLease& operator=(const CardLogLease&) = delete;

  int64_t Append(double delta_weight, int64_t delta_count, double idle_w, double kind);
  /// Idempotent; makes no JS call (safe from a finaliser and an environment's cleanup).
  void Release();
  const std::shared_ptr<CardLog>& log() const { return log_; }

 private:
  std::mutex mutex_;
  std::shared_ptr<CardLog> log_;
  bool released_ = false;  // guarded by mutex_
  double weight_sum_ = 0;  // guarded by mutex_
  int64_t count_sum_ = 0;  // guarded by mutex_
};

class CardLogReference : public Napi::ObjectWrap<CardLogReference> {
 public:
  struct Init {
    std::shared_ptr<CardLogLease> lease;
    std::string reason;
  };

  static Napi::Function DefineClass(Napi::Env env);
  explicit CardLogReference(const Napi::CallbackInfo& info);
  ~CardLogReference() override;

 private:
  Napi::Value Append(const Napi::CallbackInfo& info);
  Napi::Value Reap(const Napi::CallbackInfo& info);
  Napi::Value Pids(const Napi::CallbackInfo& info);
  Napi::Value Release(const Napi::CallbackInfo& info);

  std::shared_ptr<CardLogLease> lease_;
};

}  // namespace giul
