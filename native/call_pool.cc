#include "call_pool.h"

#include <pthread.h>

#include <exception>
#include <system_error>
#include <thread>
#include <utility>

namespace giul {

CallPool& CallPool::Instance() {
  // Leaked on purpose: a detached thread may still be inside a driver call when the process exits,
  // and must never come back to a destroyed pool.
  static auto* pool = new CallPool();
  return *pool;
}

bool CallPool::Post(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.size() >= kMaxQueued) {
    return false;
  }
  queue_.push_back(std::move(job));
  if (idle_ < queue_.size() && threads_ < kMaxThreads) {
    try {
      std::thread(&CallPool::Work, this).detach();
      ++threads_;
    } catch (const std::system_error&) {
      if (threads_ == 0) {
        queue_.pop_back();
        return false;
      }
    }
  }
  ready_.notify_one();
  return true;
}

void CallPool::Work() {
  pthread_setname_np(pthread_self(), "giul-nvml");
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++idle_;
      bool got = ready_.wait_for(lock, kIdleExit, [this] { return !queue_.empty(); });
      --idle_;
      if (!got) {
        --threads_;  // idle for a while: end, so that a quiet process keeps no threads
        return;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      job();
    } catch (...) {
      // A job reports its own failures; nothing may escape a detached thread.
    }
  }
}

}  // namespace giul
