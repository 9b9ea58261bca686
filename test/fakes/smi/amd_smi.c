/*
 * An amd-smi stand-in for the tests (built as build/test-doubles/bin/amd-smi). It dlopens the
 * libamd_smi double (GIUL_AMDSMI_LIBRARY, else libamd_smi.so.26), so the scenario drives it, and
 * answers what giul asks the way ROCm's amd-smi (a Python tool over the same library) does:
 *
 *   amd-smi metric --power --energy --json [--watch <s>] [--iterations <n>]
 *   amd-smi list --json
 *
 * `metric` prints, per iteration, a JSON array with one object per GPU, indented by 4:
 * {"gpu": i, "power": {"socket_power": {"value": W, "unit": "W"} | "N/A", ...},
 *  "energy": {"total_energy_consumption": {"value": J, "unit": "J"}} | "N/A"}, where J is
 * round(accumulator × counter_resolution, 3) / 1e6 rounded to 3 decimals (the library's rounded
 * 15.3 µJ, as amd-smi computes it). With --watch it first prints "'CTRL' + 'C' to stop watching
 * output:" and sleeps <s> seconds after each iteration (as amd-smi does: giul places each
 * iteration's reads after that sleep). Init failing prints an error on stderr and exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../amdsmi_abi.h"

typedef int status_t;
typedef void* handle_t;

static struct {
  status_t (*init)(uint64_t);
  status_t (*sockets)(uint32_t*, handle_t*);
  status_t (*processors)(handle_t, uint32_t*, handle_t*);
  status_t (*uuid)(handle_t, unsigned int*, char*);
  status_t (*energy)(handle_t, uint64_t*, float*, uint64_t*);
  status_t (*power)(handle_t, power_info_26_t*);
} amd;

static handle_t gpus[64];
static int ngpus;

static void* sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "amd-smi: %s is missing from the library\n", name);
    exit(1);
  }
  return p;
}

static void load(void) {
  const char* path = getenv("GIUL_AMDSMI_LIBRARY");
  void* lib = dlopen(path && *path ? path : "libamd_smi.so.26", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "AMD SMI library not found: %s\n", dlerror());
    exit(1);
  }
  amd.init = sym(lib, "amdsmi_init");
  amd.sockets = sym(lib, "amdsmi_get_socket_handles");
  amd.processors = sym(lib, "amdsmi_get_processor_handles");
  amd.uuid = sym(lib, "amdsmi_get_gpu_device_uuid");
  amd.energy = sym(lib, "amdsmi_get_energy_count");
  amd.power = sym(lib, "amdsmi_get_power_info");
  status_t r = amd.init(1u << 1);
  if (r != 0) {
    fprintf(stderr, "ERROR:root:Unable to initialize amdsmi: AMDSMI_STATUS %d\n", r);
    exit(1);
  }
  uint32_t ns = 64;
  handle_t sockets[64];
  if (amd.sockets(&ns, sockets) != 0) exit(1);
  for (uint32_t s = 0; s < ns && s < 64; s++) {
    uint32_t np = (uint32_t)(64 - ngpus);
    if (amd.processors(sockets[s], &np, &gpus[ngpus]) != 0) continue;
    ngpus += (int)np;
  }
}

/* Python's round(x, 3) for the values here (half away from zero is close enough for a double). */
static double round3(double x) { return round(x * 1000.0) / 1000.0; }

static void metric(int last) {
  printf("[\n");
  for (int i = 0; i < ngpus; i++) {
    printf("    {\n        \"gpu\": %d,\n        \"power\": {\n", i);
    power_info_26_t p;
    memset(&p, 0, sizeof p);
    if (amd.power(gpus[i], &p) == 0 &&
        (p.current_socket_power != 0xFFFFFFFFu || p.average_socket_power != 0xFFFFFFFFu)) {
      uint32_t w =
          p.current_socket_power != 0xFFFFFFFFu ? p.current_socket_power : p.average_socket_power;
      printf(
          "            \"socket_power\": {\n                \"value\": %u,\n"
          "                \"unit\": \"W\"\n            },\n",
          w);
    } else {
      printf("            \"socket_power\": \"N/A\",\n");
    }
    printf("            \"power_management\": \"ENABLED\"\n        },\n");
    uint64_t acc = 0, ts = 0;
    float res = 0;
    if (amd.energy(gpus[i], &acc, &res, &ts) == 0) {
      double j = round3(round3((double)acc * (double)res) / 1000000.0);
      printf(
          "        \"energy\": {\n            \"total_energy_consumption\": {\n"
          "                \"value\": %.3f,\n                \"unit\": \"J\"\n            }\n"
          "        }\n",
          j);
    } else {
      printf("        \"energy\": \"N/A\"\n");
    }
    printf("    }%s\n", i + 1 < ngpus ? "," : "");
  }
  printf("]\n");
  (void)last;
  fflush(stdout);
}

static void list(void) {
  printf("[\n");
  for (int i = 0; i < ngpus; i++) {
    char uuid[64] = {0};
    unsigned int len = sizeof uuid;
    amd.uuid(gpus[i], &len, uuid);
    printf("    {\n        \"gpu\": %d,\n        \"uuid\": \"%s\"\n    }%s\n", i, uuid,
           i + 1 < ngpus ? "," : "");
  }
  printf("]\n");
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: amd-smi {metric,list} ...\n");
    return 2;
  }
  long watch = -1, iterations = -1;
  for (int i = 2; i < argc; i++) {
    if ((!strcmp(argv[i], "--watch") || !strcmp(argv[i], "-w")) && i + 1 < argc)
      watch = atol(argv[++i]);
    else if ((!strcmp(argv[i], "--iterations") || !strcmp(argv[i], "-i")) && i + 1 < argc)
      iterations = atol(argv[++i]);
  }
  load();
  if (!strcmp(argv[1], "list")) {
    list();
    return 0;
  }
  if (strcmp(argv[1], "metric")) {
    fprintf(stderr, "amd-smi: unknown command %s\n", argv[1]);
    return 2;
  }
  if (watch < 1) {
    metric(1);
    return 0;
  }
  long sleep = watch * 1000;
  printf("'CTRL' + 'C' to stop watching output:\n");
  for (long k = 0; iterations < 0 || k < iterations; k++) {
    metric(0);
    sleep_ms(sleep);
  }
  return 0;
}
