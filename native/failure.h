// The one helper that builds failures: a stable code string, the vendor's return code when its
// library produced it (nvmlReturn_t, amdsmi_status_t), and a reason for a person. Mirrored by
// NativeFailure in binding.d.ts.
#pragma once

#include <napi.h>

#include <optional>
#include <string>
#include <variant>

namespace giul {

class Failure {
 public:
  enum class Code {
    kLibraryNotFound,
    kSymbolNotFound,
    kDriverNotLoaded,
    kInitFailed,
    kDeviceNotFound,
    kGpuLost,
    kNotSupported,
    kCallFailed,
    kSamplerFailed,
    /// A library of a version whose layouts giul does not read (AMD SMI before 26).
    kVersionRefused,
  };
  /// Whose library failed: names the code ("NVML_…", "AMDSMI_…") and the return's field.
  enum class Vendor { kNvidia, kAmd };

  Failure(Code code, std::optional<int> nvml_return, std::string reason,
          Vendor vendor = Vendor::kNvidia);

  /// Classifies a failed NVML call: 15/16 → GPU lost, 3 → not supported, else call failed.
  static Failure FromNvml(int nvml_return, const std::string& what);

  Code code() const { return code_; }
  std::optional<int> nvml_return() const { return nvml_return_; }
  const std::string& reason() const { return reason_; }

  /// The stable string of a code ("NVML_LIBRARY_NOT_FOUND", "AMDSMI_LIBRARY_NOT_FOUND", …).
  static std::string CodeName(Code code, Vendor vendor = Vendor::kNvidia);

  /// `{ ok: false, code, nvmlReturn, reason }` (AMD: `amdsmiStatus` in place of `nvmlReturn`).
  Napi::Object ToObject(Napi::Env env) const;

 private:
  Code code_;
  std::optional<int> nvml_return_;
  std::string reason_;
  Vendor vendor_;
};

/// A value or the failure that stopped it.
template <typename T>
using Result = std::variant<T, Failure>;

}  // namespace giul
