/*
 * A test double of libamd_smi.so.26 (AMD SMI 26.x, ROCm 7), scripted by the scenario file of
 * test/fakes/SCENARIO.md (GIUL_FAKE_AMDSMI_SCENARIO). Every reading comes from the same ground
 * truth as the NVML double's (../card/card_scenario.c): the energy accumulator counts 2^-16 J of
 * the exact integral of power, and the library reports its resolution as a rounded 15.3 µJ, as
 * AMD SMI does. Each card is its own socket (an MI300X in SPX mode). With `lib_major 24` it answers
 * amdsmi_get_lib_version and amdsmi_get_power_info as AMD SMI 24.x (ROCm 6) lays them out.
 *
 * The ABI below is our own declaration of AMD's public amdsmi.h, for the calls giul makes.
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

#include "../amdsmi_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- the AMD SMI ABI we implement ------------------------------------------------------------ */

typedef int amdsmi_status_t;
enum {
  AMDSMI_STATUS_SUCCESS = 0,
  AMDSMI_STATUS_INVAL = 1,
  AMDSMI_STATUS_NOT_SUPPORTED = 2,
  AMDSMI_STATUS_NOT_FOUND = 31,
  AMDSMI_STATUS_NOT_INIT = 32,
  AMDSMI_STATUS_MORE_DATA = 39,
};
#define AMDSMI_STRING 256
#define UNSUPPORTED32 0xFFFFFFFFu

typedef struct { /* 24.x */
  uint32_t current_socket_power, average_socket_power, gfx_voltage, soc_voltage, mem_voltage,
      power_limit, reserved[11];
} power_info_24_t;

typedef struct {
  uint32_t vram_total, vram_used, reserved[2];
} vram_usage_t;

typedef struct {
  char name[AMDSMI_STRING];
  uint32_t pid;
  uint64_t mem;
  struct {
    uint64_t gfx, enc;
    uint32_t reserved[12];
  } engine_usage;
  struct {
    uint64_t gtt_mem, cpu_mem, vram_mem;
    uint32_t reserved[10];
  } memory_usage;
  char container_name[AMDSMI_STRING];
  uint32_t cu_occupancy, evicted_time, reserved[10];
} proc_info_t;

_Static_assert(sizeof(power_info_24_t) == 68, "amdsmi_power_info_t 24.x");
_Static_assert(sizeof(proc_info_t) == 704, "amdsmi_proc_info_t 26.x");

/* ---- the scenario -----------------------------------------------------------------------------
 */

#define CARD_SCENARIO_ENV "GIUL_FAKE_AMDSMI_SCENARIO"
#define CARD_WARN_PREFIX "fake-amdsmi: "
#define CARD_DEFAULT_NAME "AMD Instinct MI300X"
#define CARD_DEFAULT_UUID "1fff74a1-0000-1000-80a1-%012d"
#define CARD_DEFAULT_STEP_MS 1
#define CARD_DEFAULT_DRIVER "6.12.12"
#include "../card/card_scenario.c"

static void parse_slice(device_t* d, char** tok, int n, int lineno) {
  warn("line %d: slice lines are NVIDIA MIG's; ignored", lineno);
}

struct amd_handle {
  int index;
};
static struct amd_handle g_sockets[MAX_DEVICES];
static struct amd_handle g_gpus[MAX_DEVICES];

/* The accumulator (2^-16 J) at rel_ns: offset and jumps in mJ, the integral times counter_rate,
   at the counter's last update; with energy_of, the other die's integral too (MI250's pair). */
static uint64_t accumulator(const device_t* d, long long rel_ns) {
  double s = counter_update_ms(d, rel_ns);
  long long jumps = 0;
  for (int i = 0; i < d->njumps; i++)
    if (d->jumps[i].t_ms <= s) jumps += d->jumps[i].delta_mj;
  double e = energy_mj(d, s);
  if (d->energy_of >= 0 && d->energy_of < g_sc->ndev) e += energy_mj(&g_sc->dev[d->energy_of], s);
  double mj = (double)d->energy_offset_mj + (double)jumps + d->counter_rate * e;
  return mj <= 0 ? 0 : (uint64_t)floor(mj * 65.536);
}

static uint32_t whole_w(double w) {
  if (!(w > 0)) return 0;
  return (uint32_t)llround(w);
}

/* Validates a GPU handle and applies the scenario's errors; on success *out is the device. */
static amdsmi_status_t gpu_call(const char* sym, void* h, const device_t** out, long long* rel) {
  if (g_init_count <= 0) return AMDSMI_STATUS_NOT_INIT;
  struct amd_handle* a = h;
  if (a < &g_gpus[0] || a >= &g_gpus[MAX_DEVICES]) return AMDSMI_STATUS_INVAL;
  if (a->index >= g_sc->ndev) return AMDSMI_STATUS_NOT_FOUND;
  const device_t* d = &g_sc->dev[a->index];
  *rel = rel_now();
  double t = (double)*rel / 1e6;
  for (int k = 0; k < d->nerrs; k++)
    if (t >= d->errs[k].from_ms && fn_matches(d->errs[k].fn, sym)) return d->errs[k].code;
  *out = d;
  return AMDSMI_STATUS_SUCCESS;
}

/* ---- the exported API ------------------------------------------------------------------------ */

EXPORT amdsmi_status_t amdsmi_init(uint64_t flags) {
  enter("amdsmi_init");
  if (g_sc->init_error) return leave(g_sc->init_error);
  g_init_count++;
  return leave(AMDSMI_STATUS_SUCCESS);
}

EXPORT amdsmi_status_t amdsmi_shut_down(void) {
  enter("amdsmi_shut_down");
  if (g_init_count <= 0) return leave(AMDSMI_STATUS_NOT_INIT);
  g_init_count--;
  return leave(AMDSMI_STATUS_SUCCESS);
}

EXPORT amdsmi_status_t amdsmi_get_lib_version(void* version) {
  static const char build[] = "fake";
  enter("amdsmi_get_lib_version");
  if (!version) return leave(AMDSMI_STATUS_INVAL);
  if (g_sc->lib_major == 24) {
    struct {
      uint32_t year, major, minor, release;
      const char* build;
    } v = {24, 7, 1, 0, build};
    memcpy(version, &v, sizeof v);
  } else {
    struct {
      uint32_t major, minor, release;
      const char* build;
    } v = {(uint32_t)g_sc->lib_major, 1, 0, build};
    memcpy(version, &v, sizeof v);
  }
  return leave(AMDSMI_STATUS_SUCCESS);
}

EXPORT amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t status, const char** text) {
  if (!text) return AMDSMI_STATUS_INVAL;
  *text = status == 0 ? "AMDSMI_STATUS_SUCCESS" : "AMDSMI_STATUS_ERROR";
  return AMDSMI_STATUS_SUCCESS;
}

/* The sockets: each device's `socket` value, distinct, in the order they first appear. */
static int socket_ids(int* ids) {
  int n = 0;
  for (int d = 0; d < g_sc->ndev; d++) {
    int seen = 0;
    for (int k = 0; k < n; k++) seen |= ids[k] == g_sc->dev[d].socket;
    if (!seen) ids[n++] = g_sc->dev[d].socket;
  }
  return n;
}

/* Fills min(*count, n) handles into `out` (none when out is NULL); *count becomes n. */
static amdsmi_status_t list(uint32_t* count, void** out, struct amd_handle** all, int n) {
  if (!count) return AMDSMI_STATUS_INVAL;
  if (out)
    for (int i = 0; i < n && (uint32_t)i < *count; i++) out[i] = all[i];
  *count = (uint32_t)n;
  return AMDSMI_STATUS_SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_socket_handles(uint32_t* count, void** sockets) {
  enter("amdsmi_get_socket_handles");
  if (g_init_count <= 0) return leave(AMDSMI_STATUS_NOT_INIT);
  int ids[MAX_DEVICES];
  struct amd_handle* all[MAX_DEVICES];
  int n = socket_ids(ids);
  for (int i = 0; i < n; i++) {
    g_sockets[i].index = i;
    all[i] = &g_sockets[i];
  }
  return leave(list(count, sockets, all, n));
}

EXPORT amdsmi_status_t amdsmi_get_processor_handles(void* socket, uint32_t* count,
                                                    void** processors) {
  enter("amdsmi_get_processor_handles");
  if (g_init_count <= 0) return leave(AMDSMI_STATUS_NOT_INIT);
  struct amd_handle* s = socket;
  if (s < &g_sockets[0] || s >= &g_sockets[MAX_DEVICES]) return leave(AMDSMI_STATUS_INVAL);
  int ids[MAX_DEVICES];
  int nsockets = socket_ids(ids);
  int i = (int)(s - g_sockets);
  if (i >= nsockets) return leave(AMDSMI_STATUS_NOT_FOUND);
  /* The socket's partitions: the devices that name it, in device order. */
  struct amd_handle* all[MAX_DEVICES];
  int n = 0;
  for (int d = 0; d < g_sc->ndev; d++) {
    if (g_sc->dev[d].socket != ids[i]) continue;
    g_gpus[d].index = d;
    all[n++] = &g_gpus[d];
  }
  return leave(list(count, processors, all, n));
}

EXPORT amdsmi_status_t amdsmi_get_gpu_device_uuid(void* h, unsigned int* length, char* uuid) {
  const device_t* d;
  long long rel;
  enter("amdsmi_get_gpu_device_uuid");
  amdsmi_status_t r = gpu_call("amdsmi_get_gpu_device_uuid", h, &d, &rel);
  if (r) return leave(r);
  if (!length || !uuid) return leave(AMDSMI_STATUS_INVAL);
  size_t n = strlen(d->uuid);
  if (*length < n + 1) return leave(AMDSMI_STATUS_INVAL);
  memcpy(uuid, d->uuid, n + 1);
  *length = (unsigned int)n;
  return leave(AMDSMI_STATUS_SUCCESS);
}

EXPORT amdsmi_status_t amdsmi_get_gpu_asic_info(void* h, void* info) {
  const device_t* d;
  long long rel;
  enter("amdsmi_get_gpu_asic_info");
  amdsmi_status_t r = gpu_call("amdsmi_get_gpu_asic_info", h, &d, &rel);
  if (r) return leave(r);
  if (!info) return leave(AMDSMI_STATUS_INVAL);
  char* market_name = info; /* the struct's first field */
  memset(market_name, 0, AMDSMI_STRING);
  snprintf(market_name, AMDSMI_STRING, "%s", d->name);
  return leave(AMDSMI_STATUS_SUCCESS);
}

EXPORT amdsmi_status_t amdsmi_get_gpu_vram_usage(void* h, vram_usage_t* usage) {
  const device_t* d;
  long long rel;
  enter("amdsmi_get_gpu_vram_usage");
  amdsmi_status_t r = gpu_call("amdsmi_get_gpu_vram_usage", h, &d, &rel);
  if (r) return leave(r);
  if (!usage) return leave(AMDSMI_STATUS_INVAL);
  if (!d->mem) return leave(AMDSMI_STATUS_NOT_SUPPORTED);
  memset(usage, 0, sizeof *usage);
  usage->vram_total = (uint32_t)(d->mem_total / 1048576ULL);
  usage->vram_used = (uint32_t)(d->mem_used / 1048576ULL);
  return leave(AMDSMI_STATUS_SUCCESS);
}

EXPORT amdsmi_status_t amdsmi_get_energy_count(void* h, uint64_t* energy, float* resolution,
                                               uint64_t* timestamp) {
  const device_t* d;
  long long rel;
  enter("amdsmi_get_energy_count");
  amdsmi_status_t r = gpu_call("amdsmi_get_energy_count", h, &d, &rel);
  if (r) return leave(r);
  if (!energy || !resolution || !timestamp) return leave(AMDSMI_STATUS_INVAL);
  if (!d->counter) return leave(AMDSMI_STATUS_NOT_SUPPORTED);
  *energy = accumulator(d, rel);
  *resolution = (float)d->counter_resolution_uj;
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts); /* the read's instant, not the counter's update */
  *timestamp = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
  return leave(AMDSMI_STATUS_SUCCESS);
}

EXPORT amdsmi_status_t amdsmi_get_power_info(void* h, void* info) {
  const device_t* d;
  long long rel;
  enter("amdsmi_get_power_info");
  amdsmi_status_t r = gpu_call("amdsmi_get_power_info", h, &d, &rel);
  if (r) return leave(r);
  if (!info) return leave(AMDSMI_STATUS_INVAL);
  uint32_t current = UNSUPPORTED32, average = UNSUPPORTED32;
  if (d->power && d->amd_power != 1) current = whole_w(instant_w(d, rel));
  if (d->power && d->amd_power != 0) average = whole_w(average_w(d, rel));
  uint32_t limit = whole_w(d->power_limit_w);
  if (g_sc->lib_major == 24) {
    power_info_24_t p = {0};
    p.current_socket_power = current;
    p.average_socket_power = average;
    p.power_limit = limit;
    memcpy(info, &p, sizeof p);
  } else {
    power_info_26_t p = {0};
    p.socket_power = current != UNSUPPORTED32 ? current : average;
    p.current_socket_power = current;
    p.average_socket_power = average;
    p.power_limit = limit;
    memcpy(info, &p, sizeof p);
  }
  return leave(AMDSMI_STATUS_SUCCESS);
}

EXPORT amdsmi_status_t amdsmi_get_gpu_process_list(void* h, uint32_t* max, proc_info_t* list) {
  const device_t* d;
  long long rel;
  enter("amdsmi_get_gpu_process_list");
  amdsmi_status_t r = gpu_call("amdsmi_get_gpu_process_list", h, &d, &rel);
  if (r) return leave(r);
  if (!max) return leave(AMDSMI_STATUS_INVAL);
  double t = (double)rel / 1e6;
  uint32_t resident = 0;
  for (int i = 0; i < d->nprocs; i++) {
    const proc_t* p = &d->procs[i];
    if (t < p->from_ms || t >= p->until_ms) continue;
    if (list && resident < *max) {
      proc_info_t* e = &list[resident];
      memset(e, 0, sizeof *e);
      snprintf(e->name, sizeof e->name, "%s", p->name);
      e->pid = p->pid;
      e->mem = p->used == ULLONG_MAX ? 0 : p->used;
      e->memory_usage.vram_mem = e->mem;
    }
    resident++;
  }
  if (list && resident > *max) {
    *max = resident;
    return leave(AMDSMI_STATUS_MORE_DATA);
  }
  *max = resident;
  return leave(AMDSMI_STATUS_SUCCESS);
}
