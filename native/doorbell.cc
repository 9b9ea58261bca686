#include "doorbell.h"

namespace giul {

void Doorbell::RingIfArmed(bool counter_changed) {
  if (!armed_.load(std::memory_order_acquire)) {
    return;
  }
  if (!counter_changed && counter_only_.load(std::memory_order_relaxed)) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!attached_ || !armed_.exchange(false, std::memory_order_acq_rel)) {
    return;
  }
  // napi_closing while the environment is torn down: then nobody waits any more.
  tsfn_.NonBlockingCall();
}

bool Doorbell::detached() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !attached_;
}

void Doorbell::Detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  attached_ = false;
}

}  // namespace giul
