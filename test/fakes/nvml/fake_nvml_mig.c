/*
 * MIG mode in the NVML double (included by fake_nvml.c, whose scenario it reads): a card with
 * `mig=1` has the MIG devices (slices) its `slice` lines declare. As on real cards, a slice has no
 * sensor: power, energy and field values on its handle are NOT_SUPPORTED; its UUID, name, memory,
 * GPU and compute instance ids, attributes and processes answer. A slice whose `until_ms` has
 * passed is gone (MIG reconfigured): its slot is empty and its handle is lost.
 */

static struct nvmlDevice_st g_mig_handles[MAX_DEVICES][MAX_SLICES];

typedef struct {
  unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
      sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;
_Static_assert(sizeof(nvmlDeviceAttributes_t) == 40, "nvmlDeviceAttributes_t");

/* `slice <index> <gi> <ci> <gi_slices> [uuid=] [profile=] [mem_total_mib=] [mem_used_mib=]
 * [until_ms=]` */
static void parse_slice(device_t* d, char** tok, int n, int lineno) {
  if (!d) return;
  long long gi, ci, count;
  if (d->nslices >= MAX_SLICES || !parse_int(tok[2], &gi) || !parse_int(tok[3], &ci) ||
      !parse_int(tok[4], &count) || count < 1) {
    warn("line %d: bad slice line (or more than %d)", lineno, MAX_SLICES);
    return;
  }
  slice_t* sl = &d->slices[d->nslices];
  int index = (int)(d - g_sc_parsing->dev);
  memset(sl, 0, sizeof *sl);
  sl->gi = (unsigned int)gi;
  sl->ci = (unsigned int)ci;
  sl->gi_slices = (unsigned int)count;
  sl->until_ms = INFINITY;
  sl->mem_total = mib_to_bytes(10240.0 * (double)count);
  snprintf(sl->uuid, sizeof sl->uuid, "MIG-%08d-0000-4000-8000-%012lld", index, gi * 100 + ci);
  char profile[48];
  profile[0] = 0;
  for (int i = 5; i < n; i++) {
    char* eq = strchr(tok[i], '=');
    double x = 0;
    if (!eq) {
      warn("line %d: expected key=value, got '%s'", lineno, tok[i]);
      continue;
    }
    *eq = 0;
    const char* v = eq + 1;
    if (!strcmp(tok[i], "uuid"))
      snprintf(sl->uuid, sizeof sl->uuid, "%.95s", v);
    else if (!strcmp(tok[i], "profile"))
      snprintf(profile, sizeof profile, "%.47s", v);
    else if (!strcmp(tok[i], "mem_total_mib") && parse_num(v, &x))
      sl->mem_total = mib_to_bytes(x);
    else if (!strcmp(tok[i], "mem_used_mib") && parse_num(v, &x))
      sl->mem_used = mib_to_bytes(x);
    else if (!strcmp(tok[i], "until_ms") && parse_num(v, &x))
      sl->until_ms = x;
    else
      warn("line %d: unknown slice key '%s'", lineno, tok[i]);
  }
  if (!profile[0])
    snprintf(profile, sizeof profile, "%ug.%.0fgb", sl->gi_slices,
             (double)sl->mem_total / 1073741824.0);
  char card[96];
  memcpy(card, d->name, sizeof card);
  snprintf(sl->name, sizeof sl->name, "%.60s MIG %.30s", card, profile);
  d->nslices++;
}

/* Whether h is a MIG handle; its card and slot. */
static int mig_handle(nvmlDevice_t h, int* dev, int* slot) {
  const char* base = (const char*)g_mig_handles;
  const char* p = (const char*)h;
  if (p < base || p >= base + sizeof g_mig_handles) return 0;
  size_t k = (size_t)(p - base);
  if (k % sizeof(struct nvmlDevice_st) != 0) return 0;
  k /= sizeof(struct nvmlDevice_st);
  *dev = (int)(k / MAX_SLICES);
  *slot = (int)(k % MAX_SLICES);
  return 1;
}

/* The live slice behind a MIG handle: NULL with *r set when it is gone or invalid. */
static const slice_t* mig_slice(nvmlDevice_t h, const device_t** card, nvmlReturn_t* r) {
  int dev, slot;
  *r = NVML_ERROR_INVALID_ARGUMENT;
  if (g_init_count <= 0) {
    *r = NVML_ERROR_UNINITIALIZED;
    return NULL;
  }
  if (!mig_handle(h, &dev, &slot) || dev >= g_sc->ndev) return NULL;
  const device_t* d = &g_sc->dev[dev];
  double t = (double)rel_now() / 1e6;
  if (d->mig != 1 || slot >= d->nslices || t >= d->slices[slot].until_ms) {
    *r = NVML_ERROR_GPU_IS_LOST;
    return NULL;
  }
  *card = d;
  *r = NVML_SUCCESS;
  return &d->slices[slot];
}

/* device_call on a MIG handle: a slice has no sensor of its own. */
static nvmlReturn_t mig_device_call(nvmlDevice_t h) {
  const device_t* d;
  nvmlReturn_t r;
  return mig_slice(h, &d, &r) ? NVML_ERROR_NOT_SUPPORTED : r;
}

static nvmlReturn_t mig_string(nvmlDevice_t h, char* out, unsigned int len, int uuid) {
  const device_t* d;
  nvmlReturn_t r;
  const slice_t* sl = mig_slice(h, &d, &r);
  return sl ? copy_str(out, len, uuid ? sl->uuid : sl->name) : r;
}

static nvmlReturn_t mig_memory(nvmlDevice_t h, unsigned long long* total,
                               unsigned long long* used) {
  const device_t* d;
  nvmlReturn_t r;
  const slice_t* sl = mig_slice(h, &d, &r);
  if (!sl) return r;
  *total = sl->mem_total;
  *used = sl->mem_used;
  return NVML_SUCCESS;
}

/* The GPU instance a process list is limited to: a slice's, or -1 for a card's whole list. */
static nvmlReturn_t mig_procs_filter(nvmlDevice_t h, const device_t** card, int* gi) {
  int dev, slot;
  *gi = -1;
  if (!mig_handle(h, &dev, &slot)) return NVML_SUCCESS;
  nvmlReturn_t r;
  const slice_t* sl = mig_slice(h, card, &r);
  if (!sl) return r;
  *gi = (int)sl->gi;
  return NVML_SUCCESS;
}

#ifndef GIUL_FAKE_LEGACY

static nvmlReturn_t card_call(const char* sym, nvmlDevice_t h, const device_t** d) {
  long long rel;
  int dev, slot;
  if (mig_handle(h, &dev, &slot)) return NVML_ERROR_INVALID_ARGUMENT;
  return device_call(sym, h, d, &rel);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned int* current,
                                         unsigned int* pending) {
  const device_t* d;
  enter("nvmlDeviceGetMigMode");
  nvmlReturn_t r = card_call("nvmlDeviceGetMigMode", h, &d);
  if (r) return leave(r);
  if (!current || !pending) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (d->mig < 0) return leave(NVML_ERROR_NOT_SUPPORTED);
  *current = *pending = (unsigned int)d->mig;
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t h, unsigned int* count) {
  const device_t* d;
  enter("nvmlDeviceGetMaxMigDeviceCount");
  nvmlReturn_t r = card_call("nvmlDeviceGetMaxMigDeviceCount", h, &d);
  if (r) return leave(r);
  if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (d->mig < 0) return leave(NVML_ERROR_NOT_SUPPORTED);
  *count = d->mig_slots;
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t h, unsigned int index,
                                                        nvmlDevice_t* mig) {
  const device_t* d;
  enter("nvmlDeviceGetMigDeviceHandleByIndex");
  nvmlReturn_t r = card_call("nvmlDeviceGetMigDeviceHandleByIndex", h, &d);
  if (r) return leave(r);
  if (!mig || d->mig != 1 || index >= d->mig_slots) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if ((int)index >= d->nslices || (double)rel_now() / 1e6 >= d->slices[index].until_ms)
    return leave(NVML_ERROR_NOT_FOUND);
  *mig = &g_mig_handles[h->index][index];
  return leave(NVML_SUCCESS);
}

static nvmlReturn_t instance_id(const char* sym, nvmlDevice_t h, unsigned int* id, int compute) {
  const device_t* d;
  nvmlReturn_t r;
  enter(sym);
  const slice_t* sl = mig_slice(h, &d, &r);
  if (!sl) return leave(r);
  if (!id) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *id = compute ? sl->ci : sl->gi;
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t h, unsigned int* id) {
  return instance_id("nvmlDeviceGetGpuInstanceId", h, id, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t h, unsigned int* id) {
  return instance_id("nvmlDeviceGetComputeInstanceId", h, id, 1);
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t h, nvmlDeviceAttributes_t* a) {
  const device_t* d;
  nvmlReturn_t r;
  enter("nvmlDeviceGetAttributes_v2");
  const slice_t* sl = mig_slice(h, &d, &r);
  if (!sl) return leave(r == NVML_ERROR_INVALID_ARGUMENT ? NVML_ERROR_NOT_SUPPORTED : r);
  if (!a) return leave(NVML_ERROR_INVALID_ARGUMENT);
  memset(a, 0, sizeof *a);
  a->multiprocessorCount = 16 * sl->gi_slices;
  a->gpuInstanceSliceCount = sl->gi_slices;
  a->computeInstanceSliceCount = sl->gi_slices;
  a->memorySizeMB = sl->mem_total / 1048576ULL;
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t h, unsigned int* is_mig) {
  int dev, slot;
  enter("nvmlDeviceIsMigDeviceHandle");
  if (!is_mig) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *is_mig = (unsigned int)mig_handle(h, &dev, &slot);
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                                 nvmlDevice_t* card) {
  const device_t* d;
  nvmlReturn_t r;
  enter("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  if (!mig_slice(mig, &d, &r)) return leave(r);
  if (!card) return leave(NVML_ERROR_INVALID_ARGUMENT);
  int index = (int)(d - g_sc->dev);
  g_handles[index].index = (unsigned int)index;
  *card = &g_handles[index];
  return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* h) {
  enter("nvmlDeviceGetHandleByUUID");
  if (g_init_count <= 0) return leave(NVML_ERROR_UNINITIALIZED);
  if (!uuid || !h) return leave(NVML_ERROR_INVALID_ARGUMENT);
  double t = (double)rel_now() / 1e6;
  for (int i = 0; i < g_sc->ndev; i++) {
    const device_t* d = &g_sc->dev[i];
    if (!strcmp(d->uuid, uuid)) {
      g_handles[i].index = (unsigned int)i;
      *h = &g_handles[i];
      return leave(NVML_SUCCESS);
    }
    for (int k = 0; d->mig == 1 && k < d->nslices; k++) {
      if (strcmp(d->slices[k].uuid, uuid) || t >= d->slices[k].until_ms) continue;
      *h = &g_mig_handles[i][k];
      return leave(NVML_SUCCESS);
    }
  }
  return leave(NVML_ERROR_NOT_FOUND);
}

#endif /* GIUL_FAKE_LEGACY */
