#include "ledger_log.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "monotonic_clock.h"

namespace giul {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free);

LedgerLog::LedgerLog(int64_t epoch_ns)
    : epoch_ns_(epoch_ns),
      slot_count_(LedgerLayout::kHeaderSlots + LedgerLayout::kCapacity * LedgerLayout::kEntrySlots),
      slots_(AllocateZeroedSlots(slot_count_)),
      idle_w_(kNaN) {
  auto* words = reinterpret_cast<unsigned char*>(slots_.get());
  new (words) std::atomic<uint32_t>(0);
  const uint32_t version = LedgerLayout::kVersion;
  std::memcpy(words + sizeof(uint32_t), &version, sizeof(version));
  slots_[LedgerLayout::kCapacitySlot] = static_cast<double>(LedgerLayout::kCapacity);
  slots_[LedgerLayout::kIdleW] = kNaN;
}

std::atomic<uint32_t>& LedgerLog::generation() {
  return *std::launder(reinterpret_cast<std::atomic<uint32_t>*>(slots_.get()));
}

LedgerLog::Outcome LedgerLog::Append(const Event& event, const std::atomic<uint64_t>& ring_head) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool opens = event.delta_count > 0;
  // (No floor to conflict with while NaN: only a compensation can open windows without one.)
  if (opens && !event.compensation && open_ > 0 && !std::isnan(idle_w_) &&
      event.idle_w != idle_w_) {
    return Outcome{kIdleConflict, 0};
  }
  // The head first, then the clock: every sample before eRingHead was stamped before eT.
  const uint64_t head = ring_head.load(std::memory_order_acquire);
  const int64_t t = MonotonicNs() - epoch_ns_;

  const int64_t count_before = open_;
  const double weight_before = weight_;
  int64_t count_after = count_before + event.delta_count;
  if (count_after < 0) {
    count_after = 0;  // a close with none open: clamped, still appended
  }
  // Floating sums drift: an empty card has exactly no weight.
  const double weight_after = count_after == 0 ? 0.0 : weight_before + event.delta_weight;
  if (count_after == 0) {
    idle_w_ = kNaN;
  } else if (opens && !event.compensation) {
    idle_w_ = event.idle_w;
  }
  open_ = count_after;
  weight_ = weight_after;
  const uint64_t k = published_++;

  auto& g = generation();
  // A release store, as the ring's (ring.cc BeginWrite): a reader that sees the odd generation
  // sees every entry appended before.
  g.store(g.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_release);
  double* e = entry(k);
  e[LedgerLayout::kT] = static_cast<double>(t);
  e[LedgerLayout::kRingHead] = static_cast<double>(head);
  e[LedgerLayout::kWeightBefore] = weight_before;
  e[LedgerLayout::kWeightAfter] = weight_after;
  e[LedgerLayout::kCountAfter] = static_cast<double>(count_after);
  e[LedgerLayout::kRef] = event.ref;
  e[LedgerLayout::kOwner] = event.owner;
  e[LedgerLayout::kOwn] = event.own;
  e[LedgerLayout::kKind] = event.kind;
  e[LedgerLayout::kEventIdleW] = opens && !event.compensation ? event.idle_w : kNaN;
  slots_[LedgerLayout::kPublished] = static_cast<double>(published_);
  slots_[LedgerLayout::kIdleW] = idle_w_;
  slots_[LedgerLayout::kOpen] = static_cast<double>(open_);
  slots_[LedgerLayout::kWeight] = weight_;
  g.store(g.load(std::memory_order_relaxed) + 1, std::memory_order_release);

  return Outcome{static_cast<int64_t>(k), count_after - count_before, t};
}

}  // namespace giul
