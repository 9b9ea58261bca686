// One reference to a device's sampler, held by a JS object and by its environment's addon data;
// whichever lets go first (release(), the object's finaliser, the environment's cleanup) drops it.
#pragma once

#include <mutex>
#include <optional>

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
  /// Idempotent.
  void Release();

 private:
  std::mutex mutex_;
  std::optional<SamplerRegistry::Reference> reference_;
};

}  // namespace giul
