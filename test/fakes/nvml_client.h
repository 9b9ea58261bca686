/* The NVML types the test tools (fake-nvml-read, the nvidia-smi stand-in) use to call a
 * libnvidia-ml.so.1 through dlopen: one declaration for both, restated from nvml-facts.md §1.
 * The double itself (nvml/fake_nvml.c) and the addon (native/nvml_types.h) keep their own, on
 * purpose: a double that shared the product's declarations would agree with its mistakes. */
#ifndef GIUL_TEST_NVML_CLIENT_H
#define GIUL_TEST_NVML_CLIENT_H

typedef int ret_t;
typedef void* nvml_device_t;

typedef struct {
  unsigned int pid;
  unsigned long long used;
} proc1_t;
typedef struct {
  unsigned int pid;
  unsigned long long used;
  unsigned int gi, ci;
} proc2_t;
typedef struct {
  unsigned long long total, free, used;
} mem1_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} mem2_t;
typedef struct {
  unsigned int gpu, memory;
} util_t;
typedef union {
  double d;
  int si;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  unsigned short us;
} value_t;
typedef struct {
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;
  ret_t ret;
  value_t value;
} field_t;

#endif
