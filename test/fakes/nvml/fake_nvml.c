/*
 * A test double of libnvidia-ml.so.1, scripted by the scenario file described in
 * test/fakes/SCENARIO.md (GIUL_FAKE_NVML_SCENARIO). Power is a piecewise-linear function of
 * CLOCK_MONOTONIC time, so every reading has a ground truth that test/fakes/scenario.ts computes
 * the same way.
 *
 * Built twice: the current ABI (versioned and unversioned symbols, energy counter, field values)
 * and, with GIUL_FAKE_LEGACY, an old driver (unversioned symbols only).
 *
 * Thread safety: the scenario lives behind one mutex; every reading is computed under it, and a
 * reload swaps the pointer under it, so no thread ever reads freed memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- the NVML ABI we implement (our own declarations; nvml-facts.md §1) -------------------- */

typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999,
};

struct nvmlDevice_st {
  unsigned int index;
};
typedef struct nvmlDevice_st* nvmlDevice_t;

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef union {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t");
_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t");

#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define NVML_MEMORY_V2_VERSION 0x02000028u
#define FI_TOTAL_ENERGY 83
#define FI_POWER_AVERAGE 185
#define FI_POWER_INSTANT 186
#define FI_ENERGY 191

#define CARD_SCENARIO_ENV "GIUL_FAKE_NVML_SCENARIO"
#define CARD_WARN_PREFIX "fake-nvml: "
#define CARD_DEFAULT_NAME "NVIDIA H100 80GB HBM3"
#define CARD_DEFAULT_UUID "GPU-00000000-0000-0000-0000-%012d"
#define CARD_DEFAULT_STEP_MS 10
#define CARD_DEFAULT_DRIVER "590.48.01"
#include "../card/card_scenario.c"

static struct nvmlDevice_st g_handles[MAX_DEVICES];

static int mig_handle(nvmlDevice_t h, int* dev, int* slot);
static nvmlReturn_t mig_device_call(nvmlDevice_t h);

/* Validates the handle and applies the scenario's errors; on success *out is the device. */
static nvmlReturn_t device_call(const char* sym, nvmlDevice_t h, const device_t** out,
                                long long* rel) {
  if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  int mig_dev, mig_slot;
  if (mig_handle(h, &mig_dev, &mig_slot)) return mig_device_call(h);
  if (h < &g_handles[0] || h >= &g_handles[MAX_DEVICES] ||
      (size_t)((const char*)h - (const char*)&g_handles[0]) % sizeof(g_handles[0]) != 0)
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int i = h->index;
  if ((int)i >= g_sc->ndev) return NVML_ERROR_GPU_IS_LOST;
  const device_t* d = &g_sc->dev[i];
  *rel = rel_now();
  double t = (double)*rel / 1e6;
  for (int k = 0; k < d->nerrs; k++)
    if (t >= d->errs[k].from_ms && fn_matches(d->errs[k].fn, sym)) return d->errs[k].code;
  *out = d;
  return NVML_SUCCESS;
}

static nvmlReturn_t copy_str(char* dst, unsigned int len, const char* src) {
  if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
  size_t n = strlen(src);
  if (len < n + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(dst, src, n + 1);
  return NVML_SUCCESS;
}

#include "fake_nvml_mig.c"

/* ---- the exported API ------------------------------------------------------------------------ */

static nvmlReturn_t do_init(const char* sym) {
  enter(sym);
  if (g_sc->init_error) return leave(g_sc->init_error);
  g_init_count++;
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlInit(void) { return do_init("nvmlInit"); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { return do_init("nvmlInitWithFlags"); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
  enter("nvmlShutdown");
  if (g_init_count <= 0) return leave(NVML_ERROR_UNINITIALIZED);
  g_init_count--;
  return leave(NVML_SUCCESS);
}

EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 5:
      return "Already Initialized";
    case 6:
      return "Not Found";
    case 7:
      return "Insufficient Size";
    case 8:
      return "Insufficient External Power";
    case 9:
      return "Driver Not Loaded";
    case 10:
      return "Timeout";
    case 11:
      return "Interrupt Request Issue";
    case 12:
      return "NVML Shared Library Not Found";
    case 13:
      return "Function Not Found";
    case 14:
      return "Corrupted infoROM";
    case 15:
      return "GPU is lost";
    case 16:
      return "GPU requires restart";
    case 17:
      return "The operating system has blocked the request.";
    case 18:
      return "RM has detected an NVML/RM version mismatch.";
    case 20:
      return "Insufficient Memory";
    default:
      return "Unknown Error";
  }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  enter("nvmlSystemGetDriverVersion");
  if (g_init_count <= 0) return leave(NVML_ERROR_UNINITIALIZED);
  return leave(copy_str(version, length, g_sc->driver));
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  enter("nvmlSystemGetNVMLVersion");
  if (g_init_count <= 0) return leave(NVML_ERROR_UNINITIALIZED);
  char buf[96];
  snprintf(buf, sizeof buf, "13.%s", g_sc->driver);
  return leave(copy_str(version, length, buf));
}

static nvmlReturn_t do_count(const char* sym, unsigned int* count) {
  enter(sym);
  if (g_init_count <= 0) return leave(NVML_ERROR_UNINITIALIZED);
  if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *count = (unsigned int)g_sc->ndev;
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return do_count("nvmlDeviceGetCount", count);
}

static nvmlReturn_t do_handle(const char* sym, unsigned int index, nvmlDevice_t* device) {
  enter(sym);
  if (g_init_count <= 0) return leave(NVML_ERROR_UNINITIALIZED);
  if (!device || (int)index >= g_sc->ndev) return leave(NVML_ERROR_INVALID_ARGUMENT);
  const device_t* d = &g_sc->dev[index];
  if (d->handle_error) return leave(d->handle_error);
  double t = (double)rel_now() / 1e6;
  for (int k = 0; k < d->nerrs; k++)
    if (t >= d->errs[k].from_ms && fn_matches(d->errs[k].fn, sym)) return leave(d->errs[k].code);
  g_handles[index].index = index;
  *device = &g_handles[index];
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return do_handle("nvmlDeviceGetHandleByIndex", index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char* name, unsigned int length) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetName");
  int mdev, mslot;
  if (mig_handle(h, &mdev, &mslot)) return leave(mig_string(h, name, length, 0));
  nvmlReturn_t r = device_call("nvmlDeviceGetName", h, &d, &rel);
  if (r) return leave(r);
  return leave(copy_str(name, length, d->name));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char* uuid, unsigned int length) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetUUID");
  int mdev, mslot;
  if (mig_handle(h, &mdev, &mslot)) return leave(mig_string(h, uuid, length, 1));
  nvmlReturn_t r = device_call("nvmlDeviceGetUUID", h, &d, &rel);
  if (r) return leave(r);
  return leave(copy_str(uuid, length, d->uuid));
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int* index) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetIndex");
  nvmlReturn_t r = device_call("nvmlDeviceGetIndex", h, &d, &rel);
  if (r) return leave(r);
  if (!index) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *index = h->index;
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t h, unsigned int* power) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetPowerUsage");
  nvmlReturn_t r = device_call("nvmlDeviceGetPowerUsage", h, &d, &rel);
  if (r) return leave(r);
  if (!power) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (!d->power) return leave(NVML_ERROR_NOT_SUPPORTED);
  *power = to_mw(d->power_average ? average_w(d, rel) : instant_w(d, rel));
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t* mem) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetMemoryInfo");
  int mdev, mslot;
  if (mem && mig_handle(h, &mdev, &mslot)) {
    nvmlReturn_t m = mig_memory(h, &mem->total, &mem->used);
    if (!m) mem->free = mem->total - mem->used;
    return leave(m);
  }
  nvmlReturn_t r = device_call("nvmlDeviceGetMemoryInfo", h, &d, &rel);
  if (r) return leave(r);
  if (!mem) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (!d->mem) return leave(NVML_ERROR_NOT_SUPPORTED);
  unsigned long long used = d->mem_used + d->mem_reserved;
  mem->total = d->mem_total;
  mem->used = used;
  mem->free = mem->total > used ? mem->total - used : 0;
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t* u) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetUtilizationRates");
  nvmlReturn_t r = device_call("nvmlDeviceGetUtilizationRates", h, &d, &rel);
  if (r) return leave(r);
  if (!u) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (!d->util) return leave(NVML_ERROR_NOT_SUPPORTED);
  u->gpu = d->util_gpu;
  u->memory = d->util_mem;
  return leave(NVML_SUCCESS);
}

/* Shared by the three process-list entry points; `size` is the entry size (16 or 24). */
static nvmlReturn_t do_procs(const char* sym, nvmlDevice_t h, unsigned int* count, void* infos,
                             size_t size) {
  const device_t* d;
  long long rel;
  enter(sym);
  int gi = -1;
  nvmlReturn_t r = mig_procs_filter(h, &d, &gi);
  if (r == NVML_SUCCESS && gi < 0)
    r = device_call(sym, h, &d, &rel);
  else
    rel = rel_now();
  if (r) return leave(r);
  if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
  double t = (double)rel / 1e6;
  unsigned int n = 0;
  for (int i = 0; i < d->nprocs; i++)
    if (t >= d->procs[i].from_ms && t < d->procs[i].until_ms && (gi < 0 || d->procs[i].gi == gi))
      n++;
  if (*count < n) {
    *count = n;
    return leave(NVML_ERROR_INSUFFICIENT_SIZE);
  }
  *count = n;
  if (n == 0) return leave(NVML_SUCCESS);
  if (!infos) return leave(NVML_ERROR_INVALID_ARGUMENT);
  unsigned int k = 0;
  for (int i = 0; i < d->nprocs; i++) {
    const proc_t* p = &d->procs[i];
    if (!(t >= p->from_ms && t < p->until_ms) || (gi >= 0 && p->gi != gi)) continue;
    unsigned long long used = p->used;
    if (size == sizeof(nvmlProcessInfo_v1_t)) {
      nvmlProcessInfo_v1_t* e = (nvmlProcessInfo_v1_t*)infos + k;
      memset(e, 0, sizeof *e);
      e->pid = p->pid;
      e->usedGpuMemory = used;
    } else {
      nvmlProcessInfo_v2_t* e = (nvmlProcessInfo_v2_t*)infos + k;
      memset(e, 0, sizeof *e);
      e->pid = p->pid;
      e->usedGpuMemory = used;
      e->gpuInstanceId = p->gi >= 0 ? (unsigned int)p->gi : 0xFFFFFFFFu;
      e->computeInstanceId = p->ci >= 0 ? (unsigned int)p->ci : 0xFFFFFFFFu;
    }
    k++;
  }
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned int* count,
                                                         nvmlProcessInfo_v1_t* infos) {
  return do_procs("nvmlDeviceGetComputeRunningProcesses", h, count, infos,
                  sizeof(nvmlProcessInfo_v1_t));
}

EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int length) {
  enter("nvmlSystemGetProcessName");
  if (g_init_count <= 0) return leave(NVML_ERROR_UNINITIALIZED);
  if (!name || length == 0) return leave(NVML_ERROR_INVALID_ARGUMENT);
  for (int i = 0; i < g_sc->ndev; i++) {
    const device_t* d = &g_sc->dev[i];
    for (int j = 0; j < d->nprocs; j++) {
      if (d->procs[j].pid == pid) {
        snprintf(name, length, "%s", d->procs[j].name); /* truncated to length, like NVML */
        return leave(NVML_SUCCESS);
      }
    }
  }
  return leave(NVML_ERROR_NOT_FOUND);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t h, unsigned int* limit) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetPowerManagementLimit");
  nvmlReturn_t r = device_call("nvmlDeviceGetPowerManagementLimit", h, &d, &rel);
  if (r) return leave(r);
  if (!limit) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *limit = to_mw(d->power_limit_w);
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t h, unsigned int* limit) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetEnforcedPowerLimit");
  nvmlReturn_t r = device_call("nvmlDeviceGetEnforcedPowerLimit", h, &d, &rel);
  if (r) return leave(r);
  if (!limit) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *limit = to_mw(d->enforced_limit_w);
  return leave(NVML_SUCCESS);
}

#ifndef GIUL_FAKE_LEGACY

EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init("nvmlInit_v2"); }

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return do_count("nvmlDeviceGetCount_v2", count);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return do_handle("nvmlDeviceGetHandleByIndex_v2", index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t h,
                                                        unsigned long long* energy) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetTotalEnergyConsumption");
  nvmlReturn_t r = device_call("nvmlDeviceGetTotalEnergyConsumption", h, &d, &rel);
  if (r) return leave(r);
  if (!energy) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (!d->counter) return leave(NVML_ERROR_NOT_SUPPORTED);
  *energy = counter_mj(d, rel);
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t h, int count, nvmlFieldValue_t* values) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetFieldValues");
  nvmlReturn_t r = device_call("nvmlDeviceGetFieldValues", h, &d, &rel);
  if (r) return leave(r);
  if (count < 0 || (count > 0 && !values)) return leave(NVML_ERROR_INVALID_ARGUMENT);
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  long long stamp_us = (long long)rt.tv_sec * 1000000LL + rt.tv_nsec / 1000;
  for (int i = 0; i < count; i++) {
    nvmlFieldValue_t* v = &values[i];
    v->timestamp = stamp_us;
    v->latencyUsec = 0;
    v->value.ullVal = 0;
    switch (v->fieldId) {
      case FI_TOTAL_ENERGY:
      case FI_ENERGY:
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        if (d->counter) {
          v->nvmlReturn = NVML_SUCCESS;
          v->value.ullVal = counter_mj(d, rel);
        } else {
          v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
        break;
      case FI_POWER_AVERAGE:
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        if (d->power && d->power_average) {
          v->nvmlReturn = NVML_SUCCESS;
          v->value.uiVal = to_mw(average_w(d, rel));
        } else {
          v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
        break;
      case FI_POWER_INSTANT:
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        if (d->instant_field) {
          v->nvmlReturn = NVML_SUCCESS;
          v->value.uiVal = to_mw(instant_w(d, rel));
        } else {
          v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
        break;
      default:
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        break;
    }
  }
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t* mem) {
  const device_t* d;
  long long rel;
  enter("nvmlDeviceGetMemoryInfo_v2");
  int mdev, mslot;
  if (mem && mem->version == NVML_MEMORY_V2_VERSION && mig_handle(h, &mdev, &mslot)) {
    mem->reserved = 0;
    nvmlReturn_t m = mig_memory(h, &mem->total, &mem->used);
    if (!m) mem->free = mem->total - mem->used;
    return leave(m);
  }
  nvmlReturn_t r = device_call("nvmlDeviceGetMemoryInfo_v2", h, &d, &rel);
  if (r) return leave(r);
  if (!mem) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (mem->version != NVML_MEMORY_V2_VERSION) return leave(NVML_ERROR_FUNCTION_NOT_FOUND);
  if (!d->mem) return leave(NVML_ERROR_NOT_SUPPORTED);
  mem->total = d->mem_total;
  mem->reserved = d->mem_reserved;
  mem->used = d->mem_used;
  unsigned long long taken = mem->reserved + mem->used;
  mem->free = mem->total > taken ? mem->total - taken : 0;
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h, unsigned int* count,
                                                            nvmlProcessInfo_v2_t* infos) {
  return do_procs("nvmlDeviceGetComputeRunningProcesses_v2", h, count, infos,
                  sizeof(nvmlProcessInfo_v2_t));
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int* count,
                                                            nvmlProcessInfo_v2_t* infos) {
  return do_procs("nvmlDeviceGetComputeRunningProcesses_v3", h, count, infos,
                  sizeof(nvmlProcessInfo_v2_t));
}

#endif /* GIUL_FAKE_LEGACY */
