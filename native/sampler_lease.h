// One reference to a device's sampler, held by a JS object and by its environment's addon data;
// whichever lets go first (release(), the object's finaliser, the environment's cleanup) drops it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "doorbell.h"
#include "sampler_registry.h"

namespace giul {

class SamplerLease {
 public:
  explicit SamplerLease(SamplerRegistry::Reference reference);
  ~SamplerLease();
  SamplerLease(const SamplerLease&) = delete;
  SamplerLease& operator=(const SamplerLease&) = delete;
  SamplerLease(SamplerLease&&) = delete;
  SamplerLease& operator=(SamplerLease&&) = delete;

  void SetPeriod(int period_ms);
  /// Asks the thread for a read now (see Sampler::RequestRead); nothing once released.
  void RequestRead();
  /// Registers this lease's doorbell with the thread (one per lease; Release() removes it).
  void SetDoorbell(std::shared_ptr<Doorbell> doorbell);
  /// Idempotent. Makes no JS call: safe from a finaliser and from an environment's cleanup.
  void Release();

 private:
  std::mutex mutex_;
  std::optional<SamplerRegistry::Reference> reference_;  // guarded by mutex_
  std::shared_ptr<Doorbell> doorbell_;                   // guarded by mutex_
};

}  // namespace giul
