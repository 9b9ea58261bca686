#include "sampler.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "monotonic_clock.h"

namespace giul {
namespace {

/// How late a tick runs after its place on the period's grid: frac(k × φ⁻¹) of a period, so that
/// over many ticks the reads fall at every offset from the card's own update instants (the energy
/// counter's cadence can then be locked onto from the changes the reads see; see
/// src/edges/cadence.ts). Consecutive ticks are 0.618 or 1.618 periods apart; the mean period is
/// unchanged.
std::chrono::nanoseconds Dither(uint64_t tick, std::chrono::nanoseconds period) {
  constexpr double kGoldenFraction = 0.6180339887498949;
  double fraction = std::fmod(static_cast<double>(tick) * kGoldenFraction, 1.0);
  return std::chrono::nanoseconds(
      static_cast<int64_t>(fraction * static_cast<double>(period.count())));
}

void NameThisThread(CardVendor vendor, unsigned int index) {
  std::string name = (vendor == CardVendor::kAmd ? "giul-amd" : "giul-gpu") + std::to_string(index);
  name.resize(std::min<size_t>(name.size(), 15));  // the kernel keeps 15 bytes
  pthread_setname_np(pthread_self(), name.c_str());
}

}  // namespace

Sampler::Sampler(CardVendor vendor, unsigned int index, std::unique_ptr<CardReads> reads)
    : vendor_(vendor),
      index_(index),
      reads_(std::move(reads)),
      ring_(std::make_shared<Ring>()),
      epoch_ns_(MonotonicNs()) {
  ring_->header(RingLayout::kPeriodNs) = kDefaultPeriodMs * 1e6;
  ring_->header(RingLayout::kPowerQuantumMw) = reads_->PowerQuantumMw();
}

Sampler::~Sampler() {
  RequestStop();
  Join();
}

int Sampler::ClampPeriodMs(double period_ms) {
  if (!(period_ms >= kMinPeriodMs)) {
    return kMinPeriodMs;
  }
  if (period_ms > kMaxPeriodMs) {
    return kMaxPeriodMs;
  }
  return static_cast<int>(std::lround(period_ms));
}

void Sampler::Start() { thread_ = std::thread(&Sampler::Run, this); }

void Sampler::RequestStop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
}

void Sampler::Join() {
  if (thread_.joinable()) {
    thread_.join();
  }
}

bool Sampler::WaitFinished(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return wake_.wait_until(lock, deadline,
                          [this] { return finished_.load(std::memory_order_acquire); });
}

void Sampler::Abandon() {
  if (thread_.joinable()) {
    thread_.detach();
  }
}

uint64_t Sampler::AddReference(int period_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t id = next_id_++;
  periods_[id] = period_ms;
  period_changed_ = true;
  wake_.notify_all();
  return id;
}

size_t Sampler::RemoveReference(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  periods_.erase(id);
  period_changed_ = true;
  wake_.notify_all();
  return periods_.size();
}

void Sampler::SetPeriod(uint64_t id, int period_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = periods_.find(id);
  if (it == periods_.end()) {
    return;
  }
  it->second = period_ms;
  period_changed_ = true;
  wake_.notify_all();
}

std::chrono::nanoseconds Sampler::PeriodLocked() const {
  int period_ms = kMaxPeriodMs;
  for (const auto& [id, ms] : periods_) {
    period_ms = std::min(period_ms, ms);
  }
  if (periods_.empty()) {
    period_ms = kDefaultPeriodMs;
  }
  if (std::chrono::steady_clock::now() - started_ < std::chrono::milliseconds(kLearningMs)) {
    period_ms = std::min(period_ms, kLearningPeriodMs);
  }
  if (failed_) {
    period_ms = std::max(period_ms, kFailedPeriodMs);
  }
  return std::chrono::milliseconds(period_ms);
}

std::chrono::nanoseconds Sampler::MinReadGap(std::chrono::nanoseconds period) {
  return std::chrono::nanoseconds(
      std::clamp<int64_t>(period.count() / 8, kMinReadGapNs, kMaxReadGapNs));
}

void Sampler::RequestRead() {
  // Asked already and not begun: that read comes after this edge too. (The thread clears the flag
  // just before the read begins, so a true seen here is a read still to begin.) No lock, no wake:
  // a crowd of windows costs one wake-up per read, not one per edge.
  if (read_requested_.load(std::memory_order_acquire)) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    read_requested_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
}

void Sampler::AddDoorbell(const std::shared_ptr<Doorbell>& doorbell) {
  std::lock_guard<std::mutex> lock(doorbells_mutex_);
  doorbells_.push_back(doorbell);
}

void Sampler::RemoveDoorbell(const std::shared_ptr<Doorbell>& doorbell) {
  std::lock_guard<std::mutex> lock(doorbells_mutex_);
  for (auto it = doorbells_.begin(); it != doorbells_.end(); ++it) {
    if (*it == doorbell) {
      doorbells_.erase(it);
      return;
    }
  }
}

void Sampler::RingDoorbells(bool counter_changed) {
  std::lock_guard<std::mutex> lock(doorbells_mutex_);
  for (const auto& doorbell : doorbells_) {
    doorbell->RingIfArmed(counter_changed);
  }
}

void Sampler::Run() {
  NameThisThread(vendor_, index_);
  auto scheduled = std::chrono::steady_clock::now();  // CLOCK_MONOTONIC
  started_ = scheduled;  // the thread's own, as last_tick_: read only by it (PeriodLocked)
  while (!stop_.load(std::memory_order_acquire)) {
    last_tick_ = std::chrono::steady_clock::now();
    const bool counter_changed = Tick();
    RingDoorbells(counter_changed);
    if (!WaitForTick(scheduled)) {
      break;
    }
  }
  ring_->BeginWrite();
  ring_->header(RingLayout::kState) = RingLayout::kStopped;
  ring_->EndWrite();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_.store(true, std::memory_order_release);
  }
  wake_.notify_all();  // WaitFinished
}

bool Sampler::WaitForTick(std::chrono::steady_clock::time_point& scheduled) {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  const auto stopping = [this] { return stop_.load(std::memory_order_acquire); };
  // Sleep to an absolute deadline (no drift); a period change recomputes it, a requested read
  // comes first (and the period counts from it), a stop ends it.
  for (;;) {
    auto deadline = scheduled + PeriodLocked();
    bool woken = wake_.wait_until(lock, deadline + Dither(head_, PeriodLocked()), [this] {
      return stop_.load(std::memory_order_acquire) || period_changed_ ||
             read_requested_.load(std::memory_order_acquire);
    });
    if (!woken) {
      scheduled = deadline;
      break;
    }
    if (stopping()) {
      return false;
    }
    if (read_requested_.load(std::memory_order_acquire)) {
      auto earliest = last_tick_ + MinReadGap(PeriodLocked());
      if (wake_.wait_until(lock, earliest, stopping)) {
        return false;
      }
      read_requested_.store(false, std::memory_order_release);
      // The read asked for stands in for the periodic one: the next comes a period after it, so
      // that windows asking for reads do not add them to the period's but take their place.
      scheduled = Clock::now();
      return true;
    }
    period_changed_ = false;
  }
  auto now = Clock::now();
  if (now - scheduled > 2 * PeriodLocked()) {
    scheduled = now;  // fell behind by more than the dither allows (slow NVML): skip, never burst
  }
  return true;
}

}  // namespace giul
