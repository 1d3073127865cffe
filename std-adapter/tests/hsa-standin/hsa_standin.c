/*
 * hsa_standin.c: a stand-in for AMD's HSA runtime (ROCr), so that hostcall's HSA code paths run
 * in tests on machines without an AMD GPU. The tests build it with the system C compiler,
 *   cc -std=c11 -shared -fPIC -pthread -o libhsa-standin.so hsa_standin.c
 * and load it in place of libhsa-runtime64.so.1 (HOSTCALL_HSA_LIB, or a path given to hostcall).
 *
 * IMPLEMENTED, with ROCm 5.x prototypes and constants (hsa_types.h) and the statuses the HSA
 * specification and ROCr return: hsa_init, hsa_shut_down (reference counted), hsa_status_string,
 * hsa_system_get_info, hsa_iterate_agents, hsa_agent_get_info, hsa_amd_agent_iterate_memory_pools,
 * hsa_amd_memory_pool_get_info, hsa_amd_agent_memory_pool_get_info (ACCESS, NUM_LINK_HOPS,
 * LINK_INFO), hsa_amd_memory_pool_allocate and _free, hsa_amd_agents_allow_access,
 * hsa_amd_memory_fill, hsa_signal_create and _destroy, hsa_signal_{load_scacquire, load_relaxed,
 * store_screlease, store_relaxed, add_screlease, add_relaxed, subtract_screlease,
 * subtract_relaxed, wait_scacquire, wait_relaxed}; hsa_system_get_major_extension_table for
 * HSA_EXTENSION_AMD_LOADER version 1 (the 1.03 table: iterate_executables,
 * executable_iterate_loaded_code_objects, loaded_code_object_get_info of LOAD_DELTA, LOAD_BASE,
 * LOAD_SIZE, URI_LENGTH, URI), over the code objects set with hsa_standin_set_code_objects.
 * NOT IMPLEMENTED: queues, dispatch, loading code objects, async copies, IPC, SVM attributes, interrupt
 * signals (event_mailbox_ptr stays 0, so a device never raises an interrupt), NUMA placement and
 * memory isolation: every pool is host memory from aligned_alloc, so "device-local" memory is
 * CPU-reachable (emulated waves can use it) and access grants are recorded, not enforced.
 *
 * TOPOLOGY: hsa_standin_configure, or HSA_STANDIN_TOPOLOGY read at the first hsa_init; applied when
 * the reference count goes 0 -> 1. E.g. "cpus=2;gpus=2;gpu_numa=1,0;atomics64=0;kernarg_first=1".
 * Defaults: 1 CPU, 2 GPUs, GPU i on NUMA node i % cpus, PCIe links with 64-bit atomics, ROCr's
 * pool order. Agent "cpuI" is NUMA node I; agents are listed CPUs first. Pools, in order:
 *   CPU: cpuI.fine (FINE_GRAINED), cpuI.kernarg (KERNARG_INIT | FINE_GRAINED), cpuI.coarse;
 *        kernarg_first=1 lists the kernarg pool first.
 *   GPU: gpuI.coarse (COARSE_GRAINED, device-local), gpuI.group (GROUP segment, no allocation).
 * Allocatable pools have a 4 KiB granule and alignment: sizes round up to 4096, every block is
 * 4096-aligned. A GPU reaches a CPU pool over one PCIe hop (numa_distance 20) on its own NUMA
 * node, else over two (PCIe, then HyperTransport, 12); its access to CPU and peer memory is
 * DISALLOWED_BY_DEFAULT. HSA_AMD_AGENT_INFO_NEAREST_CPU (ROCm 6) names a GPU's NUMA node's CPU.
 *
 * SIGNALS are amd_signal_t objects (64 bytes, 64-aligned; kind 1 = user @0, value @8,
 * event_mailbox_ptr 0 @16) whose address is the handle, so a device that does
 * __atomic_fetch_add(handle + 8, 1, RELEASE) rings one. Blocked waiters sleep on a futex for at
 * most 200 us at a time, so such a raw add is seen within that; API stores and adds wake them at
 * once. Timeouts are in ticks of HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY = 100 MHz (10 ns).
 * Destroyed signals are never freed: a late ring is harmless, and later use is an error.
 * MEMORY: new blocks are filled with 0xA5 (ROCr does not zero them), freed ones with 0xDD.
 *
 * ERRORS: NOT_INITIALIZED before hsa_init; INVALID_ARGUMENT, INVALID_AGENT, INVALID_MEMORY_POOL;
 * INVALID_ALLOCATION for a free of an unknown or freed pointer, or a pool without allocation;
 * INVALID_SIGNAL for a destroy of an unknown or destroyed signal. A value operation on such a
 * signal returns 0. Every error is logged and counted ("errors").
 * FAILURE INJECTION: HSA_STANDIN_FAIL (or configure) "hsa_amd_memory_pool_allocate:3,
 * hsa_signal_create:2+" fails the 3rd allocation (calls counted from configuration), and the 2nd
 * and every later signal creation, with OUT_OF_RESOURCES once the arguments were found valid.
 *
 * OBSERVING (the hsa_standin_* functions at the end): a log line per call with its key
 * arguments (pool and agent names, sizes, handles) and status, also appended to the file named
 * by HSA_STANDIN_LOG; value operations (load, store, add, subtract, wait) are only counted,
 * unless misused. A dump of live allocations (pool, size, agents granted) and signals. Counters.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef HSA_STANDIN_SYSTEM_HEADERS /* checks the prototypes against ROCm's own headers */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/hsa_ven_amd_loader.h>
#else
#include "hsa_types.h"
#endif
#define NEAREST_CPU 0xA113u /* HSA_AMD_AGENT_INFO_NEAREST_CPU (ROCm 6) */
#define OK HSA_STATUS_SUCCESS

/* ---- State ---- */

#define MAX_CPUS 8
#define MAX_GPUS 8
#define MAX_SIGNALS 4096
#define GRANULE 4096u
#define FREQUENCY 100000000u /* timestamp ticks per second */
#define LOG_LIMIT (4u << 20)

typedef struct { hsa_device_type_t type; int numa; char name[16]; } agent_t;
typedef struct {
  int agent; hsa_amd_segment_t segment; uint32_t flags; bool alloc_allowed; size_t size; char name[24];
} pool_t;
typedef struct { void *ptr; size_t size; int pool; uint32_t granted; /* bit i: agents[i] */ } alloc_t;
typedef struct { /* ROCm's amd_signal_t (amd_hsa_signal.h): what device code touches */
  int64_t kind; /* @0: 1 = AMD_SIGNAL_KIND_USER */
  int64_t value; /* @8: the device's atomic add lands here */
  uint64_t event_mailbox_ptr; /* @16: 0, no interrupt */
  uint32_t event_id, reserved1; /* @24, @28 */
  uint64_t start_ts, end_ts, queue_ptr; /* @32, @40, @48 */
  uint32_t reserved3[2]; /* @56 */
} amd_signal_layout_t;
_Static_assert(sizeof(amd_signal_layout_t) == 64, "amd_signal_t is 64 bytes");
#ifdef HSA_STANDIN_SYSTEM_HEADERS
#include <hsa/amd_hsa_signal.h>
#define SAME_OFFSET(a, b) _Static_assert(offsetof(amd_signal_t, a) == offsetof(amd_signal_layout_t, b), #a)
SAME_OFFSET(kind, kind); SAME_OFFSET(value, value); SAME_OFFSET(event_mailbox_ptr, event_mailbox_ptr);
SAME_OFFSET(event_id, event_id); SAME_OFFSET(start_ts, start_ts); SAME_OFFSET(queue_ptr, queue_ptr);
_Static_assert(sizeof(amd_signal_t) == 64 && _Alignof(amd_signal_t) == 64, "amd_signal_t");
#endif
typedef struct {
  _Alignas(64) amd_signal_layout_t amd; /* first: the handle is its address */
  int live, sleepers; /* atomics */
} signal_t;

#define FUNCTIONS(X) X(hsa_init) X(hsa_shut_down) X(hsa_status_string) X(hsa_system_get_info) \
  X(hsa_iterate_agents) X(hsa_agent_get_info) X(hsa_amd_agent_iterate_memory_pools) \
  X(hsa_amd_memory_pool_get_info) X(hsa_amd_agent_memory_pool_get_info) \
  X(hsa_amd_memory_pool_allocate) X(hsa_amd_memory_pool_free) X(hsa_amd_agents_allow_access) \
  X(hsa_amd_memory_fill) X(hsa_signal_create) X(hsa_signal_destroy) X(hsa_signal_load_scacquire) \
  X(hsa_signal_load_relaxed) X(hsa_signal_store_screlease) X(hsa_signal_store_relaxed) \
  X(hsa_signal_add_screlease) X(hsa_signal_add_relaxed) X(hsa_signal_subtract_screlease) \
  X(hsa_signal_subtract_relaxed) X(hsa_signal_wait_scacquire) X(hsa_signal_wait_relaxed)
#define AS_ENUM(name) F_##name,
#define AS_NAME(name) #name,
enum { FUNCTIONS(AS_ENUM) F_COUNT };
static const char *const NAMES[F_COUNT] = {FUNCTIONS(AS_NAME)};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* guards all but the signal fast path */
static int refs; /* hsa_init's reference count */
static bool configured; /* the specs below are set (by configure, or from the environment) */
static char topology_spec[256], fail_spec[512];
static agent_t agents[MAX_CPUS + MAX_GPUS];
static pool_t pools[3 * MAX_CPUS + 2 * MAX_GPUS];
static int n_agents, n_pools;
static bool atomics64;
static alloc_t *allocs;
static size_t n_allocs, cap_allocs;
static signal_t *signals[MAX_SIGNALS]; /* every signal ever made: append-only, read lock-free */
static size_t n_signals; /* atomic */
static uint64_t calls[F_COUNT], fail_at[F_COUNT]; /* calls: atomic; fail_at: 0 = never */
static bool fail_onwards[F_COUNT];
static int64_t errors, injected, live_signals;
static char *log_text;
static size_t log_len;

/* ---- The log, and the shape of every call ---- */

static void log_line(const char *fmt, ...) { /* lock held */
  char line[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  size_t n = strlen(line);
  char *grown = log_len + n + 2 <= LOG_LIMIT ? realloc(log_text, log_len + n + 2) : NULL;
  if (grown) {
    log_text = grown;
    memcpy(log_text + log_len, line, n);
    log_len += n;
    memcpy(log_text + log_len++, "\n", 2);
  }
  const char *path = getenv("HSA_STANDIN_LOG");
  FILE *file = path && *path ? fopen(path, "a") : NULL;
  if (file) fprintf(file, "%s\n", line), fclose(file);
}

static const struct { hsa_status_t status; const char *name, *text; } STATUSES[] = {
  {HSA_STATUS_SUCCESS, "SUCCESS", "The function has been executed successfully."},
  {HSA_STATUS_INFO_BREAK, "INFO_BREAK", "A traversal over a list of elements has been interrupted."},
  {HSA_STATUS_ERROR, "ERROR", "A generic error has occurred."},
  {HSA_STATUS_ERROR_INVALID_ARGUMENT, "ERROR_INVALID_ARGUMENT", "An argument is not valid."},
  {HSA_STATUS_ERROR_INVALID_ALLOCATION, "ERROR_INVALID_ALLOCATION", "The allocation is not valid."},
  {HSA_STATUS_ERROR_INVALID_AGENT, "ERROR_INVALID_AGENT", "The agent is invalid."},
  {HSA_STATUS_ERROR_INVALID_SIGNAL, "ERROR_INVALID_SIGNAL", "The signal is invalid."},
  {HSA_STATUS_ERROR_OUT_OF_RESOURCES, "ERROR_OUT_OF_RESOURCES",
   "The runtime failed to allocate the necessary resources (hsa-standin)."},
  {HSA_STATUS_ERROR_NOT_INITIALIZED, "ERROR_NOT_INITIALIZED",
   "An API other than hsa_init has been invoked while the reference count of the runtime is zero."},
  {HSA_STATUS_ERROR_REFCOUNT_OVERFLOW, "ERROR_REFCOUNT_OVERFLOW", "The reference count has overflowed."},
  {(hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL, "ERROR_INVALID_MEMORY_POOL", "The pool is invalid."},
};
#define N_STATUSES (sizeof STATUSES / sizeof STATUSES[0])

typedef struct { int fn; bool injected; } call_t;
/* Takes the lock and counts the call; NOT_INITIALIZED where the runtime must be and is not. */
static hsa_status_t begin(call_t *call, int fn, bool needs_init) {
  pthread_mutex_lock(&mu);
  *call = (call_t){fn, false};
  __atomic_add_fetch(&calls[fn], 1, __ATOMIC_RELAXED);
  return needs_init && refs == 0 ? HSA_STATUS_ERROR_NOT_INITIALIZED : OK;
}
/* Sets `*status` to `error` if it is still OK and `bad` holds; whether it is still OK. */
static bool check(hsa_status_t *status, bool bad, hsa_status_t error) {
  if (*status == OK && bad) *status = error;
  return *status == OK;
}
/* Fails a still-OK call that HSA_STANDIN_FAIL names (call it once the arguments were checked). */
static bool inject(call_t *call, hsa_status_t *status) {
  uint64_t n = __atomic_load_n(&calls[call->fn], __ATOMIC_RELAXED), at = fail_at[call->fn];
  call->injected = *status == OK && at && (n == at || (fail_onwards[call->fn] && n > at));
  injected += call->injected;
  return check(status, call->injected, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
}
/* Logs "<function> <arguments>-> <status>", counts errors, releases the lock. */
static hsa_status_t done(call_t *call, hsa_status_t status, const char *fmt, ...) {
  char args[768];
  const char *name = "UNKNOWN";
  va_list list;
  va_start(list, fmt);
  vsnprintf(args, sizeof args, fmt, list);
  va_end(list);
  for (size_t i = 0; i < N_STATUSES; i++)
    if (STATUSES[i].status == status) name = STATUSES[i].name;
  log_line("%s %s-> %s%s", NAMES[call->fn], args, name, call->injected ? " (injected)" : "");
  errors += status != OK && status != HSA_STATUS_INFO_BREAK && !call->injected;
  pthread_mutex_unlock(&mu);
  return status;
}

/* ---- Configuration (lock held) ---- */

static void add_pool(int agent, const char *kind, hsa_amd_segment_t segment, uint32_t flags, size_t size) {
  pool_t *pool = &pools[n_pools++];
  *pool = (pool_t){agent, segment, flags, segment == HSA_AMD_SEGMENT_GLOBAL, size, ""};
  snprintf(pool->name, sizeof pool->name, "%s.%s", agents[agent].name, kind);
}

static int parse_topology(const char *spec) { /* refs == 0 */
  int cpus = 1, gpus = 2, numa[MAX_GPUS], n_numa = 0, a64 = 1, kernarg_first = 0;
  char copy[256], *save = NULL;
  snprintf(copy, sizeof copy, "%s", spec);
  for (char *item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
    char *value = strchr(item, '=');
    if (!value) return -1;
    *value++ = '\0';
    if (!strcmp(item, "cpus")) cpus = atoi(value);
    else if (!strcmp(item, "gpus")) gpus = atoi(value);
    else if (!strcmp(item, "atomics64")) a64 = atoi(value);
    else if (!strcmp(item, "kernarg_first")) kernarg_first = atoi(value);
    else if (!strcmp(item, "gpu_numa"))
      for (char *s = value; *s;) {
        if (n_numa == MAX_GPUS) return -1;
        numa[n_numa++] = (int)strtol(s, &s, 10);
        if (*s && *s++ != ',') return -1;
      }
    else return -1;
  }
  if (cpus < 1 || cpus > MAX_CPUS || gpus < 0 || gpus > MAX_GPUS || n_numa > gpus) return -1;
  for (int i = 0; i < n_numa; i++)
    if (numa[i] < 0 || numa[i] >= cpus) return -1;
  const uint32_t FINE = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
                 KERNARG = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT | FINE,
                 COARSE = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
  n_agents = cpus + gpus, n_pools = 0, atomics64 = a64;
  for (int i = 0; i < n_agents; i++) {
    bool cpu = i < cpus;
    int index = cpu ? i : i - cpus;
    agents[i] = (agent_t){cpu ? HSA_DEVICE_TYPE_CPU : HSA_DEVICE_TYPE_GPU,
                          cpu ? i : index < n_numa ? numa[index] : index % cpus, ""};
    snprintf(agents[i].name, sizeof agents[i].name, "%s%d", cpu ? "cpu" : "gpu", index);
    if (cpu) {
      if (kernarg_first) add_pool(i, "kernarg", HSA_AMD_SEGMENT_GLOBAL, KERNARG, (size_t)64 << 30);
      add_pool(i, "fine", HSA_AMD_SEGMENT_GLOBAL, FINE, (size_t)64 << 30);
      if (!kernarg_first) add_pool(i, "kernarg", HSA_AMD_SEGMENT_GLOBAL, KERNARG, (size_t)64 << 30);
      add_pool(i, "coarse", HSA_AMD_SEGMENT_GLOBAL, COARSE, (size_t)64 << 30);
    } else {
      add_pool(i, "coarse", HSA_AMD_SEGMENT_GLOBAL, COARSE, (size_t)16 << 30);
      add_pool(i, "group", HSA_AMD_SEGMENT_GROUP, 0, 64 << 10);
    }
  }
  return 0;
}

static int parse_failures(const char *spec) {
  char copy[512], *save = NULL;
  memset(fail_at, 0, sizeof fail_at);
  memset(fail_onwards, 0, sizeof fail_onwards);
  snprintf(copy, sizeof copy, "%s", spec);
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *at = strchr(item, ':'), *end;
    if (!at) return -1;
    *at++ = '\0';
    int fn = 0;
    while (fn < F_COUNT && strcmp(NAMES[fn], item)) fn++;
    unsigned long long n = strtoull(at, &end, 10);
    if (fn == F_COUNT || n == 0 || (*end && strcmp(end, "+"))) return -1;
    fail_at[fn] = n, fail_onwards[fn] = *end == '+';
  }
  return 0;
}

/* Sets the topology and the failures to inject (NULL: defaults, none) and restarts the call
 * counts. 0, or -1 with nothing changed while initialised or when a spec does not parse. */
int hsa_standin_configure(const char *topology, const char *failures) {
  topology = topology ? topology : "", failures = failures ? failures : "";
  pthread_mutex_lock(&mu);
  int result = refs == 0 && parse_topology(topology) == 0 && parse_failures(failures) == 0 ? 0 : -1;
  if (result == 0) {
    snprintf(topology_spec, sizeof topology_spec, "%s", topology);
    snprintf(fail_spec, sizeof fail_spec, "%s", failures);
    memset(calls, 0, sizeof calls);
    configured = true;
  } else if (refs == 0) {
    parse_failures(fail_spec); /* the previous ones */
  }
  log_line("hsa_standin_configure topology=\"%s\" fail=\"%s\" -> %d", topology, failures, result);
  pthread_mutex_unlock(&mu);
  return result;
}

/* ---- Lookups (lock held, but find_signal) ---- */

#define HANDLE(object) ((uint64_t)(uintptr_t)(object))
static agent_t *agent_of(hsa_agent_t agent) {
  for (int i = 0; i < n_agents; i++)
    if (agent.handle == HANDLE(&agents[i])) return &agents[i];
  return NULL;
}
static pool_t *pool_of(hsa_amd_memory_pool_t pool) {
  for (int i = 0; i < n_pools; i++)
    if (pool.handle == HANDLE(&pools[i])) return &pools[i];
  return NULL;
}
static alloc_t *alloc_at(const void *ptr) {
  for (size_t i = 0; i < n_allocs; i++)
    if (allocs[i].ptr == ptr) return &allocs[i];
  return NULL;
}
static alloc_t *alloc_holding(const void *ptr, size_t len) { /* [ptr, ptr + len) in one block */
  for (size_t i = 0; i < n_allocs; i++) {
    uintptr_t offset = (uintptr_t)ptr - (uintptr_t)allocs[i].ptr;
    if ((uintptr_t)ptr >= (uintptr_t)allocs[i].ptr && offset < allocs[i].size && len <= allocs[i].size - offset)
      return &allocs[i];
  }
  return NULL;
}
static const char *pool_name(const alloc_t *a) { return a ? pools[a->pool].name : "?"; }
static void agent_names(char *out, size_t len, uint32_t mask) {
  out[0] = '\0';
  for (int i = 0; i < n_agents; i++)
    if (mask & (1u << i)) snprintf(out + strlen(out), len - strlen(out), "%s%s", *out ? "," : "", agents[i].name);
}

/* How `agent` reaches `pool`'s memory (see the header comment). */
typedef struct {
  hsa_amd_memory_pool_access_t access;
  uint32_t hops;
  hsa_amd_memory_pool_link_info_t link[2];
} path_t;
static void add_hop(path_t *path, hsa_amd_link_info_type_t type, uint32_t distance, bool atomics) {
  path->link[path->hops++] = (hsa_amd_memory_pool_link_info_t){
    .min_latency = 500, .max_latency = 1000, .min_bandwidth = 16000, .max_bandwidth = 32000,
    .atomic_support_32bit = atomics, .atomic_support_64bit = atomics, .coherent_support = true,
    .link_type = type, .numa_distance = distance};
}
static path_t path_to(const agent_t *agent, const pool_t *pool) {
  const agent_t *owner = &agents[pool->agent];
  bool cpu = agent->type == HSA_DEVICE_TYPE_CPU, cpu_pool = owner->type == HSA_DEVICE_TYPE_CPU;
  path_t path = {HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT, 0, {{0}}};
  if (agent == owner) return path;
  if (pool->segment != HSA_AMD_SEGMENT_GLOBAL) path.access = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
  else if (cpu && cpu_pool) add_hop(&path, HSA_AMD_LINK_INFO_TYPE_HYPERTRANSPORT, 12, true);
  else {
    path.access = HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT;
    if (!cpu && !cpu_pool) add_hop(&path, HSA_AMD_LINK_INFO_TYPE_XGMI, 15, true);
    else add_hop(&path, HSA_AMD_LINK_INFO_TYPE_PCIE, 20, atomics64);
    if (cpu != cpu_pool && agent->numa != owner->numa) add_hop(&path, HSA_AMD_LINK_INFO_TYPE_HYPERTRANSPORT, 12, true);
  }
  return path;
}

static signal_t *find_signal(hsa_signal_t signal, int fn) { /* a live signal, counted; or NULL, logged */
  size_t n = __atomic_load_n(&n_signals, __ATOMIC_ACQUIRE); /* pairs with the release in create */
  __atomic_add_fetch(&calls[fn], 1, __ATOMIC_RELAXED);
  for (size_t i = 0; i < n; i++)
    if (HANDLE(&signals[i]->amd) == signal.handle) {
      if (__atomic_load_n(&signals[i]->live, __ATOMIC_ACQUIRE)) return signals[i];
      break;
    }
  pthread_mutex_lock(&mu);
  log_line("%s signal=0x%" PRIx64 " -> ERROR: not a live signal", NAMES[fn], signal.handle);
  errors++;
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* ---- The runtime ---- */

hsa_status_t hsa_init(void) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_init, false);
  if (!configured) {
    const char *topology = getenv("HSA_STANDIN_TOPOLOGY"), *failures = getenv("HSA_STANDIN_FAIL");
    snprintf(topology_spec, sizeof topology_spec, "%s", topology ? topology : "");
    snprintf(fail_spec, sizeof fail_spec, "%s", failures ? failures : "");
    configured = true;
    check(&status, parse_failures(fail_spec) != 0, HSA_STATUS_ERROR);
  }
  check(&status, refs == INT_MAX, HSA_STATUS_ERROR_REFCOUNT_OVERFLOW);
  if (inject(&c, &status) && check(&status, refs == 0 && parse_topology(topology_spec) != 0, HSA_STATUS_ERROR))
    refs++;
  return done(&c, status, "topology=\"%s\" fail=\"%s\" refs=%d ", topology_spec, fail_spec, refs);
}

hsa_status_t hsa_shut_down(void) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_shut_down, true);
  if (status == OK && --refs == 0 && (n_allocs || live_signals))
    log_line("LEAK at the last hsa_shut_down: %zu allocations, %" PRId64 " signals live", n_allocs, live_signals);
  return done(&c, status, "refs=%d ", refs);
}

hsa_status_t hsa_status_string(hsa_status_t status, const char **text) {
  call_t c;
  begin(&c, F_hsa_status_string, false);
  hsa_status_t result = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; text && i < N_STATUSES; i++)
    if (STATUSES[i].status == status) *text = STATUSES[i].text, result = OK;
  return done(&c, result, "status=0x%x ", (unsigned)status);
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void *value) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_system_get_info, true);
  if (check(&status, !value, HSA_STATUS_ERROR_INVALID_ARGUMENT)) switch ((uint32_t)attribute) {
    case HSA_SYSTEM_INFO_VERSION_MAJOR: case HSA_SYSTEM_INFO_VERSION_MINOR: *(uint16_t *)value = 1; break;
    case HSA_SYSTEM_INFO_TIMESTAMP: *(uint64_t *)value = now_ns() / (1000000000u / FREQUENCY); break;
    case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY: *(uint64_t *)value = FREQUENCY; break;
    case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT: *(uint64_t *)value = UINT64_MAX; break;
    case HSA_SYSTEM_INFO_ENDIANNESS: *(hsa_endianness_t *)value = HSA_ENDIANNESS_LITTLE; break;
    case HSA_SYSTEM_INFO_MACHINE_MODEL: *(hsa_machine_model_t *)value = HSA_MACHINE_MODEL_LARGE; break;
    default: status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return done(&c, status, "attribute=%u ", (unsigned)attribute);
}

/* ---- Agents and pools ---- */

hsa_status_t hsa_iterate_agents(hsa_status_t (*callback)(hsa_agent_t agent, void *data), void *data) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_iterate_agents, true);
  int n = check(&status, !callback, HSA_STATUS_ERROR_INVALID_ARGUMENT) ? n_agents : 0;
  pthread_mutex_unlock(&mu); /* a callback may call the runtime; the agents do not change meanwhile */
  for (int i = 0; i < n && status == OK; i++) status = callback((hsa_agent_t){HANDLE(&agents[i])}, data);
  pthread_mutex_lock(&mu);
  return done(&c, status, "agents=%d ", n);
}

hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void *value) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_agent_get_info, true);
  agent_t *a = agent_of(agent);
  check(&status, !a, HSA_STATUS_ERROR_INVALID_AGENT);
  if (check(&status, !value, HSA_STATUS_ERROR_INVALID_ARGUMENT)) {
    bool gpu = a->type == HSA_DEVICE_TYPE_GPU;
    switch ((uint32_t)attribute) {
      case HSA_AGENT_INFO_NAME: memset(value, 0, 64), strcpy(value, a->name); break;
      case HSA_AGENT_INFO_VENDOR_NAME: memset(value, 0, 64), strcpy(value, gpu ? "AMD" : "CPU"); break;
      case HSA_AGENT_INFO_FEATURE: *(uint32_t *)value = gpu ? HSA_AGENT_FEATURE_KERNEL_DISPATCH : 0; break;
      case HSA_AGENT_INFO_WAVEFRONT_SIZE: *(uint32_t *)value = gpu ? 64 : 0; break;
      case HSA_AGENT_INFO_NODE: case HSA_AMD_AGENT_INFO_DRIVER_NODE_ID: *(uint32_t *)value = a - agents; break;
      case HSA_AGENT_INFO_DEVICE: *(hsa_device_type_t *)value = a->type; break;
      case NEAREST_CPU: *(hsa_agent_t *)value = (hsa_agent_t){HANDLE(&agents[a->numa])}; break;
      default: status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
  }
  return done(&c, status, "agent=%s attribute=0x%x ", a ? a->name : "?", (unsigned)attribute);
}

hsa_status_t hsa_amd_agent_iterate_memory_pools(hsa_agent_t agent,
                                                hsa_status_t (*callback)(hsa_amd_memory_pool_t pool, void *data),
                                                void *data) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_amd_agent_iterate_memory_pools, true);
  agent_t *a = agent_of(agent);
  check(&status, !a, HSA_STATUS_ERROR_INVALID_AGENT);
  int n = check(&status, !callback, HSA_STATUS_ERROR_INVALID_ARGUMENT) ? n_pools : 0;
  pthread_mutex_unlock(&mu); /* a callback may call the runtime; the pools do not change meanwhile */
  for (int i = 0; i < n && status == OK; i++)
    if (&agents[pools[i].agent] == a) status = callback((hsa_amd_memory_pool_t){HANDLE(&pools[i])}, data);
  pthread_mutex_lock(&mu);
  return done(&c, status, "agent=%s ", a ? a->name : "?");
}

hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t pool, hsa_amd_memory_pool_info_t attribute,
                                          void *value) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_amd_memory_pool_get_info, true);
  pool_t *p = pool_of(pool);
  check(&status, !p, (hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  if (check(&status, !value, HSA_STATUS_ERROR_INVALID_ARGUMENT)) switch ((uint32_t)attribute) {
    case HSA_AMD_MEMORY_POOL_INFO_SEGMENT: *(hsa_amd_segment_t *)value = p->segment; break;
    case HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS: *(uint32_t *)value = p->flags; break;
    case HSA_AMD_MEMORY_POOL_INFO_SIZE: *(size_t *)value = p->size; break;
    case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE: *(size_t *)value = p->alloc_allowed ? p->size : 0; break;
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: *(bool *)value = p->alloc_allowed; break;
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE:
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT: *(size_t *)value = p->alloc_allowed ? GRANULE : 0; break;
    case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL: *(bool *)value = false; break;
    default: status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return done(&c, status, "pool=%s attribute=%u ", p ? p->name : "?", (unsigned)attribute);
}

hsa_status_t hsa_amd_agent_memory_pool_get_info(hsa_agent_t agent, hsa_amd_memory_pool_t pool,
                                                hsa_amd_agent_memory_pool_info_t attribute, void *value) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_amd_agent_memory_pool_get_info, true);
  agent_t *a = agent_of(agent);
  pool_t *p = pool_of(pool);
  check(&status, !a, HSA_STATUS_ERROR_INVALID_AGENT);
  check(&status, !p, (hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  if (check(&status, !value, HSA_STATUS_ERROR_INVALID_ARGUMENT)) {
    path_t path = path_to(a, p);
    switch ((uint32_t)attribute) {
      case HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS: *(hsa_amd_memory_pool_access_t *)value = path.access; break;
      case HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS: *(uint32_t *)value = path.hops; break;
      case HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO: memcpy(value, path.link, path.hops * sizeof *path.link); break;
      default: status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
  }
  return done(&c, status, "agent=%s pool=%s attribute=%u ", a ? a->name : "?", p ? p->name : "?",
              (unsigned)attribute);
}

/* ---- Memory ---- */

hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t pool, size_t size, uint32_t flags, void **ptr) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_amd_memory_pool_allocate, true);
  pool_t *p = pool_of(pool);
  void *block = NULL;
  size_t rounded = (size + GRANULE - 1) / GRANULE * GRANULE;
  check(&status, size == 0 || !ptr, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  check(&status, !p, (hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  check(&status, !p || !p->alloc_allowed || size > p->size, HSA_STATUS_ERROR_INVALID_ALLOCATION);
  if (inject(&c, &status) && n_allocs == cap_allocs) {
    alloc_t *grown = realloc(allocs, (cap_allocs * 2 + 16) * sizeof *allocs);
    if (grown) allocs = grown, cap_allocs = cap_allocs * 2 + 16;
  }
  if (status == OK && n_allocs < cap_allocs) block = aligned_alloc(GRANULE, rounded);
  if (check(&status, !block, HSA_STATUS_ERROR_OUT_OF_RESOURCES)) {
    memset(block, 0xA5, rounded);
    allocs[n_allocs++] = (alloc_t){block, rounded, (int)(p - pools), 0};
    *ptr = block;
  }
  return done(&c, status, "pool=%s size=%zu flags=%u ptr=%p ", p ? p->name : "?", size, flags, block);
}

hsa_status_t hsa_amd_memory_pool_free(void *ptr) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_amd_memory_pool_free, true);
  alloc_t *a = alloc_at(ptr);
  const char *pool = pool_name(a);
  check(&status, ptr && !a, HSA_STATUS_ERROR_INVALID_ALLOCATION); /* free(NULL) succeeds */
  if (inject(&c, &status) && a) {
    memset(a->ptr, 0xDD, a->size);
    free(a->ptr);
    *a = allocs[--n_allocs];
  }
  return done(&c, status, "ptr=%p pool=%s ", ptr, pool);
}

hsa_status_t hsa_amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t *agent_list, const uint32_t *flags,
                                         const void *ptr) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_amd_agents_allow_access, true);
  uint32_t mask = 0;
  alloc_t *a = alloc_at(ptr);
  check(&status, !num_agents || !agent_list || flags || !ptr, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  for (uint32_t i = 0; status == OK && i < num_agents; i++) {
    agent_t *agent = agent_of(agent_list[i]);
    if (check(&status, !agent, HSA_STATUS_ERROR_INVALID_AGENT)) mask |= 1u << (agent - agents);
  }
  check(&status, !a, HSA_STATUS_ERROR_INVALID_ARGUMENT); /* not the start of a block of this runtime */
  for (int i = 0; status == OK && i < n_agents; i++) /* a pool the agent can never reach */
    check(&status, mask & (1u << i) && !path_to(&agents[i], &pools[a->pool]).access, /* NEVER_ALLOWED */
          HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (inject(&c, &status)) a->granted |= mask;
  char names[256];
  agent_names(names, sizeof names, mask);
  return done(&c, status, "agents=%s ptr=%p pool=%s ", names, ptr, pool_name(a));
}

hsa_status_t hsa_amd_memory_fill(void *ptr, uint32_t value, size_t count) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_amd_memory_fill, true);
  alloc_t *a = count <= SIZE_MAX / 4 ? alloc_holding(ptr, count * 4) : NULL;
  check(&status, !ptr || (uintptr_t)ptr % 4 || !a, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (inject(&c, &status))
    for (size_t i = 0; i < count; i++) ((uint32_t *)ptr)[i] = value;
  return done(&c, status, "ptr=%p value=0x%x count=%zu pool=%s ", ptr, value, count, pool_name(a));
}

/* ---- Signals ---- */

static long futex(int *word, int op, int value, const struct timespec *timeout) {
  return syscall(SYS_futex, word, op, value, timeout, NULL, 0);
}
static void wake(signal_t *s) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST); /* pairs with the fence in wait_on: a store, then a load */
  if (__atomic_load_n(&s->sleepers, __ATOMIC_RELAXED)) futex((int *)&s->amd.value, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
}

hsa_status_t hsa_signal_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                               const hsa_agent_t *consumers, hsa_signal_t *signal) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_signal_create, true);
  signal_t *s = NULL;
  check(&status, !signal || (num_consumers && !consumers), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  for (uint32_t i = 0; status == OK && i < num_consumers; i++)
    check(&status, !agent_of(consumers[i]), HSA_STATUS_ERROR_INVALID_AGENT);
  if (inject(&c, &status) && n_signals < MAX_SIGNALS) s = aligned_alloc(64, sizeof *s);
  if (check(&status, !s, HSA_STATUS_ERROR_OUT_OF_RESOURCES)) {
    memset(s, 0, sizeof *s);
    s->amd.kind = 1, s->amd.value = initial_value, s->live = 1;
    signals[n_signals] = s;
    __atomic_store_n(&n_signals, n_signals + 1, __ATOMIC_RELEASE); /* pairs with find_signal */
    live_signals++;
    signal->handle = HANDLE(&s->amd);
  }
  return done(&c, status, "initial=%" PRId64 " consumers=%u signal=%p ", initial_value, num_consumers,
              (void *)s);
}

hsa_status_t hsa_signal_destroy(hsa_signal_t signal) {
  call_t c;
  hsa_status_t status = begin(&c, F_hsa_signal_destroy, true);
  signal_t *s = NULL;
  for (size_t i = 0; i < n_signals; i++)
    if (HANDLE(&signals[i]->amd) == signal.handle) s = signals[i];
  check(&status, !signal.handle, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (check(&status, !s || !s->live, HSA_STATUS_ERROR_INVALID_SIGNAL)) {
    __atomic_store_n(&s->live, 0, __ATOMIC_RELEASE);
    live_signals--;
    wake(s); /* a waiter returns */
  }
  return done(&c, status, "signal=0x%" PRIx64 " ", signal.handle);
}

#define LOAD(fn, order) \
  hsa_signal_value_t fn(hsa_signal_t signal) { \
    signal_t *s = find_signal(signal, F_##fn); \
    return s ? __atomic_load_n(&s->amd.value, order) : 0; \
  }
#define UPDATE(fn, op, order) \
  void fn(hsa_signal_t signal, hsa_signal_value_t value) { \
    signal_t *s = find_signal(signal, F_##fn); \
    if (s) op(&s->amd.value, value, order), wake(s); \
  }
LOAD(hsa_signal_load_scacquire, __ATOMIC_ACQUIRE)
LOAD(hsa_signal_load_relaxed, __ATOMIC_RELAXED)
UPDATE(hsa_signal_store_screlease, __atomic_store_n, __ATOMIC_RELEASE)
UPDATE(hsa_signal_store_relaxed, __atomic_store_n, __ATOMIC_RELAXED)
UPDATE(hsa_signal_add_screlease, __atomic_fetch_add, __ATOMIC_RELEASE)
UPDATE(hsa_signal_add_relaxed, __atomic_fetch_add, __ATOMIC_RELAXED)
UPDATE(hsa_signal_subtract_screlease, __atomic_fetch_sub, __ATOMIC_RELEASE)
UPDATE(hsa_signal_subtract_relaxed, __atomic_fetch_sub, __ATOMIC_RELAXED)

/* Polls the value: spins a little, then (BLOCKED) sleeps on a futex for at most 200 us at a
 * time, so a device's raw atomic add, which wakes nobody, is seen within that. Returns the value
 * that met the condition, or the value when the timeout passed or the signal was destroyed. */
static hsa_signal_value_t wait_on(int fn, hsa_signal_t signal, hsa_signal_condition_t condition,
                                  hsa_signal_value_t compare, uint64_t timeout, hsa_wait_state_t state, int order) {
  signal_t *s = find_signal(signal, fn);
  if (!s) return 0;
  if ((uint32_t)condition > HSA_SIGNAL_CONDITION_GTE) {
    pthread_mutex_lock(&mu);
    log_line("%s condition=%u -> ERROR: no such condition", NAMES[fn], (unsigned)condition);
    errors++;
    pthread_mutex_unlock(&mu);
    return __atomic_load_n(&s->amd.value, order);
  }
  uint64_t limit = timeout > UINT64_MAX / 10 ? UINT64_MAX : timeout * (1000000000u / FREQUENCY), start = now_ns();
  for (uint32_t polls = 0;; polls++) {
    hsa_signal_value_t v = __atomic_load_n(&s->amd.value, order);
    bool met = condition == HSA_SIGNAL_CONDITION_EQ   ? v == compare
               : condition == HSA_SIGNAL_CONDITION_NE ? v != compare
               : condition == HSA_SIGNAL_CONDITION_LT ? v < compare
                                                      : v >= compare;
    uint64_t elapsed = now_ns() - start;
    if (met || elapsed >= limit || !__atomic_load_n(&s->live, __ATOMIC_ACQUIRE)) return v;
    if (polls < 256 || state == HSA_WAIT_STATE_ACTIVE) {
      if (polls % 64 == 63) sched_yield();
      continue;
    }
    struct timespec nap = {0, (long)(limit - elapsed < 200000 ? limit - elapsed : 200000)};
    __atomic_add_fetch(&s->sleepers, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST); /* pairs with the fence in wake */
    futex((int *)&s->amd.value, FUTEX_WAIT_PRIVATE, (int)(uint32_t)v, &nap); /* the value's low half */
    __atomic_sub_fetch(&s->sleepers, 1, __ATOMIC_RELAXED);
  }
}
hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t signal, hsa_signal_condition_t condition,
                                             hsa_signal_value_t compare_value, uint64_t timeout_hint,
                                             hsa_wait_state_t wait_state_hint) {
  return wait_on(F_hsa_signal_wait_scacquire, signal, condition, compare_value, timeout_hint, wait_state_hint,
                 __ATOMIC_ACQUIRE);
}
hsa_signal_value_t hsa_signal_wait_relaxed(hsa_signal_t signal, hsa_signal_condition_t condition,
                                           hsa_signal_value_t compare_value, uint64_t timeout_hint,
                                           hsa_wait_state_t wait_state_hint) {
  return wait_on(F_hsa_signal_wait_relaxed, signal, condition, compare_value, timeout_hint, wait_state_hint,
                 __ATOMIC_RELAXED);
}

/* ---- Observing ---- */

/* ---- The loader extension: code objects set by hsa_standin_set_code_objects ---- */

#define MAX_CODE_OBJECTS 16
typedef struct {
  int executable; /* executables are numbered from 0; handle = number + 1 */
  uint64_t base, size;
  int64_t delta;
  char uri[512];
} code_object_t;
static code_object_t code_objects[MAX_CODE_OBJECTS];
static int n_code_objects;

/* Replaces the loaded code objects: one per line, "executable base size delta uri" (base and
 * size hexadecimal, delta decimal, the URI the rest of the line). 0, or -1 for a bad line. */
int hsa_standin_set_code_objects(const char *spec) {
  pthread_mutex_lock(&mu);
  int n = 0, result = 0;
  for (const char *line = spec; line && *line && result == 0;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    code_object_t *object = &code_objects[n];
    int uri_at = 0;
    if (n == MAX_CODE_OBJECTS ||
        sscanf(line, "%d %" SCNx64 " %" SCNx64 " %" SCNd64 " %n", &object->executable, &object->base,
               &object->size, &object->delta, &uri_at) != 4 ||
        uri_at == 0 || (size_t)uri_at >= len || len - uri_at >= sizeof object->uri || object->executable < 0) {
      result = -1;
      break;
    }
    memcpy(object->uri, line + uri_at, len - uri_at);
    object->uri[len - uri_at] = '\0';
    n++;
    line = end ? end + 1 : line + len;
  }
  if (result == 0) n_code_objects = n;
  log_line("hsa_standin_set_code_objects %d objects -> %d", n, result);
  pthread_mutex_unlock(&mu);
  return result;
}

static hsa_status_t loader_iterate_executables(hsa_status_t (*callback)(hsa_executable_t, void *), void *data) {
  pthread_mutex_lock(&mu);
  int count = n_code_objects, numbers[MAX_CODE_OBJECTS], n = 0;
  for (int i = 0; i < count; i++) {
    bool seen = false;
    for (int j = 0; j < n; j++) seen = seen || numbers[j] == code_objects[i].executable;
    if (!seen) numbers[n++] = code_objects[i].executable;
  }
  bool ready = refs > 0;
  log_line("hsa_ven_amd_loader_iterate_executables %d executables -> %s", n, ready ? "0x0" : "0x100b");
  pthread_mutex_unlock(&mu);
  if (!ready) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (!callback) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (int j = 0; j < n; j++) { /* called without the lock, as ROCr does */
    hsa_status_t status = callback((hsa_executable_t){(uint64_t)numbers[j] + 1}, data);
    if (status != OK) return status;
  }
  return OK;
}

static hsa_status_t loader_iterate_code_objects(hsa_executable_t executable,
                                                hsa_status_t (*callback)(hsa_executable_t, hsa_loaded_code_object_t,
                                                                         void *),
                                                void *data) {
  if (!callback) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  int count = n_code_objects;
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < count; i++) {
    if ((uint64_t)code_objects[i].executable + 1 != executable.handle) continue;
    hsa_status_t status = callback(executable, (hsa_loaded_code_object_t){(uint64_t)i + 1}, data);
    if (status != OK) return status;
  }
  return OK;
}

static hsa_status_t loader_code_object_get_info(hsa_loaded_code_object_t code_object,
                                                hsa_ven_amd_loader_loaded_code_object_info_t attribute, void *value) {
  pthread_mutex_lock(&mu);
  hsa_status_t status = OK;
  uint64_t index = code_object.handle - 1;
  if (index >= (uint64_t)n_code_objects || !value) {
    status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  } else {
    const code_object_t *object = &code_objects[index];
    switch ((int)attribute) {
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_DELTA: *(int64_t *)value = object->delta; break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE: *(uint64_t *)value = object->base; break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_SIZE: *(uint64_t *)value = object->size; break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI_LENGTH: *(uint32_t *)value = (uint32_t)strlen(object->uri); break;
    case HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI: /* no NUL, as ROCr */
      memcpy(value, object->uri, strlen(object->uri));
      break;
    default: status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
  }
  log_line("hsa_ven_amd_loader_loaded_code_object_get_info object=%" PRIu64 " attribute=%d -> 0x%x", code_object.handle,
           (int)attribute, (unsigned)status);
  pthread_mutex_unlock(&mu);
  return status;
}

hsa_status_t hsa_system_get_major_extension_table(uint16_t extension, uint16_t version_major, size_t table_length,
                                                  void *table) {
  hsa_ven_amd_loader_1_03_pfn_t loader;
  memset(&loader, 0, sizeof loader);
  loader.hsa_ven_amd_loader_iterate_executables = loader_iterate_executables;
  loader.hsa_ven_amd_loader_executable_iterate_loaded_code_objects = loader_iterate_code_objects;
  loader.hsa_ven_amd_loader_loaded_code_object_get_info = loader_code_object_get_info;
  pthread_mutex_lock(&mu);
  hsa_status_t status = OK;
  if (refs == 0) {
    status = HSA_STATUS_ERROR_NOT_INITIALIZED;
  } else if (extension != HSA_EXTENSION_AMD_LOADER || version_major != 1 || !table) {
    status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  } else {
    memcpy(table, &loader, table_length < sizeof loader ? table_length : sizeof loader);
  }
  log_line("hsa_system_get_major_extension_table extension=0x%x version=%u length=%zu -> 0x%x", (unsigned)extension,
           (unsigned)version_major, table_length, (unsigned)status);
  pthread_mutex_unlock(&mu);
  return status;
}

static size_t copy_out(char *buf, size_t len, const char *text, size_t n) {
  if (buf && len) memcpy(buf, text, n < len ? n : len - 1), buf[n < len ? n : len - 1] = '\0';
  return n;
}

/* Copies the log (NUL-terminated, cut to `len`) into `buf`; returns its whole length. */
size_t hsa_standin_log(char *buf, size_t len) {
  pthread_mutex_lock(&mu);
  size_t n = copy_out(buf, len, log_text ? log_text : "", log_len);
  pthread_mutex_unlock(&mu);
  return n;
}

/* The live blocks ("alloc ptr=0x... size=N pool=cpu0.fine granted=gpu0,gpu1") and signals
 * ("signal handle=0x... value=N"), a line each; returned as hsa_standin_log returns the log. */
size_t hsa_standin_state(char *buf, size_t len) {
  pthread_mutex_lock(&mu);
  size_t cap = 256 * (n_allocs + n_signals + 1), n = 0;
  char *text = calloc(cap, 1), names[256];
  for (size_t i = 0; text && i < n_allocs; i++) {
    agent_names(names, sizeof names, allocs[i].granted);
    n += (size_t)snprintf(text + n, cap - n, "alloc ptr=%p size=%zu pool=%s granted=%s\n", allocs[i].ptr,
                          allocs[i].size, pools[allocs[i].pool].name, names); /* < 256 bytes */
  }
  for (size_t i = 0; text && i < n_signals; i++)
    if (signals[i]->live)
      n += (size_t)snprintf(text + n, cap - n, "signal handle=%p value=%" PRId64 "\n", (void *)&signals[i]->amd,
                            __atomic_load_n(&signals[i]->amd.value, __ATOMIC_RELAXED));
  n = copy_out(buf, len, text ? text : "", n);
  free(text);
  pthread_mutex_unlock(&mu);
  return n;
}

/* A counter: "init_refs", "signals" (live), "signals_created", "allocations" (live),
 * "allocations:<pool>", "errors", "injected", "calls:<function>"; -1 for an unknown name. */
int64_t hsa_standin_count(const char *what) {
  pthread_mutex_lock(&mu);
  int64_t n = -1;
  if (!strcmp(what, "init_refs")) n = refs;
  else if (!strcmp(what, "signals")) n = live_signals;
  else if (!strcmp(what, "signals_created")) n = (int64_t)n_signals;
  else if (!strcmp(what, "allocations")) n = (int64_t)n_allocs;
  else if (!strcmp(what, "errors")) n = errors;
  else if (!strcmp(what, "injected")) n = injected;
  for (int p = 0; !strncmp(what, "allocations:", 12) && p < n_pools; p++)
    if (!strcmp(pools[p].name, what + 12))
      for (size_t i = n = 0; i < n_allocs; i++) n += allocs[i].pool == p;
  for (int f = 0; !strncmp(what, "calls:", 6) && f < F_COUNT; f++)
    if (!strcmp(NAMES[f], what + 6)) n = (int64_t)__atomic_load_n(&calls[f], __ATOMIC_RELAXED);
  pthread_mutex_unlock(&mu);
  return n;
}
