// A few threads of the addon's own for blocking NVML work (nvmlInit, device reads, process lists),
// instead of libuv's pool. libuv joins its pool when the process exits (process.exit() calls
// uv_library_shutdown), so a driver call that never returns on one of its threads would hold the
// exit for as long as the call. These threads are detached when started and the pool is never
// destroyed: at exit they are abandoned, idle or mid-call, and nothing they touch is ever freed
// (the pool, its queue, and what each job owns through its own shared_ptrs).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace giul {

class CallPool {
 public:
  /// Threads started at most: calls beyond them wait in the queue.
  static constexpr size_t kMaxThreads = 4;
  /// Jobs queued at most: past it every thread is stuck in a call, and a new call is refused.
  static constexpr size_t kMaxQueued = 256;
  /// A thread with no job for this long ends (a later call starts one again).
  static constexpr std::chrono::seconds kIdleExit{2};

  /// The process-wide pool (never destroyed).
  static CallPool& Instance();

  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;
  CallPool(CallPool&&) = delete;
  CallPool& operator=(CallPool&&) = delete;

  /// Queues `job`; false when the queue is full or no thread can be started (the job is dropped).
  bool Post(std::function<void()> job);

  /// The process has begun to exit: a call that finishes from now on delivers nothing.
  static void MarkExiting() { exiting_.store(true, std::memory_order_release); }
  static bool Exiting() { return exiting_.load(std::memory_order_acquire); }

 private:
  CallPool() = default;
  ~CallPool() = default;
  void Work();

  static inline std::atomic<bool> exiting_{false};
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;  // guarded by mutex_
  size_t threads_ = 0;                       // guarded by mutex_
  size_t idle_ = 0;                          // guarded by mutex_
};

}  // namespace giul
