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

void SamplerLease::RequestRead() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reference_) {
    reference_->sampler->RequestRead();
  }
}

void SamplerLease::SetDoorbell(std::shared_ptr<Doorbell> doorbell) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!reference_) {
    return;
  }
  if (doorbell_) {
    reference_->sampler->RemoveDoorbell(doorbell_);
  }
  doorbell_ = std::move(doorbell);
  reference_->sampler->AddDoorbell(doorbell_);
}

void SamplerLease::Release() {
  std::optional<SamplerRegistry::Reference> reference;
  std::shared_ptr<Doorbell> doorbell;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reference.swap(reference_);
    doorbell.swap(doorbell_);
  }
  if (!reference) {
    return;
  }
  if (doorbell) {
    reference->sampler->RemoveDoorbell(doorbell);
  }
  SamplerRegistry::Instance().Release(*reference);
}

}  // namespace giul
