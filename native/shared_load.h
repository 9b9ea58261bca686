// A vendor library loaded once per process and shared (NvmlLibrary, AmdSmiLibrary): one load at a
// time; a load that succeeded is kept for good (never unloaded: no thread may see it go), one that
// failed is tried again by the next call (a driver may have been loaded since). Process-wide by
// design and never freed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "failure.h"

namespace giul {

template <typename Library>
class SharedLoad {
 public:
  using Outcome = Result<std::shared_ptr<const Library>>;

  /// The kept library, or the outcome of `load_once()` (a call that waited for another's load gets
  /// that load's outcome). Blocks while a load runs: call it off the JS thread.
  template <typename LoadOnce>
  Outcome Load(const LoadOnce& load_once) {
    uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(state_mutex_);
      if (last_ && Succeeded(*last_)) {
        return *last_;
      }
      seen = loads_;
    }
    std::lock_guard<std::mutex> loading(load_mutex_);
    {
      std::lock_guard<std::mutex> lock(state_mutex_);
      if (loads_ != seen && last_) {
        return *last_;  // a load finished while this call waited for it: share its outcome
      }
    }
    Outcome outcome = load_once();
    std::lock_guard<std::mutex> lock(state_mutex_);
    last_ = outcome;
    ++loads_;
    return outcome;
  }

  /// The outcome of the last load that finished, if any; never waits for one in progress.
  std::optional<Outcome> Loaded() {
    std::lock_guard<std::mutex> lock(state_mutex_);
    return last_;
  }

 private:
  static bool Succeeded(const Outcome& outcome) {
    return std::holds_alternative<std::shared_ptr<const Library>>(outcome);
  }

  std::mutex load_mutex_;   // one load at a time; held for as long as a load takes (seconds)
  std::mutex state_mutex_;  // held only to read or publish last_
  std::optional<Outcome> last_;
  uint64_t loads_ = 0;  // loads finished
};

/// Runs `then` with Library loaded (Library::Load(): tried again by each call while it fails, so a
/// driver loaded since is found), or returns the failure of loading it.
template <typename T, typename Library, typename Then>
Result<T> WithLibrary(const Then& then) {
  auto outcome = Library::Load();
  if (const auto* failure = std::get_if<Failure>(&outcome)) {
    return *failure;
  }
  return then(std::get<std::shared_ptr<const Library>>(outcome));
}

}  // namespace giul
