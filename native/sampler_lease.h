// One reference to a device's sampler, held by a JS object and by its environment's addon data;
// whichever lets go first (release(), the object's finaliser, the environment's cleanup) drops it.
// It also remembers what it appended to the device's event log, so that dropping it closes the
// windows its environment left open.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "doorbell.h"
#include "ledger_log.h"
#include "sampler_registry.h"

namespace giul {

class SamplerLease {
 public:
  /// What LedgerAppend returns once the lease is released: nothing was appended.
  static constexpr int64_t kReleased = -2;
  /// The kKind of the event a dropped reference appends to close what it left open.
  static constexpr double kCompensationKind = 4;

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
  /// Appends to the device's event log and keeps the sums of what this lease appended. Returns
  /// the sequence number, LedgerLog::kIdleConflict, or kReleased.
  /// `tag` is what the environment says of the event (stored as given: kOwner, kOwn, kKind).
  /// `t`, when given, gets the entry's kT once it is appended.
  int64_t LedgerAppend(double delta_weight, int delta_count, double idle_w, const double (&tag)[3],
                       int64_t* t = nullptr);
  /// This reference's id among its sampler's (the kRef of what it appends); 0 once released.
  uint64_t id();
  /// Idempotent. When this lease's windows are not all closed, first appends one event that
  /// closes them (its summed weight and count, negated). Makes no JS call: safe from a finaliser
  /// and from an environment's cleanup.
  void Release();

 private:
  std::mutex mutex_;
  std::optional<SamplerRegistry::Reference> reference_;  // guarded by mutex_
  double weight_sum_ = 0;                                // guarded by mutex_
  int64_t count_sum_ = 0;                                // guarded by mutex_
  std::shared_ptr<Doorbell> doorbell_;                   // guarded by mutex_
};

}  // namespace giul
