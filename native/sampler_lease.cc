#include "sampler_lease.h"

#include <utility>

namespace giul {

SamplerLease::SamplerLease(SamplerRegistry::Reference reference)
    : reference_(std::move(reference)) {}

SamplerLease::~SamplerLease() { Release(); }

void SamplerLease::SetPeriod(int period_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reference_) {
    reference_->sampler->SetPeriod(reference_->id, period_ms);
  }
}

void SamplerLease::Release() {
  std::optional<SamplerRegistry::Reference> reference;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reference.swap(reference_);
  }
  if (reference) {
    SamplerRegistry::Instance().Release(*reference);
  }
}

}  // namespace giul
