/*
 * The scenario shared by the test doubles of libnvidia-ml (../nvml/fake_nvml.c) and libamd_smi
 * (../amdsmi/fake_amdsmi.c): its parser, the ground truth (power, its integral, the counter's
 * updates, the sensors' readings) and the per-call plumbing (scenario reload, latency, call log).
 * Included by each double, which defines first: CARD_SCENARIO_ENV (the variable naming the file),
 * CARD_WARN_PREFIX, CARD_DEFAULT_NAME, CARD_DEFAULT_UUID (a printf format of the index),
 * CARD_DEFAULT_STEP_MS, CARD_DEFAULT_DRIVER; and after it, parse_slice() (MIG lines). Keys only
 * one vendor's double reads (MIG's, AMD's power fields) are parsed here all the same.
 * See ../SCENARIO.md.
 */
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
  /* AMD SMI (fake_amdsmi.c): which power fields answer (0 current, 1 average, 2 both), the
     counter resolution the library reports (µJ), how fast the counter counts (0: frozen). */
  int amd_power;
  double counter_resolution_uj;
  double counter_rate;
  int energy_of; /* AMD: this die's counter also counts device energy_of's energy (MI250); -1 */
  int socket;    /* AMD: the socket it is a partition of (default: its own, its index) */
  int mig;       /* MIG mode: -1 not supported (pre-Ampere), 0 off, 1 on */
  unsigned int mig_slots; /* nvmlDeviceGetMaxMigDeviceCount */
  slice_t slices[MAX_SLICES];
  int nslices;
} device_t;

typedef struct {
  long long t0_ns;
  char driver[80];
  int init_error;
  int lib_major; /* AMD SMI's major version (fake_amdsmi.c): 26, or 24 for a ROCm 6 layout */
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

static void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(CARD_WARN_PREFIX, stderr);
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
  snprintf(d->name, sizeof d->name, "%s", CARD_DEFAULT_NAME);
  snprintf(d->uuid, sizeof d->uuid, CARD_DEFAULT_UUID, index);
  d->counter = 1;
  d->counter_step_ms = CARD_DEFAULT_STEP_MS;
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
  d->counter_resolution_uj = 15.3;
  d->counter_rate = 1;
  d->energy_of = -1;
  d->socket = index;
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
  s->lib_major = 26;
  snprintf(s->driver, sizeof s->driver, "%s", CARD_DEFAULT_DRIVER);
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
  } else if (!strcmp(key, "amd_power")) {
    if (!strcmp(val, "current"))
      d->amd_power = 0;
    else if (!strcmp(val, "average"))
      d->amd_power = 1;
    else if (!strcmp(val, "both"))
      d->amd_power = 2;
    else
      warn("line %d: amd_power must be current, average or both", lineno);
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
  } else if (!strcmp(key, "counter_resolution_uj")) {
    d->counter_resolution_uj = x;
  } else if (!strcmp(key, "counter_rate")) {
    if (x >= 0) d->counter_rate = x;
  } else if (!strcmp(key, "energy_of")) {
    d->energy_of = (int)x;
  } else if (!strcmp(key, "socket")) {
    d->socket = (int)x;
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
  s->lib_major = 26;
  snprintf(s->driver, sizeof s->driver, "%s", CARD_DEFAULT_DRIVER);
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
    } else if (!strcmp(dir, "lib_major") && n >= 2) {
      long long v;
      if (parse_int(tok[1], &v)) s->lib_major = (int)v;
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
    const char* p = getenv(CARD_SCENARIO_ENV);
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

__attribute__((unused)) static unsigned int to_mw(double w) {
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

static int leave(int r) {
  pthread_mutex_unlock(&g_mu);
  return r;
}

static long long rel_now(void) { return mono_ns() - g_sc->t0_ns; }
