// How a sampling thread tells one JavaScript environment that a sample it waits for was written:
// the environment arms the doorbell (and may ask the thread for an immediate read), the thread
// rings it after its next published tick — once per arming, however many windows wait — through a
// thread-safe function, so that close() resolves as soon as its sample exists instead of when a
// timer next polls the ring.
#pragma once

#include <napi.h>

#include <atomic>
#include <mutex>

namespace giul {

class Doorbell {
 public:
  explicit Doorbell(Napi::ThreadSafeFunction tsfn) : tsfn_(tsfn) {}

  /// JS thread: ring once after the next published tick, or (`counter_only`) after the next one
  /// whose energy counter read changed or failed: what edges waiting for the counter's next update
  /// need, so that the ticks in between wake nobody.
  void Arm(bool counter_only = false) {
    counter_only_.store(counter_only, std::memory_order_relaxed);
    armed_.store(true, std::memory_order_release);
  }
  /// Sampling thread, after a tick: rings when armed (never blocks; the call is queued).
  void RingIfArmed(bool counter_changed);
  /// Whether Arm() was called since the last ring (the thread reads it to decide on a read).
  bool armed() const { return armed_.load(std::memory_order_acquire); }
  /// JS thread (the thread-safe function's finaliser): no ring may start after this returns.
  void Detach();
  /// Whether the thread-safe function was finalised (released, or closed with its environment):
  /// it must not be released again then, it is gone.
  bool detached();

 private:
  std::mutex mutex_;
  Napi::ThreadSafeFunction tsfn_;  // guarded by mutex_
  bool attached_ = true;           // guarded by mutex_
  std::atomic<bool> armed_{false};
  std::atomic<bool> counter_only_{false};
};

}  // namespace giul
