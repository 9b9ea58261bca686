/*
 * An nvidia-smi stand-in for the tests (built as build/test-doubles/bin/nvidia-smi). It dlopens
 * the NVML double (GIUL_NVML_LIBRARY, else libnvidia-ml.so.1) and answers the few queries giul
 * makes the way the real tool does (shared/nvml-facts.md §3):
 *
 *   nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits] [-i <index>]
 *              [-lms <ms> | --loop-ms=<ms> | -l [<s>] | --loop=<s>]
 *   nvidia-smi --query-compute-apps=<fields> --format=csv[,...] [-i <index>] [loop options]
 *   nvidia-smi -L
 *
 * Replay mode: with GIUL_FAKE_SMI_REPLAY=<file>, prints that file verbatim and exits with
 * GIUL_FAKE_SMI_EXIT (default 0). In loop mode the file is split into blocks at blank lines (a
 * file without blank lines: one block per line), printed one block per loop period.
 * GIUL_FAKE_SMI_LOOPS=<n> ends loop mode after n iterations (default: until killed).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "../nvml_client.h"

static void* lib;

static struct {
  ret_t (*init)(void);
  ret_t (*count)(unsigned int*);
  ret_t (*handle)(unsigned int, nvml_device_t*);
  ret_t (*name)(nvml_device_t, char*, unsigned int);
  ret_t (*uuid)(nvml_device_t, char*, unsigned int);
  ret_t (*power)(nvml_device_t, unsigned int*);
  ret_t (*fields)(nvml_device_t, int, field_t*);
  ret_t (*mem1)(nvml_device_t, mem1_t*);
  ret_t (*mem2)(nvml_device_t, mem2_t*);
  ret_t (*util)(nvml_device_t, util_t*);
  ret_t (*procs)(nvml_device_t, unsigned int*, void*);
  size_t proc_size;
  ret_t (*pname)(unsigned int, char*, unsigned int);
  ret_t (*driver)(char*, unsigned int);
  ret_t (*limit)(nvml_device_t, unsigned int*);
  ret_t (*enforced)(nvml_device_t, unsigned int*);
  const char* (*errstr)(ret_t);
} nv;

enum { F_GPU, F_APPS };

/* One queryable field: its canonical name, its unit (for the header and the values). */
typedef struct {
  const char* name;
  const char* alias;
  const char* unit; /* NULL: none */
  int kind;
} field_def_t;

static const field_def_t GPU_FIELDS[] = {
    {"timestamp", NULL, NULL, F_GPU},
    {"driver_version", NULL, NULL, F_GPU},
    {"index", NULL, NULL, F_GPU},
    {"name", "gpu_name", NULL, F_GPU},
    {"uuid", "gpu_uuid", NULL, F_GPU},
    {"power.draw", NULL, "W", F_GPU},
    {"power.draw.average", "gpu.power.draw.average", "W", F_GPU},
    {"power.draw.instant", "gpu.power.draw.instant", "W", F_GPU},
    {"power.limit", NULL, "W", F_GPU},
    {"enforced.power.limit", NULL, "W", F_GPU},
    {"memory.total", NULL, "MiB", F_GPU},
    {"memory.reserved", NULL, "MiB", F_GPU},
    {"memory.used", NULL, "MiB", F_GPU},
    {"memory.free", NULL, "MiB", F_GPU},
    {"utilization.gpu", NULL, "%", F_GPU},
    {"utilization.memory", NULL, "%", F_GPU},
    {NULL, NULL, NULL, 0},
};

static const field_def_t APP_FIELDS[] = {
    {"timestamp", NULL, NULL, F_APPS},
    {"gpu_name", "name", NULL, F_APPS},
    {"gpu_uuid", NULL, NULL, F_APPS},
    {"pid", NULL, NULL, F_APPS},
    {"process_name", NULL, NULL, F_APPS},
    {"used_gpu_memory", "used_memory", "MiB", F_APPS},
    {NULL, NULL, NULL, 0},
};

#define MAX_FIELDS 64
static const field_def_t* g_fields[MAX_FIELDS];
static int g_nfields;
static int g_noheader, g_nounits;

/* The token nvidia-smi prints for a value NVML could not give. */
static const char* token(ret_t r) {
  switch (r) {
    case 3:
      return "[N/A]";
    case 4:
      return "[Insufficient Permissions]";
    case 6:
      return "[Not Found]";
    case 13:
      return "[Function Not Found]";
    case 15:
      return "[GPU is lost]";
    case 16:
      return "[GPU requires reset]";
    case 26:
      return "[Requested functionality has been deprecated]";
    default:
      return "[Unknown Error]";
  }
}

static void sleep_ms(double ms) {
  if (ms <= 0) return;
  long long ns = (long long)(ms * 1e6);
  struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- value formatting ---------------------------------------------------------------------- */

typedef struct {
  char s[256];
} cell_t;

static void cell_text(cell_t* c, const char* s) { snprintf(c->s, sizeof c->s, "%s", s); }

/* mW as watts with 2 decimals, rounded half up in integer arithmetic. */
static void cell_watts(cell_t* c, unsigned int mw) {
  unsigned long long cw = ((unsigned long long)mw + 5) / 10;
  snprintf(c->s, sizeof c->s, "%llu.%02llu%s", cw / 100, cw % 100, g_nounits ? "" : " W");
}

/* bytes as MiB, ceiled (nvml-facts.md §3.1). */
static void cell_mib(cell_t* c, unsigned long long bytes) {
  unsigned long long mib = bytes / 1048576ULL + (bytes % 1048576ULL ? 1 : 0);
  snprintf(c->s, sizeof c->s, "%llu%s", mib, g_nounits ? "" : " MiB");
}

static void cell_pct(cell_t* c, unsigned int pct) {
  snprintf(c->s, sizeof c->s, "%u%s", pct, g_nounits ? "" : " %");
}

static void timestamp_now(char* out, size_t len) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char base[32];
  strftime(base, sizeof base, "%Y/%m/%d %H:%M:%S", &tm);
  snprintf(out, len, "%s.%03ld", base, (long)(tv.tv_usec / 1000));
}

static void print_header(void) {
  if (g_noheader) return;
  for (int i = 0; i < g_nfields; i++) {
    const field_def_t* f = g_fields[i];
    if (f->unit)
      printf("%s%s [%s]", i ? ", " : "", f->name, f->unit);
    else
      printf("%s%s", i ? ", " : "", f->name);
  }
  printf("\n");
}

static void print_row(cell_t* cells) {
  for (int i = 0; i < g_nfields; i++) printf("%s%s", i ? ", " : "", cells[i].s);
  printf("\n");
}

/* ---- the queries --------------------------------------------------------------------------- */

typedef struct {
  int have_mem;
  ret_t mem_ret;
  unsigned long long total, reserved, used, free;
} mem_t;

static void read_mem(nvml_device_t d, mem_t* m) {
  if (m->have_mem) return;
  m->have_mem = 1;
  if (nv.mem2) {
    mem2_t v;
    memset(&v, 0, sizeof v);
    v.version = 0x02000028u;
    m->mem_ret = nv.mem2(d, &v);
    m->total = v.total;
    m->reserved = v.reserved;
    m->used = v.used;
    m->free = v.free;
  } else if (nv.mem1) {
    mem1_t v = {0, 0, 0};
    m->mem_ret = nv.mem1(d, &v);
    m->total = v.total;
    m->reserved = 0;
    m->used = v.used;
    m->free = v.free;
  } else {
    m->mem_ret = 13;
  }
}

static void power_field(nvml_device_t d, unsigned int id, cell_t* c) {
  if (!nv.fields) {
    cell_text(c, "[N/A]");
    return;
  }
  field_t v;
  memset(&v, 0, sizeof v);
  v.fieldId = id;
  ret_t r = nv.fields(d, 1, &v);
  if (r == 0) r = v.ret;
  if (r) {
    cell_text(c, token(r));
    return;
  }
  unsigned int mw = v.valueType == 0   ? (unsigned int)(v.value.d + 0.5)
                    : v.valueType == 1 ? v.value.ui
                                       : (unsigned int)v.value.ull;
  cell_watts(c, mw);
}

static void gpu_row(unsigned int index, const char* stamp, const char* driver) {
  cell_t cells[MAX_FIELDS];
  nvml_device_t d = NULL;
  ret_t hr = nv.handle(index, &d);
  mem_t m;
  memset(&m, 0, sizeof m);
  util_t u = {0, 0};
  int have_util = 0;
  ret_t util_ret = 0;
  for (int i = 0; i < g_nfields; i++) {
    const char* n = g_fields[i]->name;
    cell_t* c = &cells[i];
    if (!strcmp(n, "timestamp")) {
      cell_text(c, stamp);
    } else if (!strcmp(n, "driver_version")) {
      cell_text(c, driver);
    } else if (!strcmp(n, "index")) {
      snprintf(c->s, sizeof c->s, "%u", index);
    } else if (hr) {
      cell_text(c, token(hr));
    } else if (!strcmp(n, "name") || !strcmp(n, "uuid")) {
      char buf[96] = "";
      ret_t r = (n[0] == 'n' ? nv.name : nv.uuid)(d, buf, sizeof buf);
      cell_text(c, r ? token(r) : buf);
    } else if (!strcmp(n, "power.draw") || !strcmp(n, "power.limit") ||
               !strcmp(n, "enforced.power.limit")) {
      ret_t (*f)(nvml_device_t, unsigned int*) =
          n[0] == 'e' ? nv.enforced : (n[6] == 'd' ? nv.power : nv.limit);
      unsigned int mw = 0;
      ret_t r = f ? f(d, &mw) : 13;
      if (r)
        cell_text(c, token(r));
      else
        cell_watts(c, mw);
    } else if (!strcmp(n, "power.draw.average")) {
      power_field(d, 185, c);
    } else if (!strcmp(n, "power.draw.instant")) {
      power_field(d, 186, c);
    } else if (!strncmp(n, "memory.", 7)) {
      read_mem(d, &m);
      if (m.mem_ret) {
        cell_text(c, token(m.mem_ret));
      } else {
        const char* k = n + 7;
        cell_mib(c, !strcmp(k, "total")      ? m.total
                    : !strcmp(k, "reserved") ? m.reserved
                    : !strcmp(k, "used")     ? m.used
                                             : m.free);
      }
    } else if (!strncmp(n, "utilization.", 12)) {
      if (!have_util) {
        have_util = 1;
        util_ret = nv.util ? nv.util(d, &u) : 13;
      }
      if (util_ret)
        cell_text(c, token(util_ret));
      else
        cell_pct(c, n[12] == 'g' ? u.gpu : u.memory);
    } else {
      cell_text(c, "[Unknown Error]");
    }
  }
  print_row(cells);
}

static void apps_rows(unsigned int index, const char* stamp) {
  nvml_device_t d = NULL;
  if (nv.handle(index, &d) || !nv.procs) return;
  unsigned int n = 0;
  ret_t r = nv.procs(d, &n, NULL);
  unsigned char* buf = NULL;
  for (int tries = 0; r == 7 && tries < 4; tries++) { /* the list can grow between the calls */
    n += 8;
    free(buf);
    buf = calloc(n, nv.proc_size);
    if (!buf) return;
    r = nv.procs(d, &n, buf);
  }
  if (r != 0 || n == 0) {
    free(buf);
    return;
  }
  char name[96] = "", uuid[96] = "";
  ret_t name_ret = nv.name(d, name, sizeof name);
  ret_t uuid_ret = nv.uuid(d, uuid, sizeof uuid);
  for (unsigned int k = 0; k < n; k++) {
    unsigned int pid;
    unsigned long long used;
    if (nv.proc_size == sizeof(proc1_t)) {
      pid = ((proc1_t*)buf)[k].pid;
      used = ((proc1_t*)buf)[k].used;
    } else {
      pid = ((proc2_t*)buf)[k].pid;
      used = ((proc2_t*)buf)[k].used;
    }
    cell_t cells[MAX_FIELDS];
    for (int i = 0; i < g_nfields; i++) {
      const char* f = g_fields[i]->name;
      cell_t* c = &cells[i];
      if (!strcmp(f, "timestamp")) {
        cell_text(c, stamp);
      } else if (!strcmp(f, "gpu_name")) {
        cell_text(c, name_ret ? token(name_ret) : name);
      } else if (!strcmp(f, "gpu_uuid")) {
        cell_text(c, uuid_ret ? token(uuid_ret) : uuid);
      } else if (!strcmp(f, "pid")) {
        snprintf(c->s, sizeof c->s, "%u", pid);
      } else if (!strcmp(f, "process_name")) {
        char pn[256] = "";
        ret_t pr = nv.pname ? nv.pname(pid, pn, sizeof pn) : 13;
        cell_text(c, pr ? token(pr) : pn);
      } else if (!strcmp(f, "used_gpu_memory")) {
        if (used == ULLONG_MAX)
          cell_text(c, "[N/A]");
        else
          cell_mib(c, used);
      }
    }
    print_row(cells);
  }
  free(buf);
}

/* ---- replay -------------------------------------------------------------------------------- */

static int replay(const char* path, int loop, double period_ms, long max_loops) {
  const char* code_s = getenv("GIUL_FAKE_SMI_EXIT");
  int code = code_s && *code_s ? atoi(code_s) : 0;
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "nvidia-smi (fake): cannot read GIUL_FAKE_SMI_REPLAY=%s\n", path);
    return 255;
  }
  size_t cap = 1 << 16, len = 0;
  char* text = malloc(cap + 1);
  size_t got;
  while (text && (got = fread(text + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) text = realloc(text, (cap *= 2) + 1);
  }
  fclose(f);
  if (!text) return 255;
  text[len] = 0;
  if (!loop) {
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    free(text);
    return code;
  }
  int blank_separated = strstr(text, "\n\n") != NULL;
  char* p = text;
  long printed = 0;
  while (*p && (max_loops <= 0 || printed < max_loops)) {
    char* end;
    if (blank_separated) {
      end = strstr(p, "\n\n");
      if (end) end += 1; /* keep the block's last newline, drop the blank line */
    } else {
      end = strchr(p, '\n');
      if (end) end += 1;
    }
    size_t n = end ? (size_t)(end - p) : strlen(p);
    fwrite(p, 1, n, stdout);
    fflush(stdout);
    printed++;
    p += n;
    if (blank_separated && end) p += 1;
    while (blank_separated && *p == '\n') p++;
    if (*p) sleep_ms(period_ms);
  }
  free(text);
  return code;
}

/* ---- main ---------------------------------------------------------------------------------- */

static void* need(const char* a, const char* b) {
  void* s = a ? dlsym(lib, a) : NULL;
  if (!s && b) s = dlsym(lib, b);
  return s;
}

static int parse_fields(const char* list, const field_def_t* table) {
  char* copy = strdup(list);
  g_nfields = 0;
  for (char* s = strtok(copy, ","); s; s = strtok(NULL, ",")) {
    while (*s == ' ') s++;
    size_t l = strlen(s);
    while (l && s[l - 1] == ' ') s[--l] = 0;
    const field_def_t* found = NULL;
    for (const field_def_t* f = table; f->name; f++)
      if (!strcmp(s, f->name) || (f->alias && !strcmp(s, f->alias))) found = f;
    if (!found) {
      printf("Field \"%s\" is not a valid field to query.\n\n", s);
      free(copy);
      return 0;
    }
    if (g_nfields < MAX_FIELDS) g_fields[g_nfields++] = found;
  }
  free(copy);
  return 1;
}

int main(int argc, char** argv) {
  const char* query = NULL;
  int kind = F_GPU;
  const char* format = NULL;
  const char* ids = NULL;
  int loop = 0, list = 0;
  double period_ms = 0;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (!strncmp(a, "--query-gpu=", 12)) {
      query = a + 12;
      kind = F_GPU;
    } else if (!strcmp(a, "--query-gpu") && i + 1 < argc) {
      query = argv[++i];
      kind = F_GPU;
    } else if (!strncmp(a, "--query-compute-apps=", 21)) {
      query = a + 21;
      kind = F_APPS;
    } else if (!strcmp(a, "--query-compute-apps") && i + 1 < argc) {
      query = argv[++i];
      kind = F_APPS;
    } else if (!strncmp(a, "--format=", 9)) {
      format = a + 9;
    } else if (!strcmp(a, "--format") && i + 1 < argc) {
      format = argv[++i];
    } else if ((!strcmp(a, "-i") || !strcmp(a, "--id")) && i + 1 < argc) {
      ids = argv[++i];
    } else if (!strncmp(a, "--id=", 5)) {
      ids = a + 5;
    } else if (!strcmp(a, "-lms") && i + 1 < argc) {
      loop = 1;
      period_ms = atof(argv[++i]);
    } else if (!strncmp(a, "--loop-ms=", 10)) {
      loop = 1;
      period_ms = atof(a + 10);
    } else if (!strcmp(a, "-l") || !strcmp(a, "--loop")) {
      loop = 1;
      period_ms = 5000;
      if (i + 1 < argc && argv[i + 1][0] != '-') period_ms = atof(argv[++i]) * 1000;
    } else if (!strncmp(a, "--loop=", 7)) {
      loop = 1;
      period_ms = atof(a + 7) * 1000;
    } else if (!strcmp(a, "-L") || !strcmp(a, "--list-gpus")) {
      list = 1;
    } else {
      printf("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n");
      return 2;
    }
  }
  const char* loops_s = getenv("GIUL_FAKE_SMI_LOOPS");
  long max_loops = loops_s && *loops_s ? atol(loops_s) : 0;

  const char* replay_path = getenv("GIUL_FAKE_SMI_REPLAY");
  if (replay_path && *replay_path) return replay(replay_path, loop, period_ms, max_loops);

  if (!list) {
    if (!query) {
      printf("This nvidia-smi stand-in answers only --query-gpu, --query-compute-apps and -L.\n");
      return 2;
    }
    if (!format) {
      printf("\"--format\" must be specified when querying.\n\n");
      return 2;
    }
    char* fcopy = strdup(format);
    int csv = 0;
    for (char* s = strtok(fcopy, ","); s; s = strtok(NULL, ",")) {
      if (!strcmp(s, "csv"))
        csv = 1;
      else if (!strcmp(s, "noheader"))
        g_noheader = 1;
      else if (!strcmp(s, "nounits"))
        g_nounits = 1;
      else {
        free(fcopy);
        printf("Invalid format option \"%s\".\n", s);
        return 2;
      }
    }
    free(fcopy);
    if (!csv) {
      printf("Invalid format: only csv is supported.\n");
      return 2;
    }
    if (!parse_fields(query, kind == F_GPU ? GPU_FIELDS : APP_FIELDS)) return 2;
  }

  const char* path = getenv("GIUL_NVML_LIBRARY");
  if (!path || !*path) path = "libnvidia-ml.so.1";
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf(
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that "
        "the NVIDIA Display Driver is properly installed and present in your system.\n"
        "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n");
    return 12;
  }
  nv.init = need("nvmlInit_v2", "nvmlInit");
  nv.count = need("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  nv.handle = need("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  nv.name = need("nvmlDeviceGetName", NULL);
  nv.uuid = need("nvmlDeviceGetUUID", NULL);
  nv.power = need("nvmlDeviceGetPowerUsage", NULL);
  nv.fields = need("nvmlDeviceGetFieldValues", NULL);
  nv.mem1 = need("nvmlDeviceGetMemoryInfo", NULL);
  nv.mem2 = need("nvmlDeviceGetMemoryInfo_v2", NULL);
  nv.util = need("nvmlDeviceGetUtilizationRates", NULL);
  nv.pname = need("nvmlSystemGetProcessName", NULL);
  nv.driver = need("nvmlSystemGetDriverVersion", NULL);
  nv.limit = need("nvmlDeviceGetPowerManagementLimit", NULL);
  nv.enforced = need("nvmlDeviceGetEnforcedPowerLimit", NULL);
  nv.errstr = need("nvmlErrorString", NULL);
  nv.procs =
      need("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2");
  nv.proc_size = sizeof(proc2_t);
  if (!nv.procs) {
    nv.procs = need("nvmlDeviceGetComputeRunningProcesses", NULL);
    nv.proc_size = sizeof(proc1_t);
  }
  if (!nv.init || !nv.count || !nv.handle || !nv.name || !nv.uuid) {
    printf("Failed to initialize NVML: Function Not Found\n");
    return 13;
  }

  ret_t r = nv.init();
  if (r == 9) {
    printf(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
        "that the latest NVIDIA driver is installed and running.\n\n");
    return 9;
  }
  if (r == 18) {
    printf("Failed to initialize NVML: Driver/library version mismatch\n");
    return 18;
  }
  if (r) {
    printf("Failed to initialize NVML: %s\n", nv.errstr ? nv.errstr(r) : "Unknown Error");
    return r == 4 ? 4 : 255;
  }
  unsigned int count = 0;
  if (nv.count(&count) || count == 0) {
    printf("No devices were found\n");
    return 6;
  }

  /* which devices */
  unsigned int which[64];
  int nwhich = 0;
  if (ids) {
    char* copy = strdup(ids);
    for (char* s = strtok(copy, ","); s && nwhich < 64; s = strtok(NULL, ",")) {
      char* e;
      long v = strtol(s, &e, 10);
      if (*e || v < 0 || (unsigned long)v >= count) {
        printf("No devices were found\n");
        free(copy);
        return 6;
      }
      which[nwhich++] = (unsigned int)v;
    }
    free(copy);
  } else {
    for (unsigned int i = 0; i < count && nwhich < 64; i++) which[nwhich++] = i;
  }

  if (list) {
    for (int k = 0; k < nwhich; k++) {
      nvml_device_t d = NULL;
      char name[96] = "", uuid[96] = "";
      if (nv.handle(which[k], &d) == 0) {
        nv.name(d, name, sizeof name);
        nv.uuid(d, uuid, sizeof uuid);
      }
      printf("GPU %u: %s (UUID: %s)\n", which[k], name, uuid);
    }
    return 0;
  }

  print_header();
  fflush(stdout);
  for (long iter = 0;; iter++) {
    char driver[96] = "[N/A]";
    if (nv.driver) {
      ret_t dr = nv.driver(driver, sizeof driver);
      if (dr) snprintf(driver, sizeof driver, "%s", token(dr));
    }
    /* The query time: the wall clock (truncated to the ms) right before the devices are read, one
     * stamp for the iteration's rows. giul maps it onto CLOCK_MONOTONIC to place the readings. */
    char stamp[64];
    timestamp_now(stamp, sizeof stamp);
    for (int k = 0; k < nwhich; k++) {
      if (kind == F_GPU)
        gpu_row(which[k], stamp, driver);
      else
        apps_rows(which[k], stamp);
    }
    fflush(stdout);
    if (!loop || (max_loops > 0 && iter + 1 >= max_loops)) break;
    sleep_ms(period_ms);
  }
  return 0;
}
