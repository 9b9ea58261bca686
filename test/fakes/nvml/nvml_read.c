/*
 * fake-nvml-read: drives an NVML library (normally the test double) without the addon, so the
 * tests of the double can read it from TypeScript.
 *
 *   fake-nvml-read <library> [-d <device>] [-n <iterations>] [-i <interval_ms>]
 *                  [--init <symbol>|--no-init] <op> [<op> ...]
 *
 * Prints one JSON object per line. First {"op":"dlopen",...}, then (unless --no-init) the init
 * call, then the handle of the device, then each op of each iteration. Every call line carries
 * "t_ns"/"t1_ns" (CLOCK_MONOTONIC before and after the call, as decimal strings) and "ret" (the
 * nvmlReturn_t). A symbol the library lacks gives {"op":...,"missing":"<symbol>"}.
 *
 * Ops: energy, power, fields:<id>[,<id>...], mem, mem2, mem2:<version>, util, procs1, procs2,
 * procs3, pname:<pid>, name, uuid, index, count, count1, limit, enforced, driver, nvmlversion,
 * init, shutdown, errstr:<code>, has:<symbol>.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../nvml_client.h"

static void* lib;
static nvml_device_t dev;

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void* sym(const char* name) { return dlsym(lib, name); }

static void json_str(const char* s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static void head(const char* op, int iter, long long t, long long t1, ret_t r) {
  printf("{\"op\":");
  json_str(op);
  printf(",\"iter\":%d,\"t_ns\":\"%lld\",\"t1_ns\":\"%lld\",\"ret\":%d", iter, t, t1, r);
}

static int missing(const char* op, int iter, const char* name) {
  printf("{\"op\":");
  json_str(op);
  printf(",\"iter\":%d,\"missing\":", iter);
  json_str(name);
  printf("}\n");
  return 0;
}

#define CALL(T, name, ...)                     \
  __typeof__(T) f_ = (__typeof__(T))sym(name); \
  if (!f_) return missing(op, iter, name);     \
  long long t_ = now_ns();                     \
  ret_t r_ = f_(__VA_ARGS__);                  \
  long long t1_ = now_ns();                    \
  head(op, iter, t_, t1_, r_)

static int procs(const char* op, int iter, const char* name, size_t size) {
  typedef ret_t (*fn)(nvml_device_t, unsigned int*, void*);
  fn f = (fn)sym(name);
  if (!f) return missing(op, iter, name);
  unsigned int n = 0;
  long long t = now_ns();
  ret_t r = f(dev, &n, NULL);
  unsigned int needed = n;
  unsigned char* buf = NULL;
  if (r == 7) { /* INSUFFICIENT_SIZE: the two-call pattern */
    n += 4;
    buf = calloc(n, size);
    r = f(dev, &n, buf);
  }
  long long t1 = now_ns();
  head(op, iter, t, t1, r);
  printf(",\"needed\":%u,\"procs\":[", needed);
  if (r == 0 && buf) {
    for (unsigned int i = 0; i < n; i++) {
      unsigned int pid;
      unsigned long long used;
      if (size == sizeof(proc1_t)) {
        proc1_t* p = (proc1_t*)buf + i;
        pid = p->pid;
        used = p->used;
      } else {
        proc2_t* p = (proc2_t*)buf + i;
        pid = p->pid;
        used = p->used;
      }
      printf("%s{\"pid\":%u,\"used\":\"%llu\"}", i ? "," : "", pid, used);
    }
  }
  printf("]}\n");
  free(buf);
  return 0;
}

static int run_op(const char* op, int iter) {
  if (!strcmp(op, "energy")) {
    unsigned long long e = 0;
    CALL(ret_t(*)(nvml_device_t, unsigned long long*), "nvmlDeviceGetTotalEnergyConsumption", dev,
         &e);
    printf(",\"value\":\"%llu\"}\n", e);
  } else if (!strcmp(op, "power")) {
    unsigned int p = 0;
    CALL(ret_t(*)(nvml_device_t, unsigned int*), "nvmlDeviceGetPowerUsage", dev, &p);
    printf(",\"value\":%u}\n", p);
  } else if (!strcmp(op, "limit") || !strcmp(op, "enforced")) {
    unsigned int p = 0;
    const char* name =
        op[0] == 'l' ? "nvmlDeviceGetPowerManagementLimit" : "nvmlDeviceGetEnforcedPowerLimit";
    CALL(ret_t(*)(nvml_device_t, unsigned int*), name, dev, &p);
    printf(",\"value\":%u}\n", p);
  } else if (!strncmp(op, "fields:", 7)) {
    field_t v[32];
    int n = 0;
    char* list = strdup(op + 7);
    for (char* s = strtok(list, ","); s && n < 32; s = strtok(NULL, ",")) {
      memset(&v[n], 0, sizeof v[n]);
      v[n].fieldId = (unsigned int)atoi(s);
      v[n].ret = -1;
      n++;
    }
    free(list);
    CALL(ret_t(*)(nvml_device_t, int, field_t*), "nvmlDeviceGetFieldValues", dev, n, v);
    printf(",\"values\":[");
    for (int i = 0; i < n; i++) {
      printf("%s{\"field\":%u,\"ret\":%d,\"type\":%d,\"value\":", i ? "," : "", v[i].fieldId,
             v[i].ret, v[i].valueType);
      if (v[i].valueType == 1)
        printf("\"%u\"", v[i].value.ui);
      else if (v[i].valueType == 0)
        printf("\"%.17g\"", v[i].value.d);
      else
        printf("\"%llu\"", v[i].value.ull);
      printf(",\"timestamp_us\":\"%lld\"}", v[i].timestamp);
    }
    printf("]}\n");
  } else if (!strcmp(op, "mem")) {
    mem1_t m = {0, 0, 0};
    CALL(ret_t(*)(nvml_device_t, mem1_t*), "nvmlDeviceGetMemoryInfo", dev, &m);
    printf(",\"total\":\"%llu\",\"free\":\"%llu\",\"used\":\"%llu\"}\n", m.total, m.free, m.used);
  } else if (!strncmp(op, "mem2", 4)) {
    mem2_t m;
    memset(&m, 0, sizeof m);
    m.version = op[4] == ':' ? (unsigned int)strtoul(op + 5, NULL, 0) : 0x02000028u;
    CALL(ret_t(*)(nvml_device_t, mem2_t*), "nvmlDeviceGetMemoryInfo_v2", dev, &m);
    printf(",\"total\":\"%llu\",\"reserved\":\"%llu\",\"free\":\"%llu\",\"used\":\"%llu\"}\n",
           m.total, m.reserved, m.free, m.used);
  } else if (!strcmp(op, "util")) {
    util_t u = {0, 0};
    CALL(ret_t(*)(nvml_device_t, util_t*), "nvmlDeviceGetUtilizationRates", dev, &u);
    printf(",\"gpu\":%u,\"memory\":%u}\n", u.gpu, u.memory);
  } else if (!strcmp(op, "procs1")) {
    return procs(op, iter, "nvmlDeviceGetComputeRunningProcesses", sizeof(proc1_t));
  } else if (!strcmp(op, "procs2")) {
    return procs(op, iter, "nvmlDeviceGetComputeRunningProcesses_v2", sizeof(proc2_t));
  } else if (!strcmp(op, "procs3")) {
    return procs(op, iter, "nvmlDeviceGetComputeRunningProcesses_v3", sizeof(proc2_t));
  } else if (!strncmp(op, "pname:", 6)) {
    char name[256] = "";
    unsigned int pid = (unsigned int)strtoul(op + 6, NULL, 10);
    CALL(ret_t(*)(unsigned int, char*, unsigned int), "nvmlSystemGetProcessName", pid, name,
         sizeof name);
    printf(",\"value\":");
    json_str(name);
    printf("}\n");
  } else if (!strcmp(op, "name") || !strcmp(op, "uuid")) {
    char buf[96] = "";
    CALL(ret_t(*)(nvml_device_t, char*, unsigned int),
         op[0] == 'n' ? "nvmlDeviceGetName" : "nvmlDeviceGetUUID", dev, buf, sizeof buf);
    printf(",\"value\":");
    json_str(buf);
    printf("}\n");
  } else if (!strcmp(op, "driver") || !strcmp(op, "nvmlversion")) {
    char buf[96] = "";
    CALL(ret_t(*)(char*, unsigned int),
         op[0] == 'd' ? "nvmlSystemGetDriverVersion" : "nvmlSystemGetNVMLVersion", buf, sizeof buf);
    printf(",\"value\":");
    json_str(buf);
    printf("}\n");
  } else if (!strcmp(op, "index")) {
    unsigned int i = 0;
    CALL(ret_t(*)(nvml_device_t, unsigned int*), "nvmlDeviceGetIndex", dev, &i);
    printf(",\"value\":%u}\n", i);
  } else if (!strcmp(op, "count") || !strcmp(op, "count1")) {
    unsigned int c = 0;
    CALL(ret_t(*)(unsigned int*), op[5] ? "nvmlDeviceGetCount" : "nvmlDeviceGetCount_v2", &c);
    printf(",\"value\":%u}\n", c);
  } else if (!strcmp(op, "init")) {
    CALL(ret_t(*)(void), "nvmlInit_v2");
    printf("}\n");
  } else if (!strcmp(op, "shutdown")) {
    CALL(ret_t(*)(void), "nvmlShutdown");
    printf("}\n");
  } else if (!strncmp(op, "errstr:", 7)) {
    const char* (*f)(ret_t) = (const char* (*)(ret_t))sym("nvmlErrorString");
    if (!f) return missing(op, iter, "nvmlErrorString");
    printf("{\"op\":");
    json_str(op);
    printf(",\"iter\":%d,\"value\":", iter);
    json_str(f(atoi(op + 7)));
    printf("}\n");
  } else if (!strncmp(op, "has:", 4)) {
    printf("{\"op\":");
    json_str(op);
    printf(",\"iter\":%d,\"value\":%s}\n", iter, sym(op + 4) ? "true" : "false");
  } else {
    fprintf(stderr, "fake-nvml-read: unknown op '%s'\n", op);
    return 2;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: fake-nvml-read <library> [-d N] [-n N] [-i MS] [--init SYM|--no-init] op...\n");
    return 2;
  }
  unsigned int index = 0;
  int iterations = 1;
  double interval_ms = 0;
  const char* init = "";
  int first_op = argc;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-d") && i + 1 < argc)
      index = (unsigned int)atoi(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      iterations = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-i") && i + 1 < argc)
      interval_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--init") && i + 1 < argc)
      init = argv[++i];
    else if (!strcmp(argv[i], "--no-init"))
      init = NULL;
    else {
      first_op = i;
      break;
    }
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("{\"op\":\"dlopen\",\"ok\":false,\"error\":");
    json_str(dlerror());
    printf("}\n");
    return 1;
  }
  printf("{\"op\":\"dlopen\",\"ok\":true}\n");
  if (init) {
    const char* name = *init ? init : (sym("nvmlInit_v2") ? "nvmlInit_v2" : "nvmlInit");
    const char* op = "init";
    int iter = -1;
    if (!strcmp(name, "nvmlInitWithFlags")) {
      ret_t (*f)(unsigned int) = (ret_t(*)(unsigned int))sym(name);
      if (!f) return missing(op, iter, name), 1;
      long long t = now_ns();
      ret_t r = f(0);
      head(op, iter, t, now_ns(), r);
    } else {
      ret_t (*f)(void) = (ret_t(*)(void))sym(name);
      if (!f) return missing(op, iter, name), 1;
      long long t = now_ns();
      ret_t r = f();
      head(op, iter, t, now_ns(), r);
    }
    printf(",\"sym\":");
    json_str(name);
    printf("}\n");
    const char* hname = sym("nvmlDeviceGetHandleByIndex_v2") ? "nvmlDeviceGetHandleByIndex_v2"
                                                             : "nvmlDeviceGetHandleByIndex";
    ret_t (*h)(unsigned int, nvml_device_t*) = (ret_t(*)(unsigned int, nvml_device_t*))sym(hname);
    if (h) {
      long long t = now_ns();
      ret_t r = h(index, &dev);
      head("handle", iter, t, now_ns(), r);
      printf(",\"sym\":");
      json_str(hname);
      printf("}\n");
    }
  }
  fflush(stdout);
  for (int it = 0; it < iterations; it++) {
    if (it > 0 && interval_ms > 0) {
      long long ns = (long long)(interval_ms * 1e6);
      struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
      nanosleep(&ts, NULL);
    }
    for (int i = first_op; i < argc; i++)
      if (run_op(argv[i], it) == 2) return 2;
    fflush(stdout);
  }
  return 0;
}
