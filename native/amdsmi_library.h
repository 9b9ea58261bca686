// libamd_smi loaded at run time (AMD SMI 26.x, ROCm 7), initialised once per process for AMD GPUs
// and shared by every environment and thread. AMD SMI before ROCm 7.2 is not thread-safe: every
// call into it goes through Call(), which holds one process-wide lock. A library of another major
// version is refused with its version named: its structs are laid out otherwise. A load that
// failed is not kept: the next Load() tries again.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amdsmi_types.h"
#include "dl_handle.h"
#include "failure.h"

namespace giul {

class AmdSmiLibrary {
 public:
  struct Info {
    std::string library;
    /// "26.1.0", as amdsmi_get_lib_version reports it.
    std::string version;
    unsigned int device_count = 0;
  };

  using Outcome = Result<std::shared_ptr<const AmdSmiLibrary>>;

  ~AmdSmiLibrary();
  AmdSmiLibrary(const AmdSmiLibrary&) = delete;
  AmdSmiLibrary& operator=(const AmdSmiLibrary&) = delete;
  AmdSmiLibrary(AmdSmiLibrary&&) = delete;
  AmdSmiLibrary& operator=(AmdSmiLibrary&&) = delete;

  /// Loads and initialises AMD SMI (as NvmlLibrary::Load: blocks; call it off the JS thread).
  static Outcome Load();
  /// The outcome of the last load that finished, if any; makes no call.
  static std::optional<Outcome> Loaded();
  /// "not supported (2)": a name for an amdsmi_status_t that needs no library.
  static std::string DescribeStatus(int status);

  const Info& info() const { return info_; }
  /// The card at `index`, numbered as `amd-smi list` numbers them (sockets, then their GPUs).
  amdsmi::Handle handle(unsigned int index) const {
    return index < handles_.size() ? handles_[index] : nullptr;
  }
  /// The cards of card `index`'s socket, in index order: itself alone, or the partitions of a
  /// partitioned MI300X (CPX, DPX: one socket, several GPUs).
  std::vector<unsigned int> SocketOf(unsigned int index) const {
    std::vector<unsigned int> cards;
    for (unsigned int i = 0; index < sockets_.size() && i < sockets_.size(); ++i) {
      if (sockets_[i] == sockets_[index]) {
        cards.push_back(i);
      }
    }
    return cards;
  }

  /// Runs `call` under the library's lock: AMD SMI calls never overlap.
  template <typename F>
  auto Call(F&& call) const {
    std::lock_guard<std::mutex> lock(calls_);
    return call();
  }

  amdsmi::GetUuidFn get_uuid = nullptr;
  amdsmi::GetAsicInfoFn get_asic_info = nullptr;
  amdsmi::GetVramUsageFn get_vram_usage = nullptr;
  amdsmi::GetEnergyCountFn get_energy = nullptr;
  amdsmi::GetPowerInfoFn get_power_info = nullptr;
  amdsmi::GetProcessListFn get_process_list = nullptr;

 private:
  explicit AmdSmiLibrary(std::string path);
  static Outcome LoadOnce();
  static Outcome LoadFrom(const std::string& path, bool named);

  DlHandle handle_;
  Info info_;
  std::vector<amdsmi::Handle> handles_;
  std::vector<unsigned int> sockets_;  // the socket (its ordinal) of each card
  amdsmi::ShutDownFn shut_down_ = nullptr;
  bool initialised_ = false;
  mutable std::mutex calls_;
};

/// mJ per count of the energy accumulator, given the resolution the library reports (µJ).
double AmdMjPerCount(float resolution_uj);

}  // namespace giul
