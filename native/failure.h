// The one helper that builds failures: a stable code string, the nvmlReturn_t when NVML produced
// it, and a reason for a person. Mirrored by NativeFailure in binding.d.ts.
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
  };

  Failure(Code code, std::optional<int> nvml_return, std::string reason);

  /// Classifies a failed NVML call: 15/16 → GPU lost, 3 → not supported, else call failed.
  static Failure FromNvml(int nvml_return, const std::string& what);

  Code code() const { return code_; }
  std::optional<int> nvml_return() const { return nvml_return_; }
  const std::string& reason() const { return reason_; }

  /// The stable string of a code ("NVML_LIBRARY_NOT_FOUND", …).
  static const char* CodeName(Code code);

  /// `{ ok: false, code, nvmlReturn, reason }`.
  Napi::Object ToObject(Napi::Env env) const;

 private:
  Code code_;
  std::optional<int> nvml_return_;
  std::string reason_;
};

/// A value or the failure that stopped it.
template <typename T>
using Result = std::variant<T, Failure>;

}  // namespace giul
