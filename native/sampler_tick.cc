// What one tick of a device's sampling thread does (Sampler::Tick): open the device, read the
// energy counter and power (through the vendor's CardReads), check the counter, integrate power,
// tally faults, publish the sample into the ring. When ticks happen (the period, reads asked for,
// the doorbells) is sampler.cc's.
#include <cmath>
#include <limits>

#include "monotonic_clock.h"
#include "sampler.h"

namespace giul {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// A counter that rises faster than this is faulty (mJ per ns = 5 kW).
constexpr double kMaxMjPerNs = 5000.0 * 1000.0 / 1e9;

}  // namespace

/// What one tick read, and the first thing that went wrong while reading it (the vendor's code).
struct Sampler::TickReads {
  uint32_t flags = 0;
  int error = 0;
  // The whole tick's reads, stamped when the counter could not be read.
  int64_t started = 0;
  int64_t finished = 0;
  // The counter's reading is stamped with its own call, not the whole tick: a thread preempted
  // between the energy and the power reads must not shift the counter in time.
  bool energy_ok = false;
  unsigned long long energy = 0;
  int64_t energy_started = 0;
  int64_t energy_finished = 0;
  // The power reading gets its own stamp too, for the integral and for placing energy inside the
  // counter's steps.
  bool power_ok = false;
  double power_mw = kNaN;
  int64_t power_read_t = 0;
  int64_t power_read_ns = 0;

  /// Keeps the first failure of the tick.
  void NoteError(int r) {
    if (error == 0) {
      error = r;
    }
  }
  /// The instant the tick's values belong to: the counter's own call when it answered.
  int64_t StampNs() const {
    return energy_ok ? energy_started + (energy_finished - energy_started) / 2
                     : started + (finished - started) / 2;
  }
  /// How long the stamped read took: its value belongs to some instant in that interval.
  int64_t ReadNs() const {
    return energy_ok ? energy_finished - energy_started : finished - started;
  }
};

int64_t Sampler::InCallForNs(int64_t now_ns) const {
  int64_t started = tick_started_ns_.load(std::memory_order_acquire);
  return started == 0 ? 0 : now_ns - started;
}

bool Sampler::Tick() {
  TickReads reads;
  reads.started = MonotonicNs();
  tick_started_ns_.store(reads.started, std::memory_order_release);
  // Asked to stop while a call was in progress (a slow or stuck driver): make no further call.
  if (OpenDevice(reads) && !Stopping()) {
    ReadCounter(reads);
    if (!Stopping()) {
      ReadPower(reads);
    }
  }
  if (reads_->Lost(reads.error)) {
    // A lost card's handle is not trusted again: the next tick asks for the device anew, and
    // the card is read again once it answers (after a reset, say).
    reads_->Forget();
  }
  reads.finished = MonotonicNs();
  tick_started_ns_.store(0, std::memory_order_release);
  const int64_t t = reads.StampNs() - epoch_ns_;
  const bool counter_changed = !reads.energy_ok || !have_energy_ || reads.energy != prev_energy_;
  TrackCounter(reads, t);
  IntegratePower(reads);
  const bool failed = TallyFaults(reads);
  Publish(reads, t, failed);
  return counter_changed || failed;
}

bool Sampler::OpenDevice(TickReads& reads) {
  const int r = reads_->Open();
  if (r != 0) {
    reads.NoteError(r);
    if (any_read_ok_) {
      reads.flags |= SampleFlag::kReadFailed;  // the card answered before: this is a fault
    }
  }
  return r == 0;
}

void Sampler::ReadCounter(TickReads& reads) {
  if (energy_ == Support::kNo || !reads_->HasCounter()) {
    return;
  }
  reads.energy_started = MonotonicNs();
  const int r = reads_->ReadCounter(&reads.energy);
  reads.energy_finished = MonotonicNs();
  if (r == 0) {
    reads.energy_ok = true;
    energy_ = Support::kYes;
  } else if (energy_ == Support::kYes) {
    // A read that did not answer on a card that answered it before: a fault of the sample.
    reads.flags |= SampleFlag::kReadFailed;
    reads.NoteError(r);
  } else if (reads_->Unsupported(r)) {
    energy_ = Support::kNo;
  } else {
    reads.NoteError(r);
  }
}

void Sampler::ReadPower(TickReads& reads) {
  const CardReads::Power power = reads_->ReadPower();
  reads.power_read_t = power.t;
  reads.power_read_ns = power.read_ns;
  if (power.ok) {
    reads.power_mw = power.mw;
    reads.power_ok = true;
    power_source_ = power.source;
    return;
  }
  if (power.fault) {
    reads.flags |= SampleFlag::kReadFailed;
  }
  if (power.error != 0) {
    reads.NoteError(power.error);
  }
}

void Sampler::TrackCounter(TickReads& reads, int64_t t) {
  if (!reads.energy_ok) {
    return;
  }
  const unsigned long long energy = reads.energy;
  reads.flags |= SampleFlag::kEnergyOk;
  counter_header_ = 1;
  if (have_energy_ && energy < prev_energy_) {
    reads.flags |= SampleFlag::kCounterBackwards;  // driver reload: start over from this value
    change_seen_ = false;
  } else if (have_energy_ && energy > prev_energy_) {
    if (change_seen_) {
      // The previous change happened after before_change_t_, this one by t: the true rate is at
      // least delta / (t - before_change_t_), so this never flags a slow staircase.
      auto delta = static_cast<double>(energy - prev_energy_) * reads_->MjPerCount();
      if (delta > kMaxMjPerNs * static_cast<double>(t - before_change_t_)) {
        reads.flags |= SampleFlag::kCounterJump;
      }
      // The same interval bounds the counter's update step from above: the previous change came
      // after before_change_t_ and this one by t. (From the previous change's observation
      // instead, a late observation would make the next interval look short.)
      int64_t step = t - before_change_t_;
      if (min_step_ns_ == 0 || step < min_step_ns_) {
        min_step_ns_ = step;
      }
    }
    change_seen_ = true;
    before_change_t_ = prev_energy_t_;
  }
  have_energy_ = true;
  prev_energy_ = energy;
  prev_energy_t_ = t;
}

void Sampler::IntegratePower(TickReads& reads) {
  if (!reads.power_ok) {
    return;
  }
  reads.flags |= SampleFlag::kPowerOk;
  if (have_power_) {
    // mW × ns / 1e9 = mJ.
    integral_mj_ += (prev_power_mw_ + reads.power_mw) / 2.0 *
                    static_cast<double>(reads.power_read_t - prev_power_t_) / 1e9;
  }
  have_power_ = true;
  prev_power_mw_ = reads.power_mw;
  prev_power_t_ = reads.power_read_t;
}

bool Sampler::TallyFaults(const TickReads& reads) {
  if (reads.energy_ok || reads.power_ok) {
    any_read_ok_ = true;
  }
  if ((reads.flags & SampleFlag::kFaults) != 0) {
    faults_ += 1;
  }
  if (reads.error != 0) {
    last_error_ = reads.error;
  } else if (!any_read_ok_ && last_error_ == 0) {
    last_error_ = reads_->NothingReadable();  // nothing this device offers can be read
  }
  bool failed = !any_read_ok_;
  if (failed != failed_) {
    std::lock_guard<std::mutex> lock(mutex_);
    failed_ = failed;
  }
  return failed;
}

void Sampler::Publish(const TickReads& reads, int64_t t, bool failed) {
  double period_ns;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    period_ns = static_cast<double>(PeriodLocked().count());
  }

  ring_->BeginWrite();
  double* sample = ring_->sample(head_);
  sample[RingLayout::kT] = static_cast<double>(t);
  sample[RingLayout::kEnergyMj] =
      reads.energy_ok ? static_cast<double>(reads.energy) * reads_->MjPerCount() : kNaN;
  sample[RingLayout::kPowerMw] = reads.power_mw;
  sample[RingLayout::kIntegralMj] = integral_mj_;
  sample[RingLayout::kFlags] = reads.flags;
  sample[RingLayout::kError] = reads.error;
  sample[RingLayout::kFaults] = faults_;
  sample[RingLayout::kReadNs] = static_cast<double>(reads.ReadNs());
  sample[RingLayout::kPowerT] =
      reads.power_ok ? static_cast<double>(reads.power_read_t - epoch_ns_) : kNaN;
  sample[RingLayout::kPowerReadNs] = static_cast<double>(reads.power_read_ns);
  ++head_;
  ring_->header(RingLayout::kHead) = static_cast<double>(head_);
  // Before the seqlock closes: whoever sees this head in the ring sees it here too.
  ring_->header(RingLayout::kPeriodNs) = period_ns;
  ring_->header(RingLayout::kState) = failed ? RingLayout::kFailed : RingLayout::kRunning;
  ring_->header(RingLayout::kLastError) = last_error_;
  ring_->header(RingLayout::kCounter) = counter_header_;
  ring_->header(RingLayout::kPowerSource) = power_source_;
  ring_->header(RingLayout::kCounterStepNs) = static_cast<double>(min_step_ns_);
  ring_->header(RingLayout::kPowerQuantumMw) = reads_->PowerQuantumMw();
  ring_->EndWrite();
}

}  // namespace giul
