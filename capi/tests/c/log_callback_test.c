/*
 * The log callback as a C host uses it (capi/tests/c_program.rs runs each mode in a process of its
 * own, as the logger is set up once a process). Prints "log_callback_test: ok". Every mode ends
 * within its alarm: a deadlock kills the program (SIGALRM) instead of hanging the test.
 *
 *   setup   a callback at INFO calls hostcall_get_stats while the first call (hostcall_get_stats)
 *           sets the runtime up (its backend line): it must not wait for that set-up;
 *   enable  a callback at INFO disables the buffer whose "serving buffer" line it gets: it runs
 *           after the enable released its locks, so the disable succeeds;
 *   inside  hostcall_set_log_callback from inside the callback is refused (nothing changed);
 *   swap    one thread's calls log at TRACE (a C service's line per lane) while the main thread
 *           swaps callbacks and marks each replaced context dead as soon as the swap returns: no
 *           callback may run with a dead context;
 *   nested  a callback at TRACE makes an emulated call (whose service's line the listener thread
 *           delivers) while the main thread swaps callbacks: the swap waits for the callback, the
 *           listener's delivery must not wait for the swap;
 *   levels  the DEBUG lines of enable, disable and the backend's probing, the TRACE line of a C
 *           service's call;
 *   listener a callback at WARN reads the statistics from the listener thread, on the warning of
 *           a DEVMEM refusal logged while the packet is served;
 *   reason  a C service names why it refused (hostcall_count_reason): counted by that reason.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "hostcall.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PACKETS 4u
#define SERVICE 200u

static void *buffer;
static int queue;

static void enable_buffer(void) {
    size_t size = hostcall_buffer_size(PACKETS);
    buffer = aligned_alloc(64, (size + 63) / 64 * 64);
    CHECK(buffer != NULL);
    CHECK(hostcall_enable(buffer, PACKETS, &queue) == HOSTCALL_OK);
}

/* Answers every lane with its first word plus one; refuses a lane whose first word is 0. With a
 * context, takes a millisecond first. */
static int add_one(const uint64_t request[8], uint64_t reply[2], void *ctx) {
    if (ctx != NULL) {
        struct timespec millisecond = {0, 1000000};
        nanosleep(&millisecond, NULL);
    }
    if (request[0] == 0) {
        CHECK(hostcall_count_reason(HOSTCALL_REASON_BAD_REQUEST) == HOSTCALL_OK);
        return HOSTCALL_ERROR_BAD_REQUEST;
    }
    reply[0] = request[0] + 1;
    reply[1] = 0;
    return 0;
}

static int call_service(uint64_t activemask, uint64_t first_word) {
    uint64_t requests[4][8] = {{first_word}, {first_word}, {first_word}, {first_word}};
    uint64_t replies[4][2];
    return hostcall_emulated_call(buffer, PACKETS, SERVICE, activemask, (const uint64_t(*)[8])requests,
                                  replies);
}

/* ---- setup ---- */
static atomic_int stats_from_callback = 0;
static void get_stats_on_log(int level, const char *target, const char *message, void *user) {
    (void)level, (void)target, (void)message, (void)user;
    hostcall_stats_t stats;
    stats.size = sizeof stats;
    if (hostcall_get_stats(&stats) == HOSTCALL_OK) atomic_fetch_add(&stats_from_callback, 1);
}

/* ---- enable ---- */
static atomic_int disabled_from_callback = -1;
static void disable_on_serving(int level, const char *target, const char *message, void *user) {
    (void)level, (void)target, (void)user;
    if (strstr(message, "serving buffer") != NULL && strstr(message, "no longer") == NULL)
        atomic_store(&disabled_from_callback, hostcall_disable(buffer, &queue));
}

/* ---- inside ---- */
static atomic_int set_from_callback = -1;
static void set_on_log(int level, const char *target, const char *message, void *user) {
    (void)level, (void)target, (void)message, (void)user;
    if (atomic_load(&set_from_callback) == -1)
        atomic_store(&set_from_callback, hostcall_set_log_callback(NULL, HOSTCALL_LOG_WARN, NULL));
}

/* ---- swap ---- */
struct context {
    atomic_int alive;
};
#define CONTEXTS 500
static struct context contexts[CONTEXTS];
static atomic_int dead_seen = 0;
static atomic_long lines_seen = 0, lines_started = 0;
static atomic_int stop_calling = 0;
static void check_alive(int level, const char *target, const char *message, void *user) {
    (void)level, (void)target, (void)message;
    struct context *context = user;
    if (!atomic_load(&context->alive)) atomic_fetch_add(&dead_seen, 1);
    atomic_fetch_add(&lines_started, 1);
    for (volatile int spin = 0; spin < 20000; spin++) {
    }
    if (!atomic_load(&context->alive)) atomic_fetch_add(&dead_seen, 1);
    atomic_fetch_add(&lines_seen, 1);
}
static void *keep_calling(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_calling)) CHECK(call_service(0xf, 1) == HOSTCALL_OK);
    return NULL;
}

/* ---- nested ---- */
static atomic_int nested_started = 0, nested_calls = 0, nested_failures = 0;
static _Thread_local int skip_next = 0;
static void call_from_callback(int level, const char *target, const char *message, void *user) {
    (void)level, (void)target, (void)user;
    if (strstr(message, "emulated call answered") == NULL) return;
    if (skip_next) { /* the nested call's own line, delivered after this callback returned */
        skip_next = 0;
        return;
    }
    skip_next = 1;
    atomic_fetch_add(&nested_started, 1);
    if (call_service(0x1, 1) != HOSTCALL_OK) atomic_fetch_add(&nested_failures, 1);
    atomic_fetch_add(&nested_calls, 1);
}

/* ---- levels ---- */
static atomic_int debug_enabled = 0, debug_disabled = 0, debug_probing = 0, trace_service = 0;
static void count_levels(int level, const char *target, const char *message, void *user) {
    (void)target, (void)user;
    if (level == HOSTCALL_LOG_DEBUG && strstr(message, "enabled buffer") != NULL) debug_enabled++;
    if (level == HOSTCALL_LOG_DEBUG && strstr(message, "disabled buffer") != NULL) debug_disabled++;
    if (level == HOSTCALL_LOG_DEBUG && strstr(message, "probing") != NULL) debug_probing++;
    if (level == HOSTCALL_LOG_TRACE && strstr(message, "c-service-200") != NULL) trace_service++;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    alarm(20);
    if (strcmp(mode, "setup") == 0) {
        CHECK(hostcall_set_log_callback(get_stats_on_log, HOSTCALL_LOG_INFO, NULL) == HOSTCALL_OK);
        hostcall_stats_t stats;
        stats.size = sizeof stats;
        CHECK(hostcall_get_stats(&stats) == HOSTCALL_OK); /* the first use sets the runtime up */
        enable_buffer();
        CHECK(atomic_load(&stats_from_callback) >= 1);
        CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_OK);
    } else if (strcmp(mode, "enable") == 0) {
        CHECK(hostcall_memory_reason() != NULL); /* the set-up, before the callback */
        CHECK(hostcall_set_log_callback(disable_on_serving, HOSTCALL_LOG_INFO, NULL) == HOSTCALL_OK);
        enable_buffer();
        CHECK(atomic_load(&disabled_from_callback) == HOSTCALL_OK);
        CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_ERR_NOT_ENABLED);
    } else if (strcmp(mode, "inside") == 0) {
        CHECK(hostcall_set_log_callback(set_on_log, HOSTCALL_LOG_INFO, NULL) == HOSTCALL_OK);
        enable_buffer();
        CHECK(atomic_load(&set_from_callback) == HOSTCALL_ERR_IN_LOG_CALLBACK);
        CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_OK);
        /* The callback is still the one set: it was not replaced from inside. */
        atomic_store(&set_from_callback, -1);
        enable_buffer();
        CHECK(atomic_load(&set_from_callback) == HOSTCALL_ERR_IN_LOG_CALLBACK);
    } else if (strcmp(mode, "swap") == 0) {
        enable_buffer();
        CHECK(hostcall_register_service(SERVICE, add_one, NULL) == HOSTCALL_OK);
        atomic_store(&contexts[0].alive, 1);
        CHECK(hostcall_set_log_callback(check_alive, HOSTCALL_LOG_TRACE, &contexts[0]) == HOSTCALL_OK);
        pthread_t caller;
        CHECK(pthread_create(&caller, NULL, keep_calling, NULL) == 0);
        for (int i = 1; i < CONTEXTS; i++) {
            atomic_store(&contexts[i].alive, 1);
            /* Swap while a line is being delivered: every swap races with a delivery. */
            long started = atomic_load(&lines_started);
            while (atomic_load(&lines_started) == started) sched_yield();
            CHECK(hostcall_set_log_callback(check_alive, HOSTCALL_LOG_TRACE, &contexts[i]) == HOSTCALL_OK);
            atomic_store(&contexts[i - 1].alive, 0); /* as if freed */
        }
        atomic_store(&stop_calling, 1);
        CHECK(pthread_join(caller, NULL) == 0);
        CHECK(hostcall_set_log_callback(NULL, HOSTCALL_LOG_WARN, NULL) == HOSTCALL_OK);
        printf("lines seen: %ld, with a dead context: %d\n", atomic_load(&lines_seen), atomic_load(&dead_seen));
        CHECK(atomic_load(&lines_seen) > 0);
        CHECK(atomic_load(&dead_seen) == 0);
        CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_OK);
    } else if (strcmp(mode, "nested") == 0) {
        enable_buffer();
        CHECK(hostcall_register_service(SERVICE, add_one, &nested_calls) == HOSTCALL_OK); /* slow */
        CHECK(hostcall_set_log_callback(call_from_callback, HOSTCALL_LOG_TRACE, NULL) == HOSTCALL_OK);
        pthread_t caller;
        CHECK(pthread_create(&caller, NULL, keep_calling, NULL) == 0);
        for (int i = 0; i < 50; i++) {
            /* Swap while a callback's call is being served. */
            int started = atomic_load(&nested_started);
            while (atomic_load(&nested_started) == started) sched_yield();
            CHECK(hostcall_set_log_callback(call_from_callback, HOSTCALL_LOG_TRACE, NULL) == HOSTCALL_OK);
        }
        atomic_store(&stop_calling, 1);
        CHECK(pthread_join(caller, NULL) == 0);
        CHECK(atomic_load(&nested_failures) == 0);
        CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_OK);
    } else if (strcmp(mode, "levels") == 0) {
        CHECK(hostcall_set_log_callback(count_levels, HOSTCALL_LOG_TRACE, NULL) == HOSTCALL_OK);
        enable_buffer();
        CHECK(hostcall_register_service(SERVICE, add_one, NULL) == HOSTCALL_OK);
        CHECK(call_service(0x3, 1) == HOSTCALL_OK);
        CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_OK);
        CHECK(debug_probing == 1 && debug_enabled == 1 && debug_disabled == 1);
        CHECK(trace_service == 2); /* one a lane */
        /* At INFO no DEBUG or TRACE line reaches the callback. */
        CHECK(hostcall_set_log_callback(count_levels, HOSTCALL_LOG_INFO, NULL) == HOSTCALL_OK);
        enable_buffer();
        CHECK(call_service(0x3, 1) == HOSTCALL_OK);
        CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_OK);
        CHECK(debug_enabled == 1 && trace_service == 2);
    } else if (strcmp(mode, "listener") == 0) {
        enable_buffer();
        CHECK(hostcall_set_log_callback(get_stats_on_log, HOSTCALL_LOG_WARN, NULL) == HOSTCALL_OK);
        uint64_t requests[1][8] = {{0}}; /* a DEVMEM allocation of 0 bytes: refused, with a warning */
        uint64_t replies[1][2];
        CHECK(hostcall_emulated_call(buffer, PACKETS, HOSTCALL_SERVICE_DEVMEM, 0x1,
                                     (const uint64_t(*)[8])requests, replies) == HOSTCALL_OK);
        CHECK(atomic_load(&stats_from_callback) >= 1);
        CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_OK);
    } else if (strcmp(mode, "reason") == 0) {
        enable_buffer();
        CHECK(hostcall_register_service(SERVICE, add_one, NULL) == HOSTCALL_OK);
        CHECK(call_service(0xf, 0) == HOSTCALL_OK); /* four lanes refused */
        hostcall_stats_t stats;
        stats.size = sizeof stats;
        CHECK(hostcall_get_stats(&stats) == HOSTCALL_OK);
        CHECK(stats.refusals[HOSTCALL_REASON_BAD_REQUEST] == 4);
        hostcall_buffer_stats_t of_buffer;
        of_buffer.size = sizeof of_buffer;
        CHECK(hostcall_get_buffer_stats(buffer, &of_buffer) == HOSTCALL_OK);
        CHECK(of_buffer.refusals[HOSTCALL_REASON_BAD_REQUEST] == 4);
        CHECK(hostcall_count_reason(HOSTCALL_REASON_BAD_REQUEST) == HOSTCALL_OK); /* outside: nothing */
        CHECK(hostcall_count_reason(HOSTCALL_REASON_SLOTS) == HOSTCALL_ERR_UNKNOWN_REASON);
        CHECK(hostcall_get_stats(&stats) == HOSTCALL_OK);
        CHECK(stats.refusals[HOSTCALL_REASON_BAD_REQUEST] == 4);
        CHECK(hostcall_unregister_service(SERVICE) == HOSTCALL_OK);
        CHECK(hostcall_unregister_service(SERVICE) == HOSTCALL_ERR_NOT_REGISTERED);
        CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_OK);
    } else {
        fprintf(stderr, "usage: log_callback_test setup|enable|inside|swap|nested|levels|listener|reason\n");
        return 2;
    }
    if (failures != 0) return 1;
    printf("log_callback_test: ok\n");
    return 0;
}
