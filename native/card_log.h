// A card's event log: windows opening, closing, changing weight and marking stages on one physical
// card, appended by every process of this user on the host (and every JS environment and copy of
// giul in each) so that they all split the card among all its windows. It lives in a shared-memory
// segment named after the card's UUID (/dev/shm/giul-<uid>-<group>-<key>, mode 0600), mapped by
// every process; where that cannot be had, in this process's memory alone (scope kProcess).
//
// The segment's first 8 bytes are, for every version of giul, a magic word and the layout version:
// a copy whose layout differs refuses to use it. A process table holds each participant's pid,
// start time and the weight and windows it has open, so that survivors close a dead process's
// windows (Reap). Appends take a spin lock in the segment, held for a few stores; a lock held by a
// dead process is taken over, one held too long gives up (kBusy). Every value read back from the
// segment is checked first: a foreign or garbage segment costs measurements, never the process.
// Layout constants mirror CardLogLayout in binding.d.ts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace giul {

struct CardLogLayout {
  static constexpr uint32_t kMagic = 0x4C554947;  // "GIUL", little-endian
  static constexpr uint32_t kVersion = 1;
  static constexpr size_t kParticipants = 64;
  static constexpr size_t kLogOffset = 4096;  // bytes: the part of the segment JS sees starts here
  static constexpr size_t kHeaderSlots = 8;
  static constexpr size_t kEntrySlots = 8;
  static constexpr size_t kCapacity = 65536;

  // Log header slots (slot 0 holds the seqlock generation and the layout version).
  static constexpr size_t kPublished = 1;
  static constexpr size_t kCapacitySlot = 2;
  static constexpr size_t kIdleW = 3;
  static constexpr size_t kOpen = 4;
  static constexpr size_t kWeight = 5;

  // Entry slots.
  static constexpr size_t kT = 0;  // ns since the segment's epoch
  static constexpr size_t kWeightBefore = 1;
  static constexpr size_t kWeightAfter = 2;
  static constexpr size_t kCountAfter = 3;
  static constexpr size_t kIdleAfter =
      4;  // the idle floor charged after the event (NaN: none open)
  static constexpr size_t kPid = 5;
  static constexpr size_t kSlot = 6;  // the appending participant's slot in the process table
  static constexpr size_t kKind = 7;

  // Kinds.
  static constexpr double kOpenKind = 1, kCloseKind = 2, kWeightKind = 3, kMarkKind = 4,
                          kCompensationKind = 5, kReapKind = 6;

  static constexpr size_t LogBytes() {
    return (kHeaderSlots + kCapacity * kEntrySlots) * sizeof(double);
  }
  static constexpr size_t SegmentBytes() { return kLogOffset + LogBytes(); }
};

class CardLog {
 public:
  enum class Scope { kHost, kProcess };
  /// Append codes (negative sequence numbers).
  static constexpr int64_t kBusy = -3;     // the lock could not be had in time
  static constexpr int64_t kCorrupt = -4;  // the segment holds values no giul wrote

  /// What Open found.
  struct Opened {
    std::shared_ptr<CardLog> log;  // null when refused
    std::string reason;            // why not host-wide (or why refused); empty when host-wide
  };

  /// The log of card `key` in sharing group `group` (both [A-Za-z0-9._-], at most 96 bytes): the
  /// host's segment, or this process's log with why, or (another layout in the segment) none.
  /// Cached per name for the life of the process (the mapping stays: JS buffers point into it).
  static Opened Open(const std::string& key, const std::string& group, bool process_only);

  ~CardLog();
  CardLog(const CardLog&) = delete;
  CardLog& operator=(const CardLog&) = delete;
  struct Slot;
  struct Header;

  Scope scope() const { return scope_; }
  void* log_data() { return base_ + CardLogLayout::kLogOffset; }
  size_t log_bytes() const { return CardLogLayout::LogBytes(); }
  int64_t epoch_ns() const { return epoch_ns_; }
  int slot() const { return slot_; }

  /// Appends one event for this process's participant; its sequence number, kBusy or kCorrupt.
  /// `delta_count` may be any integer (a compensation closes several windows). An open with an
  /// idle floor other than the card's keeps the card's.
  int64_t Append(double delta_weight, int64_t delta_count, double idle_w, double kind);
  /// Closes the windows of participants whose process is gone (pid and start time): how many
  /// participants were reaped. Reads /proc outside the lock. At most every 200 ms (else 0).
  int Reap();
  /// The pids of the live participants (this one included).
  std::vector<int> Pids();

 private:
  CardLog(unsigned char* base, size_t bytes, Scope scope);
  Header* header() { return reinterpret_cast<Header*>(base_); }
  double* slots() { return reinterpret_cast<double*>(base_ + CardLogLayout::kLogOffset); }
  std::atomic<uint32_t>& generation();
  bool Lock();
  void Unlock();
  /// Claims a participant slot (reaping the dead first); false when the table is full.
  bool Join();
  int64_t AppendLocked(double delta_weight, int64_t delta_count, double idle_w, double kind,
                       int slot);
  /// Reap() with mutex_ held.
  int ReapHeld();
  bool HeaderSane();

  unsigned char* const base_;
  const size_t bytes_;
  const Scope scope_;
  int64_t epoch_ns_ = 0;
  // This process's pid, read once (getpid() is a system call, and Lock() runs at every append):
  // a Node process never forks without exec, so no copy of this object outlives it in a child.
  const uint32_t pid_;
  int slot_ = -1;
  uint64_t id_ = 0;
  std::mutex mutex_;  // serialises this process's appends before the segment's lock
  int64_t last_reap_ns_ = 0;
};

/// Whether process `pid` started at `start_ticks` (/proc/<pid>/stat field 22) is alive; 0 ticks:
/// pid alone. A zombie counts as gone.
bool ProcessAlive(int pid, uint64_t start_ticks);
/// /proc/<pid>/stat's start time, 0 when unreadable.
uint64_t ProcessStartTicks(int pid);

}  // namespace giul
