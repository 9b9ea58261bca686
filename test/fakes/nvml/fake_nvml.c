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

/* ---- the scenario --------------------------------------------------------------------------- */

#define MAX_DEVICES 16
#define SYM_LEN 96

typedef struct {
  double t_ms, w;
} point_t;

typedef struct {
  unsigned int pid;
  unsigned long long used; /* bytes; ULLONG_MAX: not available */
  double from_ms, until_ms;
  char* name;
  int gi, ci; /* the MIG slice it runs on; -1: none */
} proc_t;

#define MAX_SLICES 8

/* A MIG device (slice) of a card in MIG mode (fake_nvml_mig.c). */
typedef struct {
  unsigned int gi, ci, gi_slices;
  char uuid[96], name[96];
  unsigned long long mem_total, mem_used; /* bytes */
  double until_ms;                        /* gone from then on (MIG reconfigured) */
} slice_t;

typedef struct {
  double from_ms;
  int code;
  char fn[SYM_LEN]; /* "" = every device call */
} err_t;

typedef struct {
  double t_ms;
  long long delta_mj;
} jump_t;

typedef struct {
  long long us;
  char fn[SYM_LEN];
} latency_t;

typedef struct {
  char name[96], uuid[96];
  int counter;
  double counter_step_ms;
  double counter_jitter_ms; /* each update late by a pseudo-random share of this */
  long long energy_offset_mj;
  int power_average; /* power_mode */
  double avg_window_ms;
  int instant_field;
  double power_update_ms;
  double sensor_gain;
  double power_noise_w;
  int power;
  int mem;
  unsigned long long mem_total, mem_used,
      mem_reserved; /* bytes (the keys are MiB, decimals allowed) */
  int util;
  unsigned int util_gpu, util_mem;
  int handle_error;
  double power_limit_w, enforced_limit_w;
  point_t* pts;
  double* cum; /* cum[i] = integral from pts[0].t to pts[i].t, in W*ms = mJ */
  int npts;
  proc_t* procs;
  int nprocs;
  err_t* errs;
  int nerrs;
  jump_t* jumps;
  int njumps;
  int mig;                /* MIG mode: -1 not supported (pre-Ampere), 0 off, 1 on */
  unsigned int mig_slots; /* nvmlDeviceGetMaxMigDeviceCount */
  slice_t slices[MAX_SLICES];
  int nslices;
} device_t;

typedef struct {
  long long t0_ns;
  char driver[80];
  int init_error;
  latency_t* lat;
  int nlat;
  char* calls_file;
  int calls_tid; /* calls_file lines also carry the calling thread's id */
  int ndev;
  device_t dev[MAX_DEVICES];
} scenario_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static scenario_t* g_sc = NULL;
static int g_env_read = 0;
static char* g_path = NULL;
static int g_have_stat = 0;
static struct stat g_stat;
static int g_init_count = 0;
static struct nvmlDevice_st g_handles[MAX_DEVICES];

static void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fake-nvml: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static void* xcalloc(size_t n, size_t sz) {
  void* p = calloc(n ? n : 1, sz);
  if (!p) abort();
  return p;
}

static void device_defaults(device_t* d, int index) {
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "NVIDIA H100 80GB HBM3");
  snprintf(d->uuid, sizeof d->uuid, "GPU-00000000-0000-0000-0000-%012d", index);
  d->counter = 1;
  d->counter_step_ms = 10;
  d->counter_jitter_ms = 0;
  d->energy_offset_mj = 1000000;
  d->power_average = 1;
  d->avg_window_ms = 1000;
  d->instant_field = 1;
  d->power_update_ms = 0;
  d->sensor_gain = 1;
  d->power_noise_w = 0;
  d->power = 1;
  d->mem = 1;
  d->mem_total = 81559ULL * 1048576ULL;
  d->util = 1;
  d->power_limit_w = 700;
  d->enforced_limit_w = -1; /* = power_limit_w */
  d->mig_slots = 7;
}

static void scenario_free(scenario_t* s) {
  if (!s) return;
  for (int i = 0; i < MAX_DEVICES; i++) {
    device_t* d = &s->dev[i];
    free(d->pts);
    free(d->cum);
    for (int j = 0; j < d->nprocs; j++) free(d->procs[j].name);
    free(d->procs);
    free(d->errs);
    free(d->jumps);
  }
  free(s->lat);
  free(s->calls_file);
  free(s);
}

static void device_finish(device_t* d) {
  if (d->npts == 0) { /* no power line: a constant 50 W */
    d->pts = xcalloc(1, sizeof(point_t));
    d->pts[0].t_ms = 0;
    d->pts[0].w = 50;
    d->npts = 1;
  }
  d->cum = xcalloc((size_t)d->npts, sizeof(double));
  d->cum[0] = 0;
  for (int i = 1; i < d->npts; i++) {
    d->cum[i] =
        d->cum[i - 1] + (d->pts[i].t_ms - d->pts[i - 1].t_ms) * (d->pts[i].w + d->pts[i - 1].w) / 2;
  }
  if (d->enforced_limit_w < 0) d->enforced_limit_w = d->power_limit_w;
}

static scenario_t* scenario_default(void) {
  scenario_t* s = xcalloc(1, sizeof *s);
  s->t0_ns = 0;
  snprintf(s->driver, sizeof s->driver, "590.48.01");
  s->ndev = 1;
  device_defaults(&s->dev[0], 0);
  device_finish(&s->dev[0]);
  return s;
}

/* Splits a line into tokens in place: spaces separate; "…" groups; '#' outside quotes ends the
 * line. A token `key="a b"` becomes `key=a b`. Returns the count. */
static int tokenize(char* line, char** tok, int max) {
  int n = 0;
  char* p = line;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    if (!*p || *p == '#') break;
    char* out = p;
    if (n < max) tok[n++] = out;
    int quoted = 0;
    while (*p) {
      if (*p == '"') {
        quoted = !quoted;
        p++;
        continue;
      }
      if (!quoted && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) break;
      *out++ = *p++;
    }
    int end = *p != 0;
    *out = 0;
    if (end) p++;
  }
  return n;
}

static int parse_int(const char* s, long long* v) {
  char* e;
  errno = 0;
  long long x = strtoll(s, &e, 10);
  if (errno || e == s || *e) return 0;
  *v = x;
  return 1;
}

static int parse_num(const char* s, double* v) {
  char* e;
  double x = strtod(s, &e);
  if (e == s || *e || !isfinite(x)) return 0;
  *v = x;
  return 1;
}

#define GROW(arr, n, type)                                       \
  do {                                                           \
    arr = (type*)realloc(arr, sizeof(type) * (size_t)((n) + 1)); \
    if (!arr) abort();                                           \
  } while (0)

/* Finds the raw text after the first `skip` whitespace-separated words of `line` (for proc
 * names, which are "the rest of the line"). */
static const char* rest_after(const char* line, int skip) {
  const char* p = line;
  for (int i = 0; i < skip; i++) {
    while (*p == ' ' || *p == '\t') p++;
    while (*p && *p != ' ' && *p != '\t') p++;
  }
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

static device_t* dev_arg(scenario_t* s, const char* tok, int lineno) {
  long long i;
  if (!parse_int(tok, &i) || i < 0 || i >= s->ndev) {
    warn("line %d: no declared device '%s'; line ignored", lineno, tok);
    return NULL;
  }
  return &s->dev[i];
}

static unsigned long long mib_to_bytes(double mib) {
  return mib > 0 ? (unsigned long long)llround(mib * 1048576.0) : 0;
}

static void parse_device_key(device_t* d, const char* key, const char* val, int lineno) {
  double x = 0;
  int num = parse_num(val, &x);
  if (!strcmp(key, "name")) {
    snprintf(d->name, sizeof d->name, "%s", val);
  } else if (!strcmp(key, "uuid")) {
    snprintf(d->uuid, sizeof d->uuid, "%s", val);
  } else if (!strcmp(key, "power_mode")) {
    if (!strcmp(val, "average"))
      d->power_average = 1;
    else if (!strcmp(val, "instant"))
      d->power_average = 0;
    else
      warn("line %d: power_mode must be average or instant", lineno);
  } else if (!num) {
    warn("line %d: %s=%s is not a number; ignored", lineno, key, val);
  } else if (!strcmp(key, "counter")) {
    d->counter = x != 0;
  } else if (!strcmp(key, "counter_step_ms")) {
    d->counter_step_ms = x;
  } else if (!strcmp(key, "counter_jitter_ms")) {
    d->counter_jitter_ms = x;
  } else if (!strcmp(key, "energy_offset_mj")) {
    long long v;
    if (parse_int(val, &v))
      d->energy_offset_mj = v;
    else
      warn("line %d: energy_offset_mj must be an integer", lineno);
  } else if (!strcmp(key, "avg_window_ms")) {
    if (x > 0) d->avg_window_ms = x;
  } else if (!strcmp(key, "instant_field")) {
    d->instant_field = x != 0;
  } else if (!strcmp(key, "power_update_ms")) {
    d->power_update_ms = x;
  } else if (!strcmp(key, "sensor_gain")) {
    if (x > 0) d->sensor_gain = x;
  } else if (!strcmp(key, "power_noise_w")) {
    if (x >= 0) d->power_noise_w = x;
  } else if (!strcmp(key, "power")) {
    d->power = x != 0;
  } else if (!strcmp(key, "mem")) {
    d->mem = x != 0;
  } else if (!strcmp(key, "mem_total_mib")) {
    d->mem_total = mib_to_bytes(x);
  } else if (!strcmp(key, "mem_used_mib")) {
    d->mem_used = mib_to_bytes(x);
  } else if (!strcmp(key, "mem_reserved_mib")) {
    d->mem_reserved = mib_to_bytes(x);
  } else if (!strcmp(key, "util")) {
    d->util = x != 0;
  } else if (!strcmp(key, "util_gpu")) {
    d->util_gpu = (unsigned int)x;
  } else if (!strcmp(key, "util_mem")) {
    d->util_mem = (unsigned int)x;
  } else if (!strcmp(key, "handle_error")) {
    d->handle_error = (int)x;
  } else if (!strcmp(key, "power_limit_w")) {
    d->power_limit_w = x;
  } else if (!strcmp(key, "enforced_limit_w")) {
    d->enforced_limit_w = x;
  } else if (!strcmp(key, "mig")) {
    d->mig = (int)x;
  } else if (!strcmp(key, "mig_slots")) {
    if (x >= 0 && x <= MAX_SLICES) d->mig_slots = (unsigned int)x;
  } else {
    warn("line %d: unknown device key '%s'; ignored", lineno, key);
  }
}

static void parse_slice(device_t* d, char** tok, int n, int lineno);

static scenario_t* g_sc_parsing = NULL;

static scenario_t* scenario_parse(FILE* f) {
  scenario_t* s = xcalloc(1, sizeof *s);
  g_sc_parsing = s;
  s->t0_ns = 0;
  snprintf(s->driver, sizeof s->driver, "590.48.01");
  char* line = NULL;
  size_t cap = 0;
  int lineno = 0;
  char** tok = NULL;
  size_t tok_cap = 0;
  while (getline(&line, &cap, f) >= 0) {
    lineno++;
    /* A line of L characters holds at most L/2 + 1 tokens: never drop any (a long power line). */
    size_t need = strlen(line) / 2 + 2;
    if (need > tok_cap) {
      free(tok);
      tok = xcalloc(need, sizeof *tok);
      tok_cap = need;
    }
    char* raw = strdup(line);
    if (!raw) abort();
    size_t rl = strlen(raw);
    while (rl && (raw[rl - 1] == '\n' || raw[rl - 1] == '\r')) raw[--rl] = 0;
    int n = tokenize(line, tok, (int)tok_cap);
    if (n == 0) {
      free(raw);
      continue;
    }
    const char* dir = tok[0];
    if (!strcmp(dir, "t0_ns") && n >= 2) {
      long long v;
      if (parse_int(tok[1], &v))
        s->t0_ns = v;
      else
        warn("line %d: bad t0_ns", lineno);
    } else if (!strcmp(dir, "driver_version") && n >= 2) {
      snprintf(s->driver, sizeof s->driver, "%s", tok[1]);
    } else if (!strcmp(dir, "init_error") && n >= 2) {
      long long v;
      if (parse_int(tok[1], &v)) s->init_error = (int)v;
    } else if (!strcmp(dir, "latency_us") && n >= 2) {
      long long v;
      if (parse_int(tok[1], &v) && v >= 0) {
        GROW(s->lat, s->nlat, latency_t);
        latency_t* l = &s->lat[s->nlat++];
        l->us = v;
        l->fn[0] = 0;
        for (int i = 2; i < n; i++) {
          if (!strncmp(tok[i], "fn=", 3))
            snprintf(l->fn, sizeof l->fn, "%s", tok[i] + 3);
          else
            warn("line %d: unknown key '%s'", lineno, tok[i]);
        }
      } else {
        warn("line %d: bad latency_us", lineno);
      }
    } else if (!strcmp(dir, "calls_file") && n >= 2) {
      free(s->calls_file);
      s->calls_file = strdup(tok[1]);
      s->calls_tid = 0;
      for (int i = 2; i < n; i++) {
        if (!strcmp(tok[i], "tid=1"))
          s->calls_tid = 1;
        else if (strcmp(tok[i], "tid=0"))
          warn("line %d: unknown key '%s'", lineno, tok[i]);
      }
    } else if (!strcmp(dir, "device") && n >= 2) {
      long long idx;
      if (!parse_int(tok[1], &idx) || idx != s->ndev || idx >= MAX_DEVICES) {
        warn("line %d: devices must be declared in order 0..15; line ignored", lineno);
      } else {
        device_t* d = &s->dev[s->ndev++];
        device_defaults(d, (int)idx);
        for (int i = 2; i < n; i++) {
          char* eq = strchr(tok[i], '=');
          if (!eq) {
            warn("line %d: expected key=value, got '%s'", lineno, tok[i]);
            continue;
          }
          *eq = 0;
          parse_device_key(d, tok[i], eq + 1, lineno);
        }
      }
    } else if (!strcmp(dir, "power") && n >= 4) {
      device_t* d = dev_arg(s, tok[1], lineno);
      if (d) {
        for (int i = 2; i + 1 < n; i += 2) {
          double t, w;
          if (!parse_num(tok[i], &t) || !parse_num(tok[i + 1], &w)) {
            warn("line %d: bad power point '%s %s'", lineno, tok[i], tok[i + 1]);
            continue;
          }
          if (d->npts > 0 && t < d->pts[d->npts - 1].t_ms) {
            warn("line %d: power points must not go back in time; '%s' ignored", lineno, tok[i]);
            continue;
          }
          GROW(d->pts, d->npts, point_t);
          d->pts[d->npts].t_ms = t;
          d->pts[d->npts].w = w;
          d->npts++;
        }
        if ((n - 2) % 2) warn("line %d: odd number of power values", lineno);
      }
    } else if (!strcmp(dir, "proc") && n >= 4) {
      device_t* d = dev_arg(s, tok[1], lineno);
      long long pid;
      if (d && parse_int(tok[2], &pid) && pid >= 0) {
        proc_t p;
        p.pid = (unsigned int)pid;
        p.from_ms = -INFINITY;
        p.until_ms = INFINITY;
        p.gi = -1;
        p.ci = -1;
        double mib;
        if (!strcmp(tok[3], "na"))
          p.used = ULLONG_MAX;
        else if (parse_num(tok[3], &mib) && mib >= 0)
          p.used = mib_to_bytes(mib);
        else {
          warn("line %d: bad used_mib", lineno);
          p.used = 0;
        }
        int i = 4;
        for (; i < n; i++) {
          if (!strncmp(tok[i], "from_ms=", 8))
            parse_num(tok[i] + 8, &p.from_ms);
          else if (!strncmp(tok[i], "until_ms=", 9))
            parse_num(tok[i] + 9, &p.until_ms);
          else if (!strncmp(tok[i], "gi=", 3))
            p.gi = atoi(tok[i] + 3);
          else if (!strncmp(tok[i], "ci=", 3))
            p.ci = atoi(tok[i] + 3);
          else
            break;
        }
        /* the name: the rest of the raw line, unquoted when it was quoted as a whole */
        const char* rest = rest_after(raw, i);
        char* name = strdup(rest);
        if (!name) abort();
        size_t nl = strlen(name);
        while (nl && (name[nl - 1] == ' ' || name[nl - 1] == '\t')) name[--nl] = 0;
        if (nl >= 2 && name[0] == '"' && name[nl - 1] == '"') {
          memmove(name, name + 1, nl - 2);
          name[nl - 2] = 0;
        }
        p.name = name;
        GROW(d->procs, d->nprocs, proc_t);
        d->procs[d->nprocs++] = p;
      } else if (d) {
        warn("line %d: bad pid", lineno);
      }
    } else if (!strcmp(dir, "error") && n >= 4) {
      device_t* d = dev_arg(s, tok[1], lineno);
      double from;
      long long code;
      if (d && parse_num(tok[2], &from) && parse_int(tok[3], &code)) {
        GROW(d->errs, d->nerrs, err_t);
        err_t* e = &d->errs[d->nerrs++];
        e->from_ms = from;
        e->code = (int)code;
        e->fn[0] = 0;
        for (int i = 4; i < n; i++) {
          if (!strncmp(tok[i], "fn=", 3))
            snprintf(e->fn, sizeof e->fn, "%s", tok[i] + 3);
          else
            warn("line %d: unknown key '%s'", lineno, tok[i]);
        }
      } else if (d) {
        warn("line %d: bad error line", lineno);
      }
    } else if (!strcmp(dir, "slice") && n >= 5) {
      parse_slice(dev_arg(s, tok[1], lineno), tok, n, lineno);
    } else if (!strcmp(dir, "counter_jump") && n >= 4) {
      device_t* d = dev_arg(s, tok[1], lineno);
      double t;
      long long delta;
      if (d && parse_num(tok[2], &t) && parse_int(tok[3], &delta)) {
        GROW(d->jumps, d->njumps, jump_t);
        d->jumps[d->njumps].t_ms = t;
        d->jumps[d->njumps].delta_mj = delta;
        d->njumps++;
      } else if (d) {
        warn("line %d: bad counter_jump line", lineno);
      }
    } else {
      warn("line %d: unknown or incomplete directive '%s'; ignored", lineno, dir);
    }
    free(raw);
  }
  free(tok);
  free(line);
  for (int i = 0; i < s->ndev; i++) device_finish(&s->dev[i]);
  return s;
}

/* Called with g_mu held: reads the variable once, and (re)loads the file when it changed. */
static void refresh_locked(void) {
  if (!g_env_read) {
    g_env_read = 1;
    const char* p = getenv("GIUL_FAKE_NVML_SCENARIO");
    if (p && *p) g_path = strdup(p);
  }
  if (g_path) {
    struct stat st;
    if (stat(g_path, &st) == 0) {
      if (!g_have_stat || st.st_ino != g_stat.st_ino || st.st_dev != g_stat.st_dev ||
          st.st_size != g_stat.st_size || st.st_mtim.tv_sec != g_stat.st_mtim.tv_sec ||
          st.st_mtim.tv_nsec != g_stat.st_mtim.tv_nsec) {
        FILE* f = fopen(g_path, "r");
        if (f) {
          scenario_t* s = scenario_parse(f);
          fclose(f);
          scenario_free(g_sc);
          g_sc = s;
          g_stat = st;
          g_have_stat = 1;
        }
      }
    }
  }
  if (!g_sc) g_sc = scenario_default();
}

/* ---- time and the ground truth --------------------------------------------------------------- */

static long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long floor_div(long long a, long long b) {
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

/* rel_ns floored to a multiple of step_ms (0: unchanged), in ms. */
static double floor_to_ms(long long rel_ns, double step_ms) {
  long long step_ns = llround(step_ms * 1e6);
  if (step_ns <= 0) return (double)rel_ns / 1e6;
  return (double)(floor_div(rel_ns, step_ns) * step_ns) / 1e6;
}

/* P(t) in W, t in ms from t0. Right-continuous at steps. */
static double power_at(const device_t* d, double t) {
  const point_t* p = d->pts;
  int n = d->npts;
  if (t < p[0].t_ms) return p[0].w;
  if (t >= p[n - 1].t_ms) return p[n - 1].w;
  int lo = 0, hi = n - 1; /* last i with p[i].t <= t, i < n - 1 */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (p[mid].t_ms <= t)
      lo = mid;
    else
      hi = mid;
  }
  return p[lo].w + (p[hi].w - p[lo].w) * (t - p[lo].t_ms) / (p[hi].t_ms - p[lo].t_ms);
}

/* ∫ from pts[0].t to t of P, in W*ms = mJ (negative before pts[0].t). */
static double prim(const device_t* d, double t) {
  const point_t* p = d->pts;
  int n = d->npts;
  if (t <= p[0].t_ms) return (t - p[0].t_ms) * p[0].w;
  if (t >= p[n - 1].t_ms) return d->cum[n - 1] + (t - p[n - 1].t_ms) * p[n - 1].w;
  int lo = 0, hi = n - 1;
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (p[mid].t_ms <= t)
      lo = mid;
    else
      hi = mid;
  }
  return d->cum[lo] + (t - p[lo].t_ms) * (p[lo].w + power_at(d, t)) / 2;
}

/* Energy from t0 to t (ms), in mJ. */
static double energy_mj(const device_t* d, double t) { return prim(d, t) - prim(d, 0); }

/* A pseudo-random number in [0, 1) for update j (test/fakes/scenario.ts jitter01 computes the
 * same). */
static double jitter01(long long j) {
  uint32_t x = (uint32_t)j * 2654435761u;
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return (double)x / 4294967296.0;
}

/* The counter's last update at or before rel_ns, in ms: multiples of the step from t0, each late
   by jitter01(j) × counter_jitter_ms when that is set (an irregular cadence). */
static double counter_update_ms(const device_t* d, long long rel_ns) {
  long long step_ns = llround(d->counter_step_ms * 1e6);
  long long jitter_ns = llround(d->counter_jitter_ms * 1e6);
  if (step_ns <= 0 || jitter_ns <= 0) return floor_to_ms(rel_ns, d->counter_step_ms);
  long long j = floor_div(rel_ns, step_ns);
  long long u = j * step_ns + llround(jitter01(j) * (double)jitter_ns);
  if (u > rel_ns) {
    j -= 1;
    u = j * step_ns + llround(jitter01(j) * (double)jitter_ns);
  }
  return (double)u / 1e6;
}

__attribute__((unused)) static unsigned long long counter_mj(const device_t* d, long long rel_ns) {
  double s = counter_update_ms(d, rel_ns);
  long long jumps = 0;
  for (int i = 0; i < d->njumps; i++)
    if (d->jumps[i].t_ms <= s) jumps += d->jumps[i].delta_mj;
  double e = energy_mj(d, s);
  long long v = d->energy_offset_mj + (long long)e + jumps;
  return v < 0 ? 0 : (unsigned long long)v;
}

/* Field 186: the power at its last refresh, plus up to ± power_noise_w of noise that changes
   at every refresh (a real sensor's readings differ from one refresh to the next). */
static double instant_w(const device_t* d, long long rel_ns) {
  double u = floor_to_ms(rel_ns, d->power_update_ms);
  double noise = d->power_noise_w * (2 * jitter01((long long)floor(u * 1000.0)) - 1);
  return d->sensor_gain * power_at(d, u) + noise;
}

static double average_w(const device_t* d, long long rel_ns) {
  double u = floor_to_ms(rel_ns, d->power_update_ms);
  double w = d->avg_window_ms;
  return d->sensor_gain * (energy_mj(d, u) - energy_mj(d, u - w)) / w;
}

static unsigned int to_mw(double w) {
  double mw = w * 1000.0;
  if (!(mw > 0)) return 0;
  if (mw >= 4294967295.0) return 4294967295u;
  return (unsigned int)llround(mw);
}

/* ---- per-call plumbing --------------------------------------------------------------------------
 */

/* fn matches sym exactly, or sym is fn followed by a version suffix "_v<N>". */
static int fn_matches(const char* fn, const char* sym) {
  if (!fn[0]) return 1;
  size_t n = strlen(fn);
  if (strncmp(fn, sym, n)) return 0;
  if (sym[n] == 0) return 1;
  return sym[n] == '_' && sym[n + 1] == 'v' && sym[n + 2] >= '0' && sym[n + 2] <= '9';
}

static void sleep_us(long long us) {
  if (us <= 0) return;
  struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Every exported function starts here: loads the scenario, records the call, sleeps the
 * configured latency. Returns with g_mu held. */
static void enter(const char* sym) {
  pthread_mutex_lock(&g_mu);
  refresh_locked();
  long long us = -1, any = 0;
  for (int i = 0; i < g_sc->nlat; i++) {
    if (!g_sc->lat[i].fn[0])
      any = g_sc->lat[i].us;
    else if (fn_matches(g_sc->lat[i].fn, sym))
      us = g_sc->lat[i].us;
  }
  if (us < 0) us = any;
  if (g_sc->calls_file) {
    int fd = open(g_sc->calls_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      char buf[SYM_LEN + 32];
      int len = g_sc->calls_tid
                    ? snprintf(buf, sizeof buf, "%s %ld\n", sym, (long)syscall(SYS_gettid))
                    : snprintf(buf, sizeof buf, "%s\n", sym);
      ssize_t w = write(fd, buf, (size_t)len);
      (void)w;
      close(fd);
    }
  }
  if (us > 0) {
    pthread_mutex_unlock(&g_mu);
    sleep_us(us);
    pthread_mutex_lock(&g_mu);
    refresh_locked();
  }
}

static nvmlReturn_t leave(nvmlReturn_t r) {
  pthread_mutex_unlock(&g_mu);
  return r;
}

static long long rel_now(void) { return mono_ns() - g_sc->t0_ns; }

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
