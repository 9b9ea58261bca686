// The process-wide set of sampler threads, one per device, shared by every reference from every
// environment. Stopping never blocks the caller: a thread asked to stop is joined once it has
// returned (on a later call). At process exit every thread left is stopped and joined, except one
// still inside a driver call after a short wait: that one is abandoned (detached, its sampler kept
// alive for good), so that a driver call that never returns cannot hold the exit.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "failure.h"
#include "sampler.h"

namespace giul {

class SamplerRegistry {
 public:
  struct Reference {
    std::shared_ptr<Sampler> sampler;
    uint64_t id;
  };

  /// The process-wide registry (never destroyed; ShutdownAtExit() runs from a static destructor).
  static SamplerRegistry& Instance();

  SamplerRegistry(const SamplerRegistry&) = delete;
  SamplerRegistry& operator=(const SamplerRegistry&) = delete;
  SamplerRegistry(SamplerRegistry&&) = delete;
  SamplerRegistry& operator=(SamplerRegistry&&) = delete;

  using ReadsFactory = std::function<std::unique_ptr<CardReads>()>;
  /// Takes a reference to the device's thread (one per vendor and index), starting one with
  /// `make_reads()` if none runs. Makes no call into the vendor's library.
  Result<Reference> Acquire(CardVendor vendor, unsigned int index, const ReadsFactory& make_reads,
                            int period_ms);
  /// Drops a reference; the last one stops the thread (without waiting for it).
  void Release(const Reference& reference);
  /// Threads whose function has not returned yet.
  int AliveThreads();
  /// A stopped thread inside a driver call for longer than this is stuck: no other thread is
  /// started for its device until it returns.
  static constexpr std::chrono::seconds kStuckAfter{1};
  /// How long the exit waits, in all, for threads to finish the calls they are in.
  static constexpr std::chrono::milliseconds kExitWait{50};

  /// Stops every thread and joins those that finish within kExitWait; abandons the others. Later
  /// Acquire calls fail.
  void ShutdownAtExit();

 private:
  SamplerRegistry() = default;
  ~SamplerRegistry() = default;
  void ReapLocked();

  std::mutex mutex_;
  bool shut_down_ = false;
  using Key = std::pair<CardVendor, unsigned int>;
  std::map<Key, std::shared_ptr<Sampler>> active_;
  std::vector<std::shared_ptr<Sampler>> stopping_;
  /// Threads left running at exit, stuck in a call; their samplers are never freed.
  std::vector<std::shared_ptr<Sampler>> abandoned_;
};

}  // namespace giul
