// A known load for the GPU check (scripts/gpu-check.sh): busy, idle, busy, … on one card, so that
// metered windows see power change under them. Needs only the driver: libcuda.so.1 is opened at
// run time and the busy kernel is PTX text, compiled by the driver's JIT (no CUDA toolkit).
//
//   cc -O2 -o gpu-load bench/gpu-load.c -ldl
//   ./gpu-load [--device 0] [--busy-ms 150] [--idle-ms 250] [--seconds 60]
//
// Prints one line per phase on stdout, CLOCK_MONOTONIC ns (the clock of process.hrtime.bigint()):
//   ready <device name> <SMs> <clock kHz>
//   busy <start_ns> <end_ns>
//   idle <start_ns> <end_ns>
// Exit status: 0 done; 2 no CUDA driver (libcuda.so.1 cannot be opened, or a symbol is missing,
// or cuInit fails); 3 a CUDA call failed (its name and error on stderr); 1 bad arguments.
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUstream;
typedef unsigned long long CUdeviceptr;

enum { kAttrClockRateKhz = 13, kAttrMultiprocessorCount = 16 };

// The busy kernel: each thread runs four chains of fused multiply-adds until `cycles` SM clocks
// have passed, then stores their sum (so that the JIT keeps them).
static const char kPtx[] =
    ".version 6.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry spin(.param .u64 cycles, .param .u64 out)\n"
    "{\n"
    "  .reg .u64 %rd<8>;\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .f32 %f<8>;\n"
    "  .reg .u32 %r<4>;\n"
    "  ld.param.u64 %rd1, [cycles];\n"
    "  ld.param.u64 %rd2, [out];\n"
    "  mov.u64 %rd3, %clock64;\n"
    "  mov.u32 %r1, %tid.x;\n"
    "  cvt.rn.f32.u32 %f1, %r1;\n"
    "  add.f32 %f2, %f1, 0f3F800000;\n"
    "  add.f32 %f3, %f1, 0f40000000;\n"
    "  add.f32 %f4, %f1, 0f40400000;\n"
    "LOOP:\n"
    "  fma.rn.f32 %f1, %f1, 0f3F7FFFF0, 0f3A83126F;\n"
    "  fma.rn.f32 %f2, %f2, 0f3F7FFFF0, 0f3A83126F;\n"
    "  fma.rn.f32 %f3, %f3, 0f3F7FFFF0, 0f3A83126F;\n"
    "  fma.rn.f32 %f4, %f4, 0f3F7FFFF0, 0f3A83126F;\n"
    "  fma.rn.f32 %f1, %f1, 0f3F7FFFF0, 0f3A83126F;\n"
    "  fma.rn.f32 %f2, %f2, 0f3F7FFFF0, 0f3A83126F;\n"
    "  fma.rn.f32 %f3, %f3, 0f3F7FFFF0, 0f3A83126F;\n"
    "  fma.rn.f32 %f4, %f4, 0f3F7FFFF0, 0f3A83126F;\n"
    "  mov.u64 %rd4, %clock64;\n"
    "  sub.u64 %rd5, %rd4, %rd3;\n"
    "  setp.lt.u64 %p1, %rd5, %rd1;\n"
    "  @%p1 bra LOOP;\n"
    "  add.f32 %f5, %f1, %f2;\n"
    "  add.f32 %f6, %f3, %f4;\n"
    "  add.f32 %f7, %f5, %f6;\n"
    "  cvta.to.global.u64 %rd6, %rd2;\n"
    "  mul.wide.u32 %rd7, %r1, 4;\n"
    "  add.u64 %rd6, %rd6, %rd7;\n"
    "  st.global.f32 [%rd6], %f7;\n"
    "  ret;\n"
    "}\n";

struct Cuda {
  CUresult (*init)(unsigned int);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*device_get_name)(char*, int, CUdevice);
  CUresult (*device_get_attribute)(int*, int, CUdevice);
  CUresult (*ctx_create)(CUcontext*, unsigned int, CUdevice);
  CUresult (*ctx_destroy)(CUcontext);
  CUresult (*ctx_synchronize)(void);
  CUresult (*module_load_data)(CUmodule*, const void*);
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*);
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*launch_kernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                            unsigned int, unsigned int, unsigned int, CUstream, void**, void**);
  CUresult (*get_error_string)(CUresult, const char**);
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until(int64_t deadline) {
  struct timespec ts = {(time_t)(deadline / 1000000000LL), (long)(deadline % 1000000000LL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
  }
}

static struct Cuda cuda;

/* Exits with 3 and the call's name when a CUDA call failed. */
static void check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* text = NULL;
  if (cuda.get_error_string != NULL) cuda.get_error_string(r, &text);
  fprintf(stderr, "gpu-load: %s failed: CUDA error %d (%s)\n", what, r, text != NULL ? text : "?");
  exit(3);
}

static int load(void** lib) {
  *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (*lib == NULL) {
    fprintf(stderr, "gpu-load: no CUDA driver: %s\n", dlerror());
    return 0;
  }
  struct {
    void** slot;
    const char* name;
  } symbols[] = {
      {(void**)&cuda.init, "cuInit"},
      {(void**)&cuda.device_get, "cuDeviceGet"},
      {(void**)&cuda.device_get_name, "cuDeviceGetName"},
      {(void**)&cuda.device_get_attribute, "cuDeviceGetAttribute"},
      {(void**)&cuda.ctx_create, "cuCtxCreate_v2"},
      {(void**)&cuda.ctx_destroy, "cuCtxDestroy_v2"},
      {(void**)&cuda.ctx_synchronize, "cuCtxSynchronize"},
      {(void**)&cuda.module_load_data, "cuModuleLoadData"},
      {(void**)&cuda.module_get_function, "cuModuleGetFunction"},
      {(void**)&cuda.mem_alloc, "cuMemAlloc_v2"},
      {(void**)&cuda.launch_kernel, "cuLaunchKernel"},
      {(void**)&cuda.get_error_string, "cuGetErrorString"},
  };
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    *symbols[i].slot = dlsym(*lib, symbols[i].name);
    if (*symbols[i].slot == NULL) {
      fprintf(stderr, "gpu-load: no CUDA driver: libcuda.so.1 lacks %s\n", symbols[i].name);
      return 0;
    }
  }
  return 1;
}

static long arg(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; i++) {
    if (strcmp(argv[i], name) == 0) {
      char* end = NULL;
      long v = strtol(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end != 0 || v < 0) {
        fprintf(stderr, "gpu-load: %s wants a whole number, got %s\n", name, argv[i + 1]);
        exit(1);
      }
      return v;
    }
  }
  return fallback;
}

int main(int argc, char** argv) {
  const int device = (int)arg(argc, argv, "--device", 0);
  const long busy_ms = arg(argc, argv, "--busy-ms", 150);
  const long idle_ms = arg(argc, argv, "--idle-ms", 250);
  const long seconds = arg(argc, argv, "--seconds", 60);
  void* lib = NULL;
  if (!load(&lib)) return 2;
  CUresult r = cuda.init(0);
  if (r != 0) {
    const char* text = NULL;
    cuda.get_error_string(r, &text);
    fprintf(stderr, "gpu-load: no CUDA driver: cuInit: CUDA error %d (%s)\n", r,
            text != NULL ? text : "?");
    return 2;
  }
  CUdevice dev;
  check(cuda.device_get(&dev, device), "cuDeviceGet");
  char name[256] = {0};
  check(cuda.device_get_name(name, (int)sizeof name - 1, dev), "cuDeviceGetName");
  int sms = 0;
  int clock_khz = 0;
  check(cuda.device_get_attribute(&sms, kAttrMultiprocessorCount, dev),
        "cuDeviceGetAttribute(SMs)");
  check(cuda.device_get_attribute(&clock_khz, kAttrClockRateKhz, dev),
        "cuDeviceGetAttribute(clock)");
  CUcontext ctx;
  check(cuda.ctx_create(&ctx, 0, dev), "cuCtxCreate");
  CUmodule mod;
  check(cuda.module_load_data(&mod, kPtx), "cuModuleLoadData (PTX JIT)");
  CUfunction spin;
  check(cuda.module_get_function(&spin, mod, "spin"), "cuModuleGetFunction");
  const unsigned int threads = 256;
  CUdeviceptr out;
  check(cuda.mem_alloc(&out, threads * sizeof(float)), "cuMemAlloc");
  for (char* c = name; *c; c++)
    if (*c == ' ') *c = '_';
  printf("ready %s %d %d\n", name, sms, clock_khz);
  fflush(stdout);

  // Each launch spins about 5 ms at the card's rated clock (a boosted clock makes it shorter), on
  // 8 blocks per SM, so a busy phase ends within a launch of its deadline.
  unsigned long long cycles = (unsigned long long)clock_khz * 5ULL;
  void* params[] = {&cycles, &out};
  const int64_t start = now_ns();
  const int64_t end = start + (int64_t)seconds * 1000000000LL;
  int64_t t = start;
  while (t < end) {
    const int64_t busy_end = t + busy_ms * 1000000LL;
    int64_t b = t;
    while (now_ns() < busy_end) {
      check(cuda.launch_kernel(spin, (unsigned int)sms * 8, 1, 1, threads, 1, 1, 0, NULL, params,
                               NULL),
            "cuLaunchKernel");
      check(cuda.ctx_synchronize(), "cuCtxSynchronize");
    }
    int64_t i = now_ns();
    printf("busy %lld %lld\n", (long long)b, (long long)i);
    fflush(stdout);
    sleep_until(i + idle_ms * 1000000LL);
    t = now_ns();
    printf("idle %lld %lld\n", (long long)i, (long long)t);
    fflush(stdout);
  }
  cuda.ctx_destroy(ctx);
  dlclose(lib);
  return 0;
}
