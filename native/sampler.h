// One device's sampling thread: reads the energy counter and power on a fixed period and right
// after windows' edges when asked, stamps each tick with CLOCK_MONOTONIC, integrates power, flags
// faults, writes the ring, and rings the doorbells of those waiting (sampler.cc: when it reads;
// sampler_tick.cc: what a read does). Shared by every reference to the device in the process (see
// SamplerRegistry), which owns its lifetime.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "card_reads.h"
#include "doorbell.h"
#include "ring.h"

namespace giul {

class Sampler {
 public:
  static constexpr int kMinPeriodMs = 1;
  static constexpr int kMaxPeriodMs = 1000;
  static constexpr int kDefaultPeriodMs = 10;
  /// While no read has ever succeeded, the thread retries no faster than this.
  static constexpr int kFailedPeriodMs = 100;
  /// For its first kLearningMs a new sampler ticks at most this far apart, whatever period is
  /// asked: the reads then bound how often the energy counter updates (src/edges/staleness.ts),
  /// which a long period alone cannot show for many seconds.
  static constexpr int kLearningPeriodMs = 2;
  static constexpr int kLearningMs = 250;

  /// `vendor` names the thread ("giul-gpu0", "giul-amd0") and keys it in the registry.
  Sampler(CardVendor vendor, unsigned int index, std::unique_ptr<CardReads> reads);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;
  Sampler(Sampler&&) = delete;
  Sampler& operator=(Sampler&&) = delete;

  /// Starts the thread; throws std::system_error when it cannot be created.
  void Start();
  /// Sets the stop flag and wakes the thread; it exits after the NVML call in progress, if any,
  /// making no further call.
  void RequestStop();
  /// True once the thread function has returned (join() then does not block).
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  /// How long the thread has been inside its current tick's NVML calls (ns), 0 between ticks.
  int64_t InCallForNs(int64_t now_ns) const;
  void Join();
  /// Waits until the thread has finished or `deadline` has passed; whether it finished.
  bool WaitFinished(std::chrono::steady_clock::time_point deadline);
  /// Lets the thread go without joining it (one stuck in a driver call at exit). The caller keeps
  /// this object alive for good: the thread still uses it when its call returns.
  void Abandon();

  /// Reference bookkeeping; the registry serialises these under its own lock.
  uint64_t AddReference(int period_ms);
  /// Returns the references left.
  size_t RemoveReference(uint64_t id);
  void SetPeriod(uint64_t id, int period_ms);

  unsigned int index() const { return index_; }
  CardVendor vendor() const { return vendor_; }
  int64_t epoch_ns() const { return epoch_ns_; }
  const std::shared_ptr<Ring>& ring() const { return ring_; }

  static int ClampPeriodMs(double period_ms);

  /// Any thread: asks for a read as soon as the thread can (never sooner than MinReadGap() after
  /// the start of the tick before); the next periodic read comes a period after it. The armed
  /// doorbells ring after it.
  void RequestRead();
  /// A requested read waits at least a quarter of the period after the previous tick started,
  /// clamped to [kMinReadGapNs, kMaxReadGapNs]: however many windows open and close, the thread
  /// reads at most 4 times per period (at most 2,000 times a second).
  static constexpr int64_t kMinReadGapNs = 500'000;
  static constexpr int64_t kMaxReadGapNs = 2'500'000;
  static std::chrono::nanoseconds MinReadGap(std::chrono::nanoseconds period);
  /// Doorbells rung after every published tick when armed (see doorbell.h).
  void AddDoorbell(const std::shared_ptr<Doorbell>& doorbell);
  void RemoveDoorbell(const std::shared_ptr<Doorbell>& doorbell);

 private:
  enum class Support { kUnknown, kYes, kNo };

  /// What one tick read (defined in sampler.cc).
  struct TickReads;

  void Run();
  /// Waits for the next tick: the periodic deadline, a requested read, or a stop (false).
  bool WaitForTick(std::chrono::steady_clock::time_point& scheduled);
  void RingDoorbells(bool counter_changed);
  /// One sample: open the device, read the counter, read power, check the counter, integrate
  /// power, tally faults, publish into the ring. Each step below is one of these.
  /// One read of the card, published; whether the energy counter read changed (or failed).
  bool Tick();
  bool Stopping() const { return stop_.load(std::memory_order_acquire); }
  /// Gets the device handle (again after the GPU was lost); true when the thread has one.
  bool OpenDevice(TickReads& reads);
  /// Reads the energy counter, learning whether the card has one.
  void ReadCounter(TickReads& reads);
  /// Reads power from the best source the card has (see CardReads::ReadPower).
  void ReadPower(TickReads& reads);
  /// Flags a counter that went backwards or jumped, and learns its update step.
  void TrackCounter(TickReads& reads, int64_t t);
  /// Adds the power reading to the running integral (trapezoids).
  void IntegratePower(TickReads& reads);
  /// Counts faults, keeps the last error and the failed state; returns whether the device failed.
  bool TallyFaults(const TickReads& reads);
  /// Writes the sample and the header into the ring under the seqlock.
  void Publish(const TickReads& reads, int64_t t, bool failed);
  std::chrono::nanoseconds PeriodLocked() const;

  const CardVendor vendor_;
  const unsigned int index_;
  const std::unique_ptr<CardReads> reads_;
  const std::shared_ptr<Ring> ring_;
  const int64_t epoch_ns_;

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::atomic<int64_t> tick_started_ns_{0};  // CLOCK_MONOTONIC when the tick in progress began
  std::mutex mutex_;
  std::condition_variable wake_;
  bool period_changed_ = false;  // guarded by mutex_
  // Set under mutex_ (so that the thread's wait cannot miss it), read without it by RequestRead:
  // a read already asked for and not yet begun serves every edge taken before it begins.
  std::atomic<bool> read_requested_{false};
  std::map<uint64_t, int> periods_;  // guarded by mutex_: reference id → period asked (ms)
  uint64_t next_id_ = 1;             // guarded by mutex_

  std::mutex doorbells_mutex_;
  std::vector<std::shared_ptr<Doorbell>> doorbells_;  // guarded by doorbells_mutex_

  // Owned by the thread.
  std::chrono::steady_clock::time_point last_tick_;
  /// When the thread began (the learning ticks' start).
  std::chrono::steady_clock::time_point started_;
  Support energy_ = Support::kUnknown;
  bool any_read_ok_ = false;
  bool failed_ = false;  // read by the thread only
  uint64_t head_ = 0;
  double faults_ = 0;
  double last_error_ = 0;
  double counter_header_ = 0;
  double power_source_ = 0;
  // Energy counter tracking.
  bool have_energy_ = false;
  unsigned long long prev_energy_ = 0;
  int64_t prev_energy_t_ = 0;
  bool change_seen_ = false;     // a change was observed since the first read (or a reset)
  int64_t before_change_t_ = 0;  // last read still showing the value before that change
  int64_t min_step_ns_ = 0;
  // Power integral.
  bool have_power_ = false;
  double prev_power_mw_ = 0;
  int64_t prev_power_t_ = 0;
  double integral_mj_ = 0;
};

}  // namespace giul
