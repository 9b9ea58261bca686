// CardReads over AMD SMI: the energy accumulator (2^-16 J a count) and socket power (whole W:
// current_socket_power on MI300 and later, average_socket_power before). Every call holds the
// library's lock (AMD SMI before ROCm 7.2 is not thread-safe).
#include <cmath>

#include "amd_device_reader.h"
#include "amdsmi_library.h"
#include "card_reads.h"
#include "monotonic_clock.h"

namespace giul {

namespace {

class AmdReads final : public CardReads {
 public:
  AmdReads(std::shared_ptr<const AmdSmiLibrary> library, unsigned int index)
      : library_(std::move(library)),
        handle_(library_->handle(index)),
        counter_(library_->get_energy != nullptr && !AmdCounterRefused(index)) {}

  int Open() override { return handle_ != nullptr ? amdsmi::kSuccess : amdsmi::kNotFound; }
  void Forget() override {}
  bool HasCounter() const override { return counter_; }
  int ReadCounter(unsigned long long* count) override {
    uint64_t accumulator = 0;
    float resolution = 0;
    uint64_t timestamp = 0;
    const auto r = library_->Call(
        [&] { return library_->get_energy(handle_, &accumulator, &resolution, &timestamp); });
    if (r == amdsmi::kSuccess) {
      *count = accumulator;
      mj_per_count_ = AmdMjPerCount(resolution);
    }
    return r;
  }
  double MjPerCount() const override { return mj_per_count_; }
  bool Unsupported(int code) const override {
    return code == amdsmi::kNotSupported || code == amdsmi::kNotYetImplemented;
  }
  bool Lost(int code) const override { return false; }
  int NothingReadable() const override { return amdsmi::kNotSupported; }
  double PowerQuantumMw() const override { return 1000.0; }

  Power ReadPower() override {
    Power power;
    if (library_->get_power_info == nullptr || support_ == Support::kNo) {
      return power;
    }
    amdsmi::PowerInfo info{};
    const int64_t before = MonotonicNs();
    const auto r = library_->Call([&] { return library_->get_power_info(handle_, &info); });
    const int64_t after = MonotonicNs();
    power.t = before + (after - before) / 2;
    power.read_ns = after - before;
    if (r == amdsmi::kSuccess && info.current_socket_power != amdsmi::kUnsupported32) {
      power.mw = 1000.0 * info.current_socket_power;
      power.source = 1;
    } else if (r == amdsmi::kSuccess && info.average_socket_power != amdsmi::kUnsupported32) {
      power.mw = 1000.0 * info.average_socket_power;
      power.source = 2;
    }
    if (power.source != 0) {
      power.ok = true;
      support_ = Support::kYes;
    } else if (support_ == Support::kYes) {
      power.fault = true;
      power.error = r != amdsmi::kSuccess ? r : amdsmi::kNotSupported;
    } else if (r == amdsmi::kSuccess || Unsupported(r)) {
      support_ = Support::kNo;
    } else {
      power.error = r;
    }
    return power;
  }

 private:
  enum class Support { kUnknown, kYes, kNo };

  const std::shared_ptr<const AmdSmiLibrary> library_;
  const amdsmi::Handle handle_;
  const bool counter_;  // the library has the call and the card's counter was not refused
  double mj_per_count_ = amdsmi::kCounterUnitUj / 1000.0;
  Support support_ = Support::kUnknown;
};

}  // namespace

std::unique_ptr<CardReads> MakeAmdReads(std::shared_ptr<const AmdSmiLibrary> library,
                                        unsigned int index) {
  return std::make_unique<AmdReads>(std::move(library), index);
}

}  // namespace giul
