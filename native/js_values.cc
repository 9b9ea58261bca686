#include "js_values.h"

#include "card_log.h"
#include "ring.h"

namespace giul::js {
namespace {

template <typename T>
Napi::Value OrNull(Napi::Env env, const std::optional<T>& value) {
  if (!value) {
    return env.Null();
  }
  if constexpr (std::is_same_v<T, std::string>) {
    return Napi::String::New(env, *value);
  } else {
    return Napi::Number::New(env, static_cast<double>(*value));
  }
}

Napi::Object Freeze(Napi::Env env, Napi::Object object) {
  auto object_ctor = env.Global().Get("Object").As<Napi::Object>();
  object_ctor.Get("freeze").As<Napi::Function>().Call(object_ctor, {object});
  return object;
}

}  // namespace

Napi::Value FromInfo(Napi::Env env, const NvmlLibrary::Info& info) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("ok", true);
  out.Set("library", info.library);
  out.Set("driverVersion", OrNull(env, info.driver_version));
  out.Set("nvmlVersion", OrNull(env, info.nvml_version));
  out.Set("deviceCount", Napi::Number::New(env, info.device_count));
  Napi::Object symbols = Napi::Object::New(env);
  for (const auto& [feature, symbol] : info.symbols) {
    symbols.Set(feature, OrNull(env, symbol));
  }
  out.Set("symbols", Freeze(env, symbols));
  return out;
}

Napi::Value FromAmdInfo(Napi::Env env, const AmdSmiLibrary::Info& info) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("ok", true);
  out.Set("library", info.library);
  out.Set("version", info.version);
  out.Set("deviceCount", Napi::Number::New(env, info.device_count));
  return out;
}

Napi::Value FromDeviceInfo(Napi::Env env, const DeviceInfoData& info) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("ok", true);
  out.Set("index", Napi::Number::New(env, info.index));
  out.Set("name", OrNull(env, info.name));
  out.Set("uuid", OrNull(env, info.uuid));
  out.Set("memoryTotalMib", OrNull(env, info.memory_total_mib));
  out.Set("memoryUsedMib", OrNull(env, info.memory_used_mib));
  out.Set("memoryFreeMib", OrNull(env, info.memory_free_mib));
  out.Set("utilizationPct", OrNull(env, info.utilization_pct));
  out.Set("energyCounter", info.energy_counter);
  out.Set("instantPower", info.instant_power);
  out.Set("powerUsage", info.power_usage);
  out.Set("powerW", OrNull(env, info.power_w));
  out.Set("powerLimitW", OrNull(env, info.power_limit_w));
  if (info.shared_at) {
    Napi::Object shared = Napi::Object::New(env);
    shared.Set("at", Napi::Number::New(env, *info.shared_at));
    Napi::Array cards = Napi::Array::New(env, info.shared_cards.size());
    for (size_t i = 0; i < info.shared_cards.size(); ++i) {
      cards.Set(static_cast<uint32_t>(i), Napi::Number::New(env, info.shared_cards[i]));
    }
    shared.Set("cards", cards);
    shared.Set("kind", info.shared_kind);
    out.Set("sharedCounter", shared);
  }
  Napi::Object notes = Napi::Object::New(env);
  for (const auto& [field, why] : info.notes) {
    notes.Set(field, why);
  }
  out.Set("notes", notes);
  return out;
}

Napi::Value FromProcessList(Napi::Env env, const ProcessListData& list) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("ok", true);
  out.Set("tNs", Napi::BigInt::New(env, list.t_ns));
  Napi::Array processes = Napi::Array::New(env, list.processes.size());
  for (size_t i = 0; i < list.processes.size(); ++i) {
    const ProcessData& process = list.processes[i];
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("pid", Napi::Number::New(env, process.pid));
    entry.Set("usedMib", OrNull(env, process.used_mib));
    entry.Set("name", OrNull(env, process.name));
    if (process.gpu_instance_id) {
      entry.Set("gpuInstanceId", Napi::Number::New(env, *process.gpu_instance_id));
    }
    processes.Set(static_cast<uint32_t>(i), entry);
  }
  out.Set("processes", processes);
  return out;
}

Napi::Value FromMig(Napi::Env env, const MigData& mig) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("ok", true);
  out.Set("index", Napi::Number::New(env, mig.index));
  out.Set("supported", mig.supported);
  out.Set("enabled", mig.enabled);
  out.Set("cardSlices", OrNull(env, mig.card_slices));
  out.Set("note", OrNull(env, mig.note));
  Napi::Array slices = Napi::Array::New(env, mig.slices.size());
  for (size_t i = 0; i < mig.slices.size(); ++i) {
    const MigSliceData& slice = mig.slices[i];
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("slot", Napi::Number::New(env, slice.slot));
    entry.Set("uuid", OrNull(env, slice.uuid));
    entry.Set("name", OrNull(env, slice.name));
    entry.Set("gpuInstanceId", OrNull(env, slice.gpu_instance_id));
    entry.Set("computeInstanceId", OrNull(env, slice.compute_instance_id));
    entry.Set("slices", OrNull(env, slice.slices));
    entry.Set("memoryTotalMib", OrNull(env, slice.memory_total_mib));
    entry.Set("memoryUsedMib", OrNull(env, slice.memory_used_mib));
    slices.Set(static_cast<uint32_t>(i), entry);
  }
  out.Set("slices", slices);
  return out;
}

Napi::Object Layout(Napi::Env env) {
  Napi::Object out = Napi::Object::New(env);
  auto set = [&](const char* key, double value) { out.Set(key, Napi::Number::New(env, value)); };
  set("version", RingLayout::kVersion);
  set("headerSlots", RingLayout::kHeaderSlots);
  set("sampleSlots", RingLayout::kSampleSlots);
  set("hHead", RingLayout::kHead);
  set("hCapacity", RingLayout::kCapacitySlot);
  set("hPeriodNs", RingLayout::kPeriodNs);
  set("hState", RingLayout::kState);
  set("hLastError", RingLayout::kLastError);
  set("hCounter", RingLayout::kCounter);
  set("hPowerSource", RingLayout::kPowerSource);
  set("hCounterStepNs", RingLayout::kCounterStepNs);
  set("hPowerQuantumMw", RingLayout::kPowerQuantumMw);
  set("sT", RingLayout::kT);
  set("sEnergyMj", RingLayout::kEnergyMj);
  set("sPowerMw", RingLayout::kPowerMw);
  set("sIntegralMj", RingLayout::kIntegralMj);
  set("sFlags", RingLayout::kFlags);
  set("sError", RingLayout::kError);
  set("sFaults", RingLayout::kFaults);
  set("sReadNs", RingLayout::kReadNs);
  set("sPowerT", RingLayout::kPowerT);
  set("sPowerReadNs", RingLayout::kPowerReadNs);
  return Freeze(env, out);
}

Napi::Object Flags(Napi::Env env) {
  Napi::Object out = Napi::Object::New(env);
  auto set = [&](const char* key, double value) { out.Set(key, Napi::Number::New(env, value)); };
  set("ENERGY_OK", SampleFlag::kEnergyOk);
  set("POWER_OK", SampleFlag::kPowerOk);
  set("COUNTER_BACKWARDS", SampleFlag::kCounterBackwards);
  set("COUNTER_JUMP", SampleFlag::kCounterJump);
  set("READ_FAILED", SampleFlag::kReadFailed);
  return Freeze(env, out);
}

Napi::Object CardLogLayoutObject(Napi::Env env) {
  Napi::Object out = Napi::Object::New(env);
  auto set = [&](const char* key, double value) { out.Set(key, Napi::Number::New(env, value)); };
  using L = CardLogLayout;
  set("version", L::kVersion);
  set("headerSlots", L::kHeaderSlots);
  set("entrySlots", L::kEntrySlots);
  set("hPublished", L::kPublished);
  set("hCapacity", L::kCapacitySlot);
  set("hIdleW", L::kIdleW);
  set("hOpen", L::kOpen);
  set("hWeight", L::kWeight);
  set("eT", L::kT);
  set("eWeightBefore", L::kWeightBefore);
  set("eWeightAfter", L::kWeightAfter);
  set("eCountAfter", L::kCountAfter);
  set("eIdleAfter", L::kIdleAfter);
  set("ePid", L::kPid);
  set("eSlot", L::kSlot);
  set("eKind", L::kKind);
  return Freeze(env, out);
}

}  // namespace giul::js
