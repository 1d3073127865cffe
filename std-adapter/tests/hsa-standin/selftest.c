/*
 * selftest.c: the HSA stand-in checked from C against the HSA contract it claims to follow
 * (statuses, topology, pools, links, memory, signals, failure injection, the log). Built and run
 * by tests/hsa_standin.rs: cc -std=c11 -pthread selftest.c (it includes the stand-in itself).
 */
#include "hsa_standin.c"

#define CHECK(cond) \
  do { \
    if (!(cond)) fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond), exit(1); \
  } while (0)
#define EXPECT(call, status) CHECK((call) == (status))

typedef struct { uint64_t handles[16]; int n; } handles_t;
static hsa_status_t collect_agent(hsa_agent_t agent, void *data) {
  handles_t *h = data;
  h->handles[h->n++] = agent.handle;
  return HSA_STATUS_SUCCESS;
}
static hsa_status_t collect_pool(hsa_amd_memory_pool_t pool, void *data) {
  handles_t *h = data;
  h->handles[h->n++] = pool.handle;
  return HSA_STATUS_SUCCESS;
}
static hsa_status_t stop_at_first(hsa_agent_t agent, void *data) {
  (void)agent, (void)data;
  return HSA_STATUS_INFO_BREAK;
}
static handles_t pools_of(uint64_t agent) {
  handles_t h = {{0}, 0};
  EXPECT(hsa_amd_agent_iterate_memory_pools((hsa_agent_t){agent}, collect_pool, &h), HSA_STATUS_SUCCESS);
  return h;
}
static uint64_t now_ms(void) { return now_ns() / 1000000; }

/* What a device does: a release add of 1 at handle + 8, after 20 ms, without calling the runtime. */
static void *device_ring(void *handle) {
  nanosleep(&(struct timespec){0, 20000000}, NULL);
  __atomic_fetch_add((int64_t *)((char *)handle + 8), 1, __ATOMIC_RELEASE);
  return NULL;
}
static void *destroy_later(void *handle) {
  nanosleep(&(struct timespec){0, 20000000}, NULL);
  EXPECT(hsa_signal_destroy((hsa_signal_t){(uint64_t)(uintptr_t)handle}), HSA_STATUS_SUCCESS);
  return NULL;
}

int main(void) {
  const char *text = NULL;
  hsa_signal_t s, t;
  EXPECT(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
  EXPECT(hsa_signal_create(1, 0, NULL, &s), HSA_STATUS_ERROR_NOT_INITIALIZED);
  EXPECT(hsa_status_string(HSA_STATUS_ERROR_OUT_OF_RESOURCES, &text), HSA_STATUS_SUCCESS);
  CHECK(strstr(text, "resources"));
  EXPECT(hsa_status_string((hsa_status_t)0x4242, &text), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  /* Configuration: refused while it does not parse, and while initialised. */
  CHECK(hsa_standin_configure("cpus=9", NULL) == -1);
  CHECK(hsa_standin_configure("colour=blue", NULL) == -1);
  CHECK(hsa_standin_configure(NULL, "hsa_no_such_function:1") == -1);
  CHECK(hsa_standin_configure("cpus=2;gpus=2;gpu_numa=1,0",
                              "hsa_amd_memory_pool_allocate:2,hsa_signal_create:3+") == 0);
  EXPECT(hsa_init(), HSA_STATUS_SUCCESS);
  EXPECT(hsa_init(), HSA_STATUS_SUCCESS);
  CHECK(hsa_standin_count("init_refs") == 2);
  CHECK(hsa_standin_configure(NULL, NULL) == -1);

  uint64_t frequency = 0, max_wait = 0;
  EXPECT(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &frequency), HSA_STATUS_SUCCESS);
  EXPECT(hsa_system_get_info(HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT, &max_wait), HSA_STATUS_SUCCESS);
  CHECK(frequency == 100000000 && max_wait == UINT64_MAX);
  EXPECT(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  EXPECT(hsa_system_get_info((hsa_system_info_t)0x999, &frequency), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  /* Agents: CPUs first; GPU 0 on NUMA node 1. */
  handles_t all = {{0}, 0};
  EXPECT(hsa_iterate_agents(collect_agent, &all), HSA_STATUS_SUCCESS);
  CHECK(all.n == 4);
  EXPECT(hsa_iterate_agents(stop_at_first, NULL), HSA_STATUS_INFO_BREAK);
  EXPECT(hsa_iterate_agents(NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  uint64_t cpu0 = all.handles[0], cpu1 = all.handles[1], gpu0 = all.handles[2], gpu1 = all.handles[3];
  char name[64];
  hsa_device_type_t type;
  hsa_agent_t nearest;
  EXPECT(hsa_agent_get_info((hsa_agent_t){gpu0}, HSA_AGENT_INFO_NAME, name), HSA_STATUS_SUCCESS);
  EXPECT(hsa_agent_get_info((hsa_agent_t){gpu0}, HSA_AGENT_INFO_DEVICE, &type), HSA_STATUS_SUCCESS);
  CHECK(!strcmp(name, "gpu0") && type == HSA_DEVICE_TYPE_GPU);
  EXPECT(hsa_agent_get_info((hsa_agent_t){cpu1}, HSA_AGENT_INFO_DEVICE, &type), HSA_STATUS_SUCCESS);
  CHECK(type == HSA_DEVICE_TYPE_CPU);
  EXPECT(hsa_agent_get_info((hsa_agent_t){gpu0}, (hsa_agent_info_t)NEAREST_CPU, &nearest), HSA_STATUS_SUCCESS);
  CHECK(nearest.handle == cpu1);
  EXPECT(hsa_agent_get_info((hsa_agent_t){gpu1}, (hsa_agent_info_t)NEAREST_CPU, &nearest), HSA_STATUS_SUCCESS);
  CHECK(nearest.handle == cpu0);
  EXPECT(hsa_agent_get_info((hsa_agent_t){42}, HSA_AGENT_INFO_NAME, name), HSA_STATUS_ERROR_INVALID_AGENT);

  /* Pools and links. */
  handles_t cpu_pools = pools_of(cpu0), gpu_pools = pools_of(gpu0), cpu1_pools = pools_of(cpu1);
  CHECK(cpu_pools.n == 3 && gpu_pools.n == 2);
  hsa_amd_memory_pool_t fine = {cpu_pools.handles[0]}, kernarg = {cpu_pools.handles[1]};
  hsa_amd_memory_pool_t device = {gpu_pools.handles[0]}, group = {gpu_pools.handles[1]};
  uint32_t flags = 0, hops = 0;
  size_t granule = 0;
  bool allowed = true;
  hsa_amd_segment_t segment;
  EXPECT(hsa_amd_memory_pool_get_info(fine, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags), HSA_STATUS_SUCCESS);
  CHECK(flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED);
  EXPECT(hsa_amd_memory_pool_get_info(kernarg, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags), HSA_STATUS_SUCCESS);
  CHECK(flags == (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT));
  EXPECT(hsa_amd_memory_pool_get_info(device, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT, &granule),
         HSA_STATUS_SUCCESS);
  CHECK(granule == 4096);
  EXPECT(hsa_amd_memory_pool_get_info(group, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment), HSA_STATUS_SUCCESS);
  EXPECT(hsa_amd_memory_pool_get_info(group, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &allowed),
         HSA_STATUS_SUCCESS);
  CHECK(segment == HSA_AMD_SEGMENT_GROUP && !allowed);
  EXPECT(hsa_amd_memory_pool_get_info((hsa_amd_memory_pool_t){7}, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment),
         (hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  hsa_amd_memory_pool_access_t access;
  hsa_amd_memory_pool_link_info_t links[2];
  EXPECT(hsa_amd_agent_memory_pool_get_info((hsa_agent_t){gpu0}, fine, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access),
         HSA_STATUS_SUCCESS);
  CHECK(access == HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT);
  EXPECT(hsa_amd_agent_memory_pool_get_info((hsa_agent_t){gpu0}, fine, HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS,
                                            &hops), HSA_STATUS_SUCCESS);
  EXPECT(hsa_amd_agent_memory_pool_get_info((hsa_agent_t){gpu0}, fine, HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO,
                                            links), HSA_STATUS_SUCCESS);
  CHECK(hops == 2 && links[0].link_type == HSA_AMD_LINK_INFO_TYPE_PCIE && links[0].atomic_support_64bit);
  CHECK(links[0].numa_distance + links[1].numa_distance == 32); /* cpu0 is the far node of gpu0 */
  EXPECT(hsa_amd_agent_memory_pool_get_info((hsa_agent_t){gpu0}, (hsa_amd_memory_pool_t){cpu1_pools.handles[0]},
                                            HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS, &hops), HSA_STATUS_SUCCESS);
  CHECK(hops == 1);
  EXPECT(hsa_amd_agent_memory_pool_get_info((hsa_agent_t){gpu1}, group, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
                                            &access), HSA_STATUS_SUCCESS);
  CHECK(access == HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED);

  /* Memory: the 2nd allocation is injected to fail. */
  void *p = NULL, *q = NULL;
  EXPECT(hsa_amd_memory_pool_allocate(fine, 100, 0, &p), HSA_STATUS_SUCCESS);
  CHECK((uintptr_t)p % 4096 == 0 && ((unsigned char *)p)[4095] == 0xA5);
  EXPECT(hsa_amd_memory_pool_allocate(fine, 100, 0, &q), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK(hsa_standin_count("injected") == 1);
  EXPECT(hsa_amd_memory_pool_allocate(fine, 0, 0, &q), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  EXPECT(hsa_amd_memory_pool_allocate(group, 64, 0, &q), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  EXPECT(hsa_amd_memory_pool_allocate((hsa_amd_memory_pool_t){7}, 64, 0, &q),
         (hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  EXPECT(hsa_amd_memory_pool_allocate(device, 8192, 0, &q), HSA_STATUS_SUCCESS);
  CHECK(hsa_standin_count("allocations:cpu0.fine") == 1 && hsa_standin_count("allocations:gpu0.coarse") == 1);
  hsa_agent_t gpus[2] = {{gpu0}, {gpu1}}, bogus[1] = {{42}};
  EXPECT(hsa_amd_agents_allow_access(2, gpus, NULL, p), HSA_STATUS_SUCCESS);
  EXPECT(hsa_amd_agents_allow_access(2, gpus, &flags, p), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  EXPECT(hsa_amd_agents_allow_access(0, gpus, NULL, p), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  EXPECT(hsa_amd_agents_allow_access(1, bogus, NULL, p), HSA_STATUS_ERROR_INVALID_AGENT);
  EXPECT(hsa_amd_agents_allow_access(1, gpus, NULL, (char *)p + 8), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  char state[4096];
  hsa_standin_state(state, sizeof state);
  CHECK(strstr(state, "pool=cpu0.fine granted=gpu0,gpu1\n") && strstr(state, "pool=gpu0.coarse granted=\n"));
  EXPECT(hsa_amd_memory_fill(p, 0x11223344, 25), HSA_STATUS_SUCCESS);
  CHECK(((uint32_t *)p)[24] == 0x11223344 && ((unsigned char *)p)[100] == 0xA5);
  EXPECT(hsa_amd_memory_fill((char *)p + 2, 0, 1), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  EXPECT(hsa_amd_memory_fill(p, 0, 1025), HSA_STATUS_ERROR_INVALID_ARGUMENT); /* past the 4096 bytes */
  EXPECT(hsa_amd_memory_pool_free(p), HSA_STATUS_SUCCESS);
  EXPECT(hsa_amd_memory_pool_free(p), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  EXPECT(hsa_amd_memory_pool_free(NULL), HSA_STATUS_SUCCESS);

  /* Signals: the layout, the operations, every condition, timeouts, a device's raw add. */
  EXPECT(hsa_signal_create(5, 0, NULL, &s), HSA_STATUS_SUCCESS);
  amd_signal_layout_t *amd = (amd_signal_layout_t *)(uintptr_t)s.handle;
  CHECK(s.handle % 64 == 0 && amd->kind == 1 && amd->value == 5 && amd->event_mailbox_ptr == 0);
  hsa_signal_add_screlease(s, 3);
  hsa_signal_subtract_relaxed(s, 2);
  CHECK(hsa_signal_load_scacquire(s) == 6);
  hsa_signal_add_relaxed(s, 10);
  hsa_signal_subtract_screlease(s, 6);
  CHECK(hsa_signal_load_relaxed(s) == 10);
  hsa_signal_store_relaxed(s, 7);
  hsa_signal_store_screlease(s, 10);
  uint64_t ms = 100000; /* ticks */
  EXPECT(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 10, 0, HSA_WAIT_STATE_BLOCKED), 10);
  EXPECT(hsa_signal_wait_relaxed(s, HSA_SIGNAL_CONDITION_LT, 11, 0, HSA_WAIT_STATE_BLOCKED), 10);
  EXPECT(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_GTE, 10, 0, HSA_WAIT_STATE_ACTIVE), 10);
  uint64_t start = now_ms();
  EXPECT(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_NE, 10, 30 * ms, HSA_WAIT_STATE_BLOCKED), 10);
  CHECK(now_ms() - start >= 30 && now_ms() - start < 1000);
  start = now_ms();
  EXPECT(hsa_signal_wait_relaxed(s, HSA_SIGNAL_CONDITION_GTE, 11, 10 * ms, HSA_WAIT_STATE_ACTIVE), 10);
  CHECK(now_ms() - start >= 10 && now_ms() - start < 1000);
  pthread_t thread;
  pthread_create(&thread, NULL, device_ring, (void *)(uintptr_t)s.handle);
  start = now_ms();
  EXPECT(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_NE, 10, 10000 * ms, HSA_WAIT_STATE_BLOCKED), 11);
  CHECK(now_ms() - start < 1000);
  pthread_join(thread, NULL);

  /* Failure injection from the 3rd creation on; destroy, twice; use after destroy. */
  EXPECT(hsa_signal_create(0, 1, gpus, &t), HSA_STATUS_SUCCESS);
  EXPECT(hsa_signal_create(0, 0, NULL, &t), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  EXPECT(hsa_signal_create(0, 0, NULL, &t), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK(hsa_standin_count("signals") == 2 && hsa_standin_count("injected") == 3);
  pthread_create(&thread, NULL, destroy_later, (void *)(uintptr_t)s.handle); /* wakes the waiter */
  EXPECT(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 99, UINT64_MAX, HSA_WAIT_STATE_BLOCKED), 11);
  pthread_join(thread, NULL);
  EXPECT(hsa_signal_destroy(s), HSA_STATUS_ERROR_INVALID_SIGNAL);
  EXPECT(hsa_signal_destroy((hsa_signal_t){0}), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  int64_t errors_before = hsa_standin_count("errors");
  CHECK(hsa_signal_load_scacquire(s) == 0 && hsa_standin_count("errors") == errors_before + 1);
  CHECK(hsa_standin_count("calls:hsa_signal_wait_scacquire") == 5);

  /* Shutting down: the last reference reports what is still live. */
  EXPECT(hsa_shut_down(), HSA_STATUS_SUCCESS);
  EXPECT(hsa_shut_down(), HSA_STATUS_SUCCESS);
  EXPECT(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
  static char log[1 << 16];
  CHECK(hsa_standin_log(log, sizeof log) < sizeof log);
  CHECK(strstr(log, "hsa_amd_memory_pool_allocate pool=cpu0.fine size=100 flags=0 ptr="));
  CHECK(strstr(log, "-> ERROR_OUT_OF_RESOURCES (injected)"));
  CHECK(strstr(log, "hsa_signal_load_scacquire signal=") && strstr(log, "not a live signal"));
  CHECK(strstr(log, "LEAK at the last hsa_shut_down: 1 allocations, 1 signals live"));
  printf("hsa-standin selftest: ok\n");
  return 0;
}
