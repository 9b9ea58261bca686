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

uint64_t SamplerLease::id() {
  std::lock_guard<std::mutex> lock(mutex_);
  return reference_ ? reference_->id : 0;
}

int64_t SamplerLease::LedgerAppend(double delta_weight, int delta_count, double idle_w,
                                   const double (&tag)[3], int64_t* t) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!reference_) {
    return kReleased;
  }
  LedgerLog::Event event;
  event.delta_weight = delta_weight;
  event.delta_count = delta_count;
  event.idle_w = idle_w;
  event.ref = static_cast<double>(reference_->id);
  event.owner = tag[0];
  event.own = tag[1];
  event.kind = tag[2];
  LedgerLog::Outcome outcome = reference_->sampler->LedgerAppend(event);
  if (outcome.sequence < 0) {
    return outcome.sequence;
  }
  if (t != nullptr) {
    *t = outcome.t;
  }
  // Every edge sits on a read: the thread reads right after it (see Sampler::RequestRead).
  reference_->sampler->RequestRead();
  // A clamped close (none open on the card) changed nothing, so it is not this lease's to undo.
  if (outcome.count_delta == delta_count) {
    weight_sum_ += delta_weight;
    count_sum_ += delta_count;
  }
  if (count_sum_ == 0) {
    weight_sum_ = 0;  // none of this lease's windows is open: what is left is rounding
  }
  return outcome.sequence;
}

void SamplerLease::Release() {
  std::optional<SamplerRegistry::Reference> reference;
  double weight_sum = 0;
  int64_t count_sum = 0;
  std::shared_ptr<Doorbell> doorbell;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reference.swap(reference_);
    std::swap(weight_sum, weight_sum_);
    std::swap(count_sum, count_sum_);
    doorbell.swap(doorbell_);
  }
  if (!reference) {
    return;
  }
  if (doorbell) {
    reference->sampler->RemoveDoorbell(doorbell);
  }
  // The reference still holds the sampler, so its log is alive here whatever else is going away.
  if (count_sum != 0 || weight_sum != 0) {
    LedgerLog::Event event;
    event.delta_weight = -weight_sum;
    event.delta_count = -count_sum;
    event.compensation = true;
    event.ref = static_cast<double>(reference->id);
    event.kind = kCompensationKind;
    reference->sampler->LedgerAppend(event);
  }
  SamplerRegistry::Instance().Release(*reference);
}

}  // namespace giul
