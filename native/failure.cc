#include "failure.h"

#include <utility>

#include "nvml_library.h"
#include "nvml_types.h"

namespace giul {

Failure::Failure(Code code, std::optional<int> nvml_return, std::string reason, Vendor vendor)
    : code_(code), nvml_return_(nvml_return), reason_(std::move(reason)), vendor_(vendor) {}

Failure Failure::FromNvml(int nvml_return, const std::string& what) {
  std::string reason = what + " returned " + NvmlLibrary::DescribeReturn(nvml_return);
  Code code = Code::kCallFailed;
  if (nvml_return == nvml::kGpuIsLost || nvml_return == nvml::kResetRequired) {
    code = Code::kGpuLost;
    reason +=
        "; the GPU fell off the bus or needs a reset (see `nvidia-smi -q` and the kernel log)";
  } else if (nvml_return == nvml::kNotSupported) {
    code = Code::kNotSupported;
  } else if (nvml_return == nvml::kNoPermission) {
    reason += "; the process lacks permission (containers and MIG may need privileges)";
  }
  return {code, nvml_return, std::move(reason)};
}

std::string Failure::CodeName(Code code, Vendor vendor) {
  const std::string prefix = vendor == Vendor::kAmd ? "AMDSMI_" : "NVML_";
  switch (code) {
    case Code::kLibraryNotFound:
      return prefix + "LIBRARY_NOT_FOUND";
    case Code::kSymbolNotFound:
      return prefix + "SYMBOL_NOT_FOUND";
    case Code::kDriverNotLoaded:
      return prefix + "DRIVER_NOT_LOADED";
    case Code::kInitFailed:
      return prefix + "INIT_FAILED";
    case Code::kDeviceNotFound:
      return prefix + "DEVICE_NOT_FOUND";
    case Code::kGpuLost:
      return prefix + "GPU_LOST";
    case Code::kNotSupported:
      return prefix + "NOT_SUPPORTED";
    case Code::kCallFailed:
      return prefix + "CALL_FAILED";
    case Code::kSamplerFailed:
      return "SAMPLER_FAILED";
    case Code::kVersionRefused:
      return prefix + "VERSION_REFUSED";
  }
  return prefix + "CALL_FAILED";
}

Napi::Object Failure::ToObject(Napi::Env env) const {
  Napi::Object out = Napi::Object::New(env);
  out.Set("ok", Napi::Boolean::New(env, false));
  out.Set("code", Napi::String::New(env, CodeName(code_, vendor_)));
  out.Set("nvmlReturn", env.Null());
  const char* field = vendor_ == Vendor::kAmd ? "amdsmiStatus" : "nvmlReturn";
  if (nvml_return_) {
    out.Set(field, Napi::Number::New(env, *nvml_return_));
  } else {
    out.Set(field, env.Null());
  }
  out.Set("reason", Napi::String::New(env, reason_));
  return out;
}

}  // namespace giul
