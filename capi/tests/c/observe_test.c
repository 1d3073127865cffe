/*
 * What a C host sees of the library (capi/tests/c_program.rs builds and runs it): a log callback
 * receives the warning of a DEVMEM budget refusal, the statistics structs count it by its reason
 * (for the listener and for the buffer), hostcall_status_string names codes, and
 * hostcall_last_error() is cleared by the next call that succeeds. Prints "observe_test: ok".
 */
#include "hostcall.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PACKETS 4u


/* What the callback saw (only the listener thread calls it while a call is in flight; the main
 * thread reads after the call returned, ordered by the reply). */
static int warnings = 0;
static int devmem_warnings = 0;
static int user_ok = 1;

static void on_log(int level, const char *target, const char *message, void *user) {
    if (user != &warnings) user_ok = 0;
    if (level == HOSTCALL_LOG_WARN) {
        warnings++;
        if (strstr(message, "devmem") != NULL || strstr(target, "devmem") != NULL) devmem_warnings++;
    }
}

int main(void) {
    CHECK(hostcall_set_log_callback(on_log, HOSTCALL_LOG_WARN, &warnings) == HOSTCALL_OK);
    CHECK(strcmp(hostcall_last_error(), "") == 0);

    /* Status strings. */
    CHECK(strcmp(hostcall_status_string(HOSTCALL_OK), "success") == 0);
    CHECK(strstr(hostcall_status_string(HOSTCALL_ERR_NULL), "null") != NULL);
    CHECK(strcmp(hostcall_status_string(12345), "unknown status code") == 0);

    size_t size = hostcall_buffer_size(PACKETS);
    void *buffer = aligned_alloc(64, (size + 63) / 64 * 64);
    int queue;
    CHECK(buffer != NULL);
    /* A NULL queue is refused; the failure is the last error... */
    CHECK(hostcall_enable(buffer, PACKETS, NULL) == HOSTCALL_ERR_NULL);
    CHECK(strstr(hostcall_last_error(), "queue") != NULL);
    /* ... until the next call that succeeds. */
    CHECK(hostcall_enable(buffer, PACKETS, &queue) == HOSTCALL_OK);
    CHECK(strcmp(hostcall_last_error(), "") == 0);

    /* A DEVMEM allocation of 0 bytes on two lanes: refused (size budget), a null address each. */
    uint64_t requests[2][8] = {{0, 0}, {0, 0}};
    uint64_t replies[2][2];
    CHECK(hostcall_emulated_call(buffer, PACKETS, HOSTCALL_SERVICE_DEVMEM, 0x3,
                                 (const uint64_t(*)[8])requests, replies) == HOSTCALL_OK);
    CHECK(replies[0][0] == 0 && replies[0][1] == HOSTCALL_ERROR_REFUSED);
    CHECK(devmem_warnings >= 1);
    CHECK(user_ok);

    hostcall_stats_t stats;
    memset(&stats, 0xff, sizeof stats);
    stats.size = sizeof stats;
    CHECK(hostcall_get_stats(&stats) == HOSTCALL_OK);
    CHECK(stats.size == sizeof stats);
    CHECK(stats.reasons >= 15 && stats.reasons <= HOSTCALL_REASON_SLOTS);
    CHECK(stats.refusals[HOSTCALL_REASON_DEVMEM_SIZE] == 2);
    CHECK(stats.refusals[HOSTCALL_REASON_BAD_FREE] == 0);
    CHECK(stats.refusals[HOSTCALL_REASON_SLOTS - 1] == 0);
    CHECK(stats.packets >= 1 && stats.lane_calls >= 2 && stats.errors >= 2);
    CHECK(stats.buffers == 1);

    hostcall_buffer_stats_t of_buffer;
    of_buffer.size = sizeof of_buffer;
    CHECK(hostcall_get_buffer_stats(buffer, &of_buffer) == HOSTCALL_OK);
    CHECK(of_buffer.protocol == HOSTCALL_PROTOCOL_STACK && of_buffer.num_packets == PACKETS);
    CHECK(of_buffer.packets == 1 && of_buffer.lane_calls == 2 && of_buffer.errors == 2);
    CHECK(of_buffer.refusals[HOSTCALL_REASON_DEVMEM_SIZE] == 2);

    hostcall_service_stats_t devmem;
    devmem.size = sizeof devmem;
    CHECK(hostcall_get_service_stats(HOSTCALL_SERVICE_DEVMEM, &devmem) == HOSTCALL_OK);
    CHECK(devmem.id == HOSTCALL_SERVICE_DEVMEM && devmem.packets == 1 && devmem.errors == 2);
    CHECK(devmem.service_ns_p50 > 0 && devmem.service_ns_p50 <= devmem.service_ns_p99);

    /* Refused sizes and pointers; a good call clears the error again. */
    stats.size = 8;
    CHECK(hostcall_get_stats(&stats) == HOSTCALL_ERR_OPTIONS);
    CHECK(hostcall_get_stats(NULL) == HOSTCALL_ERR_NULL);
    CHECK(hostcall_get_buffer_stats(&queue, &of_buffer) == HOSTCALL_ERR_NOT_ENABLED);
    CHECK(hostcall_get_service_stats(999, &devmem) == HOSTCALL_ERR_NOT_REGISTERED);
    CHECK(strstr(hostcall_last_error(), "999") != NULL);
    stats.size = sizeof stats;
    CHECK(hostcall_get_stats(&stats) == HOSTCALL_OK);
    CHECK(strcmp(hostcall_last_error(), "") == 0);

    /* disableHostcalls is void: its result is the last error. */
    disableHostcalls(buffer, &queue);
    CHECK(strcmp(hostcall_last_error(), "") == 0);
    disableHostcalls(buffer, &queue);
    CHECK(strstr(hostcall_last_error(), "not enabled") != NULL);
    CHECK(hostcall_set_log_callback(NULL, HOSTCALL_LOG_OFF, NULL) == HOSTCALL_OK);
    free(buffer);

    if (failures) {
        fprintf(stderr, "observe_test: %d checks failed\n", failures);
        return 1;
    }
    printf("observe_test: ok\n");
    return 0;
}
