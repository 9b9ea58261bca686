// CardReads over NVML: the energy counter (mJ); power from field 186 (instantaneous) where the card
// has it, else nvmlDeviceGetPowerUsage (averaged).
#include <limits>

#include "card_reads.h"
#include "monotonic_clock.h"
#include "nvml_library.h"

namespace giul {
namespace {

class NvmlReads final : public CardReads {
 public:
  NvmlReads(std::shared_ptr<const NvmlLibrary> library, unsigned int index)
      : library_(std::move(library)), index_(index) {}

  int Open() override {
    if (have_device_) {
      return nvml::kSuccess;
    }
    nvml::Return r = library_->get_handle(index_, &device_);
    have_device_ = r == nvml::kSuccess;
    return r;
  }
  void Forget() override { have_device_ = false; }
  bool HasCounter() const override { return library_->get_energy != nullptr; }
  int ReadCounter(unsigned long long* count) override {
    return library_->get_energy(device_, count);
  }
  double MjPerCount() const override { return 1.0; }
  bool Unsupported(int code) const override { return code == nvml::kNotSupported; }
  bool Lost(int code) const override {
    return code == nvml::kGpuIsLost || code == nvml::kResetRequired;
  }
  int NothingReadable() const override { return nvml::kNotSupported; }
  double PowerQuantumMw() const override { return 1.0; }

  Power ReadPower() override {
    // A card known to have field 186 that fails it this tick records a failed read, not the
    // average.
    Power power;
    if (instant_ != Support::kNo && library_->get_field_values != nullptr && ReadInstant(power)) {
      return power;
    }
    if (usage_ != Support::kNo && library_->get_power_usage != nullptr) {
      ReadUsage(power);
    }
    return power;
  }

 private:
  enum class Support { kUnknown, kYes, kNo };

  /// True when field 186 settled this tick's power (read, or failed on a card that has it).
  bool ReadInstant(Power& power) {
    nvml::FieldValue field{};
    field.fieldId = nvml::kFieldPowerInstant;
    field.scopeId = 0;
    const int64_t before = MonotonicNs();
    nvml::Return r = library_->get_field_values(device_, 1, &field);
    const int64_t after = MonotonicNs();
    power.t = before + (after - before) / 2;
    power.read_ns = after - before;
    if (r == nvml::kSuccess) {
      r = field.nvmlReturn;
    }
    double value = 0;
    if (r == nvml::kSuccess && nvml::DecodeFieldValue(field, &value)) {
      power.ok = true;
      power.mw = value;
      power.source = 1;
      instant_ = Support::kYes;
      return true;
    }
    if (instant_ == Support::kYes) {
      power.fault = true;
      power.error = r != nvml::kSuccess ? r : nvml::kNotSupported;
      return true;
    }
    if (r == nvml::kSuccess || r == nvml::kNotSupported || r == nvml::kInvalidArgument) {
      instant_ = Support::kNo;  // an older driver that does not know field 186
    } else {
      power.error = r;
    }
    return false;
  }

  void ReadUsage(Power& power) {
    unsigned int mw = 0;
    const int64_t before = MonotonicNs();
    nvml::Return r = library_->get_power_usage(device_, &mw);
    const int64_t after = MonotonicNs();
    power.t = before + (after - before) / 2;
    power.read_ns = after - before;
    if (r == nvml::kSuccess) {
      power.ok = true;
      power.fault = false;
      power.error = 0;
      power.mw = mw;
      power.source = 2;
      usage_ = Support::kYes;
    } else if (usage_ == Support::kYes) {
      power.fault = true;
      power.error = r;
    } else if (r == nvml::kNotSupported) {
      usage_ = Support::kNo;
    } else if (power.error == 0) {
      power.error = r;
    }
  }

  const std::shared_ptr<const NvmlLibrary> library_;
  const unsigned int index_;
  nvml::Device device_ = nullptr;
  bool have_device_ = false;
  Support instant_ = Support::kUnknown;
  Support usage_ = Support::kUnknown;
};

}  // namespace

std::unique_ptr<CardReads> MakeNvmlReads(std::shared_ptr<const NvmlLibrary> library,
                                         unsigned int index) {
  return std::make_unique<NvmlReads>(std::move(library), index);
}

}  // namespace giul
