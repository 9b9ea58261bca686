#include "sampler_registry.h"

#include <chrono>
#include <new>
#include <string>
#include <system_error>

#include "call_pool.h"
#include "monotonic_clock.h"

namespace giul {
namespace {

// Stops the threads still running when the process exits (return from main, exit(),
// process.exit()), before the runtime tears down what they use; and tells the NVML call threads
// that a call finishing from now on has nobody to answer.
struct ShutdownAtExitGuard {
  ShutdownAtExitGuard() {
    SamplerRegistry::Instance();
    CallPool::Instance();
  }
  ~ShutdownAtExitGuard() {
    CallPool::MarkExiting();
    SamplerRegistry::Instance().ShutdownAtExit();
  }
};
const ShutdownAtExitGuard kShutdownAtExit;

}  // namespace

SamplerRegistry& SamplerRegistry::Instance() {
  // Process-wide by design; leaked so that a worker thread still running during exit never
  // touches a destroyed object.
  static auto* instance = new SamplerRegistry();
  return *instance;
}

Result<SamplerRegistry::Reference> SamplerRegistry::Acquire(CardVendor vendor, unsigned int index,
                                                            const ReadsFactory& make_reads,
                                                            int period_ms) {
  const Key key{vendor, index};
  std::lock_guard<std::mutex> lock(mutex_);
  ReapLocked();
  if (shut_down_) {
    return Failure(Failure::Code::kSamplerFailed, std::nullopt, "the process is exiting");
  }
  auto it = active_.find(key);
  if (it != active_.end()) {
    return Reference{it->second, it->second->AddReference(period_ms)};
  }
  // A driver that does not answer would otherwise cost a thread stuck in it per start (each time
  // the last window on the card lets its sampler go and a new window comes): one is enough.
  const int64_t now = MonotonicNs();
  for (const auto& stopping : stopping_) {
    int64_t stuck_ns = stopping->InCallForNs(now);
    if (stopping->index() == index && stopping->vendor() == vendor && !stopping->finished() &&
        stuck_ns > std::chrono::nanoseconds(kStuckAfter).count()) {
      return Failure(Failure::Code::kSamplerFailed, std::nullopt,
                     "the sampling thread of GPU " + std::to_string(index) +
                         " stalled: it has been inside a driver call for " +
                         std::to_string(stuck_ns / 1000000) +
                         " ms, and no other is started until it returns");
    }
  }
  try {
    auto sampler = std::make_shared<Sampler>(vendor, index, make_reads());
    uint64_t id = sampler->AddReference(period_ms);
    sampler->Start();
    active_.emplace(key, sampler);
    return Reference{std::move(sampler), id};
  } catch (const std::system_error& error) {
    return Failure(Failure::Code::kSamplerFailed, std::nullopt,
                   std::string("cannot start the sampling thread: ") + error.what());
  } catch (const std::bad_alloc&) {
    return Failure(Failure::Code::kSamplerFailed, std::nullopt,
                   "out of memory for the sampler ring");
  }
}

void SamplerRegistry::Release(const Reference& reference) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reference.sampler->RemoveReference(reference.id) == 0) {
    auto it = active_.find(Key{reference.sampler->vendor(), reference.sampler->index()});
    if (it != active_.end() && it->second == reference.sampler) {
      active_.erase(it);
      reference.sampler->RequestStop();
      stopping_.push_back(reference.sampler);
    }
  }
  ReapLocked();
}

void SamplerRegistry::ReapLocked() {
  for (auto it = stopping_.begin(); it != stopping_.end();) {
    if ((*it)->finished()) {
      (*it)->Join();  // returns at once: the thread function has returned
      it = stopping_.erase(it);
    } else {
      ++it;
    }
  }
}

int SamplerRegistry::AliveThreads() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReapLocked();
  int alive = 0;
  for (const auto& [key, sampler] : active_) {
    alive += sampler->finished() ? 0 : 1;
  }
  for (const auto& sampler : stopping_) {
    alive += sampler->finished() ? 0 : 1;
  }
  return alive;
}

void SamplerRegistry::ShutdownAtExit() {
  std::vector<std::shared_ptr<Sampler>> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_down_ = true;
    for (auto& [key, sampler] : active_) {
      all.push_back(sampler);
    }
    active_.clear();
    for (auto& sampler : stopping_) {
      all.push_back(sampler);
    }
    stopping_.clear();
  }
  for (auto& sampler : all) {
    sampler->RequestStop();
  }
  // A thread between ticks or in a normal call stops within microseconds. One inside a driver
  // call that does not return (a hung GPU, 20 s per call) cannot be interrupted, and joining it
  // would hold the exit as long as the call: after the wait it is detached instead, and its
  // sampler (ring, event log, library) is kept for good, so that whatever the thread touches
  // when its call returns is still there until the process is gone. It makes no further NVML
  // call once asked to stop.
  const auto deadline = std::chrono::steady_clock::now() + kExitWait;
  for (auto& sampler : all) {
    if (sampler->WaitFinished(deadline)) {
      sampler->Join();
    } else {
      sampler->Abandon();
      std::lock_guard<std::mutex> lock(mutex_);
      abandoned_.push_back(sampler);
    }
  }
}

}  // namespace giul
