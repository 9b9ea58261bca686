// Conversions of native results to the JS shapes of binding.d.ts.
#pragma once

#include <napi.h>

#include "amdsmi_library.h"
#include "device_reader.h"
#include "mig_reader.h"
#include "nvml_library.h"

namespace giul::js {

/// NvmlInfo.
Napi::Value FromInfo(Napi::Env env, const NvmlLibrary::Info& info);
/// AmdInfo.
Napi::Value FromAmdInfo(Napi::Env env, const AmdSmiLibrary::Info& info);
/// DeviceInfo.
Napi::Value FromDeviceInfo(Napi::Env env, const DeviceInfoData& info);
/// ProcessList.
Napi::Value FromProcessList(Napi::Env env, const ProcessListData& list);
/// MigInfo.
Napi::Value FromMig(Napi::Env env, const MigData& mig);
/// RingLayout.
Napi::Object Layout(Napi::Env env);
/// SampleFlags.
Napi::Object Flags(Napi::Env env);
/// CardLogLayout.
Napi::Object CardLogLayoutObject(Napi::Env env);

}  // namespace giul::js
