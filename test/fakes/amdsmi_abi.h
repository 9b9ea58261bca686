/*
 * AMD SMI 26.x's amdsmi_power_info_t, as the libamd_smi double answers it and the amd-smi stand-in
 * reads it (our own declaration of the public amdsmi.h's layout): one declaration for both. The
 * addon keeps its own (native/amdsmi_types.h), on purpose, as with nvml_client.h: a double that
 * shared the product's declarations would agree with its mistakes.
 */
#pragma once

#include <stdint.h>

typedef struct {
  uint64_t socket_power;
  uint32_t current_socket_power, average_socket_power;
  uint64_t gfx_voltage, soc_voltage, mem_voltage;
  uint32_t power_limit;
  uint64_t reserved[18];
} power_info_26_t;

_Static_assert(sizeof(power_info_26_t) == 192, "amdsmi_power_info_t 26.x");
