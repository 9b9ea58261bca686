#include "amd_device_reader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "monotonic_clock.h"

namespace giul {
namespace {

Failure AmdCallFailed(const char* call, int status) {
  Failure::Code code =
      status == amdsmi::kNotSupported ? Failure::Code::kNotSupported : Failure::Code::kCallFailed;
  return Failure(code, status,
                 std::string(call) + " returned " + AmdSmiLibrary::DescribeStatus(status),
                 Failure::Vendor::kAmd);
}

/// Counter checks already made, by card: a card's counter is checked once per process.
struct CheckCache {
  std::mutex mutex;
  std::map<unsigned int, AmdCounterVerdict> verdicts;
};

CheckCache& Checks() {
  static auto* cache = new CheckCache();
  return *cache;
}

std::optional<double> Watts(uint32_t value) {
  if (value == amdsmi::kUnsupported32) {
    return std::nullopt;
  }
  return static_cast<double>(value);
}

/// mJ of a die's counter, or why it could not be read.
double CounterMj(const AmdSmiLibrary& lib, amdsmi::Handle handle, bool* ok) {
  uint64_t accumulator = 0;
  uint64_t timestamp = 0;
  float resolution = 0;
  *ok = handle != nullptr && lib.get_energy != nullptr && lib.Call([&] {
    return lib.get_energy(handle, &accumulator, &resolution, &timestamp);
  }) == amdsmi::kSuccess;
  return static_cast<double>(accumulator) * AmdMjPerCount(resolution);
}

/// mW of a die's socket power (current, else average), or why it could not be read.
double PowerMw(const AmdSmiLibrary& lib, amdsmi::Handle handle, bool* ok) {
  amdsmi::PowerInfo power{};
  *ok = handle != nullptr && lib.get_power_info != nullptr &&
        lib.Call([&] { return lib.get_power_info(handle, &power); }) == amdsmi::kSuccess;
  std::optional<double> w = Watts(power.current_socket_power);
  if (!w) {
    w = Watts(power.average_socket_power);
  }
  *ok = *ok && w.has_value();
  return w.value_or(0) * 1000.0;
}

}  // namespace

bool AmdCounterRefused(unsigned int index) {
  CheckCache& cache = Checks();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto it = cache.verdicts.find(index);
  return it != cache.verdicts.end() && it->second.refused.has_value();
}

void DieReads::Start(const AmdSmiLibrary& lib) {
  if (handle == nullptr) {
    counter_ok = power_ok = false;
    return;
  }
  first_mj = CounterMj(lib, handle, &counter_ok);
  prev_mw = PowerMw(lib, handle, &power_ok);
}

void DieReads::Step(const AmdSmiLibrary& lib, int64_t dt_ns) {
  if (!Usable()) {
    return;
  }
  const double mw = PowerMw(lib, handle, &power_ok);
  integral_mj += (prev_mw + mw) / 2 * static_cast<double>(dt_ns) / 1e9;
  prev_mw = mw;
}

void DieReads::Finish(const AmdSmiLibrary& lib) {
  if (handle == nullptr || !counter_ok) {
    return;
  }
  counted_mj = CounterMj(lib, handle, &counter_ok) - first_mj;
}

AmdDeviceReader::AmdDeviceReader(std::shared_ptr<const AmdSmiLibrary> library)
    : library_(std::move(library)) {}

Result<DeviceInfoData> AmdDeviceReader::ReadInfo(unsigned int index) const {
  const AmdSmiLibrary& lib = *library_;
  amdsmi::Handle handle = lib.handle(index);
  if (handle == nullptr) {
    return Failure(Failure::Code::kDeviceNotFound, std::nullopt,
                   "no AMD GPU at index " + std::to_string(index) + ": AMD SMI counts " +
                       std::to_string(lib.info().device_count),
                   Failure::Vendor::kAmd);
  }
  DeviceInfoData info;
  info.index = index;
  if (lib.get_asic_info != nullptr) {
    std::vector<char> asic(amdsmi::kAsicInfoBuffer, '\0');
    if (lib.Call([&] { return lib.get_asic_info(handle, asic.data()); }) == amdsmi::kSuccess) {
      info.name = std::string(asic.data(), strnlen(asic.data(), amdsmi::kStringLength));
    }
  }
  if (lib.get_uuid != nullptr) {
    char uuid[amdsmi::kUuidSize + 26] = {};
    unsigned int length = sizeof(uuid);
    if (lib.Call([&] { return lib.get_uuid(handle, &length, uuid); }) == amdsmi::kSuccess) {
      info.uuid = std::string(uuid, strnlen(uuid, sizeof(uuid)));
    }
  }
  if (lib.get_vram_usage != nullptr) {
    amdsmi::VramUsage vram{};
    amdsmi::Status r = lib.Call([&] { return lib.get_vram_usage(handle, &vram); });
    if (r == amdsmi::kSuccess) {
      info.memory_total_mib = vram.vram_total;
      info.memory_used_mib = vram.vram_used;
      info.memory_free_mib = static_cast<double>(vram.vram_total) - vram.vram_used;
    } else {
      info.notes.emplace_back(
          "memory", "amdsmi_get_gpu_vram_usage returned " + AmdSmiLibrary::DescribeStatus(r));
    }
  }
  if (lib.get_power_info != nullptr) {
    amdsmi::PowerInfo power{};
    amdsmi::Status r = lib.Call([&] { return lib.get_power_info(handle, &power); });
    if (r == amdsmi::kSuccess) {
      std::optional<double> current = Watts(power.current_socket_power);
      std::optional<double> average = Watts(power.average_socket_power);
      info.instant_power = current.has_value();
      info.power_usage = average.has_value();
      info.power_w = current ? current : average;
      info.power_limit_w = Watts(power.power_limit);
    } else {
      info.notes.emplace_back("power",
                              "amdsmi_get_power_info returned " + AmdSmiLibrary::DescribeStatus(r));
    }
  }
  if (lib.get_energy != nullptr) {
    uint64_t accumulator = 0;
    uint64_t timestamp = 0;
    float resolution = 0;
    amdsmi::Status r =
        lib.Call([&] { return lib.get_energy(handle, &accumulator, &resolution, &timestamp); });
    if (r == amdsmi::kSuccess) {
      AmdCounterVerdict verdict = CheckCounter(index);
      info.energy_counter = !verdict.refused.has_value();
      if (verdict.refused) {
        info.notes.emplace_back("energyCounter", *verdict.refused);
      }
      if (verdict.partner) {
        info.shared_at = verdict.reports ? index : *verdict.partner;
        info.shared_cards = {std::min(index, *verdict.partner), std::max(index, *verdict.partner)};
        info.shared_kind = "pair";
      }
    } else {
      info.notes.emplace_back(
          "energyCounter", "amdsmi_get_energy_count returned " + AmdSmiLibrary::DescribeStatus(r));
    }
    SharedBySocket(index, r == amdsmi::kSuccess, info);
  }
  return info;
}

void AmdDeviceReader::SharedBySocket(unsigned int index, bool own, DeviceInfoData& info) const {
  // A partitioned MI300X (CPX, DPX): one socket, several GPUs, one counter among them. The first
  // partition whose counter answers counts the socket; one without a counter of its own is
  // metered on it, and all of the socket's windows share it.
  const AmdSmiLibrary& lib = *library_;
  const std::vector<unsigned int> cards = lib.SocketOf(index);
  if (cards.size() < 2 || info.shared_at) {
    return;
  }
  std::optional<unsigned int> at;
  unsigned int with_counter = 0;
  for (unsigned int card : cards) {
    bool answers = own;
    if (card != index) {
      CounterMj(lib, lib.handle(card), &answers);
    }
    if (answers) {
      with_counter += 1;
      at = at.value_or(card);
    }
  }
  // Each partition counting its own: nothing shared. None counting: nothing to share.
  if (!at || with_counter == cards.size() || (own && *at != index)) {
    return;
  }
  info.shared_at = *at;
  info.shared_cards = cards;
  info.shared_kind = "partition";
  if (!own) {
    info.notes.emplace_back("energyCounter",
                            "it has no counter of its own: partition " + std::to_string(*at) +
                                "'s counter counts its socket (a partitioned MI300X)");
  }
}

AmdCounterVerdict AmdDeviceReader::CheckCounter(unsigned int index) const {
  CheckCache& cache = Checks();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.verdicts.find(index);
    if (it != cache.verdicts.end()) {
      return it->second;
    }
  }
  const AmdSmiLibrary& lib = *library_;
  // The die and the other die of its pair (MI250: 2k and 2k + 1), read over the same span.
  const unsigned int partner = index ^ 1U;
  DieReads dies[2];
  dies[0].handle = lib.handle(index);
  dies[1].handle = partner < lib.info().device_count ? lib.handle(partner) : nullptr;
  for (DieReads& die : dies) {
    die.Start(lib);
  }
  int64_t prev_t = MonotonicNs();
  for (int waited = 0; dies[0].Usable() && waited < kCheckMs; waited += kCheckStepMs) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kCheckStepMs));
    const int64_t t = MonotonicNs();
    for (DieReads& die : dies) {
      die.Step(lib, t - prev_t);
    }
    prev_t = t;
  }
  for (DieReads& die : dies) {
    die.Finish(lib);
  }
  AmdCounterVerdict verdict = Judge(dies[0], dies[1], partner);
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.verdicts.emplace(index, verdict);
  return verdict;
}

AmdCounterVerdict AmdDeviceReader::Judge(const DieReads& self, const DieReads& other,
                                         unsigned int partner) {
  auto within = [](double ratio) { return ratio >= kMinRatio && ratio <= kMaxRatio; };
  // How far a ratio is from 1, either way: which of two readings of a counter fits it better.
  auto off = [](double ratio) { return ratio > 0 ? std::fabs(std::log(ratio)) : INFINITY; };
  AmdCounterVerdict verdict;
  if (!self.counter_ok) {
    verdict.refused = "the energy counter could not be read twice in a row";
    return verdict;
  }
  if (!self.power_ok || !(self.integral_mj > 0)) {
    return verdict;  // no power to check it against: the counter is taken as it is
  }
  const double ratio = self.counted_mj / self.integral_mj;
  if (other.Usable() && other.integral_mj > 0) {
    // MI250: one die's counter counts the pair's energy, the other's none of its own. Taken so
    // only where that fits the counters better than each counting its own die.
    const double pair = self.integral_mj + other.integral_mj;
    const double self_pair = self.counted_mj / pair;
    const double other_pair = other.counted_mj / pair;
    const double other_own = other.counted_mj / other.integral_mj;
    if (other.counted_mj < 0.1 * pair && within(self_pair) && off(self_pair) < off(ratio)) {
      verdict.partner = partner;
      verdict.reports = true;
      return verdict;
    }
    if (self.counted_mj < 0.1 * pair && within(other_pair) && off(other_pair) < off(other_own)) {
      verdict.partner = partner;
      verdict.refused = "it counts nothing of its own: die " + std::to_string(partner) +
                        "'s counter counts the energy of both dies (an MI250 die pair)";
      return verdict;
    }
  }
  if (!within(ratio)) {
    verdict.refused = "the energy counter disagrees with integrated power (it counted " +
                      std::to_string(static_cast<int>(ratio * 100 + 0.5)) + " % of it over " +
                      std::to_string(kCheckMs) + " ms; 67 %–150 % is accepted)";
  }
  return verdict;
}

Result<ProcessListData> AmdDeviceReader::ReadProcesses(unsigned int index) const {
  const AmdSmiLibrary& lib = *library_;
  amdsmi::Handle handle = lib.handle(index);
  if (handle == nullptr || lib.get_process_list == nullptr) {
    return Failure(Failure::Code::kNotSupported, std::nullopt,
                   handle == nullptr ? "no AMD GPU at index " + std::to_string(index)
                                     : "the library does not export amdsmi_get_gpu_process_list",
                   Failure::Vendor::kAmd);
  }
  ProcessListData out;
  out.t_ns = MonotonicNs();
  std::vector<amdsmi::ProcInfo> list(16);
  for (int tries = 0; tries < 4; ++tries) {
    uint32_t count = static_cast<uint32_t>(list.size());
    amdsmi::Status r = lib.Call([&] { return lib.get_process_list(handle, &count, list.data()); });
    if (r == amdsmi::kSuccess && count <= list.size()) {
      for (uint32_t i = 0; i < count; ++i) {
        ProcessData process;
        process.pid = list[i].pid;
        process.used_mib = static_cast<double>(list[i].mem) / (1024.0 * 1024.0);
        process.name = std::string(list[i].name, strnlen(list[i].name, amdsmi::kStringLength));
        out.processes.push_back(std::move(process));
      }
      return out;
    }
    if (r != amdsmi::kSuccess && r != 39 /* AMDSMI_STATUS_MORE_DATA */) {
      return AmdCallFailed("amdsmi_get_gpu_process_list", r);
    }
    list.resize(std::max<size_t>(count, list.size() * 2));
  }
  return AmdCallFailed("amdsmi_get_gpu_process_list", 39);
}

}  // namespace giul
