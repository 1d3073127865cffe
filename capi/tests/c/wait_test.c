/*
 * The wait policy from C (capi/tests/wait_policy.rs builds and runs it): the presets read back
 * as the header states them, refused values are refused, and a policy set while a buffer is
 * enabled reaches the running listener (its thread's timer slack, read by a service on that
 * thread). Prints "wait_test: ok".
 */
#define _GNU_SOURCE
#include "hostcall.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#define PACKETS 4u
#define SLACK_SERVICE 200u

/* Replies with the timer slack (ns) of the thread it runs on: the listener's. */
static int slack_service(const uint64_t request[8], uint64_t reply[2], void *ctx) {
    (void)request;
    (void)ctx;
    reply[0] = (uint64_t)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    reply[1] = 0;
    return 0;
}

static void policy(uint32_t out[4]) {
    CHECK(hostcall_get_wait_times(&out[0], &out[1], &out[2], &out[3]) == HOSTCALL_OK);
}

/* The listener thread's slack after a policy change: the first calls may be served before the
 * thread took the new policy (it does so before its next nap), so the last of a few calls. */
static uint64_t listener_slack(void *buffer) {
    uint64_t requests[1][8] = {{0}};
    uint64_t replies[1][2] = {{0}};
    for (int i = 0; i < 50; i++) {
        CHECK(hostcall_emulated_call(buffer, PACKETS, SLACK_SERVICE, 1, (const uint64_t(*)[8])requests,
                                     replies) == HOSTCALL_OK);
    }
    return replies[0][0];
}

int main(void) {
    uint32_t p[4];
    policy(p);
    CHECK(p[0] == 64 && p[1] == 50 && p[2] == 200 && p[3] == 5); /* HOSTCALL_WAIT_BOUNDED_LATENCY */

    CHECK(hostcall_set_wait_policy(HOSTCALL_WAIT_SPINNING) == HOSTCALL_OK);
    policy(p);
    CHECK(p[0] == HOSTCALL_WAIT_SPIN_FOREVER);
    CHECK(hostcall_set_wait_policy(HOSTCALL_WAIT_POWER_SAVING) == HOSTCALL_OK);
    policy(p);
    CHECK(p[0] == 64 && p[1] == 1000 && p[2] == 10000 && p[3] == 0);

    /* Refused: an unknown preset, a first nap above the longest, a null out-pointer. */
    CHECK(hostcall_set_wait_policy(99) == HOSTCALL_ERR_OPTIONS);
    CHECK(strstr(hostcall_last_error(), "99") != NULL);
    CHECK(hostcall_set_wait_times(0, 300, 200, 0) == HOSTCALL_ERR_OPTIONS);
    CHECK(hostcall_get_wait_times(&p[0], NULL, &p[2], &p[3]) == HOSTCALL_ERR_NULL);
    policy(p);
    CHECK(p[1] == 1000 && p[2] == 10000); /* unchanged by the refusals */

    /* Explicit values, before the first enable. */
    CHECK(hostcall_set_wait_times(16, 100, 400, 20) == HOSTCALL_OK);
    policy(p);
    CHECK(p[0] == 16 && p[1] == 100 && p[2] == 400 && p[3] == 20);

    CHECK(hostcall_register_service(SLACK_SERVICE, slack_service, NULL) == HOSTCALL_OK);
    size_t size = hostcall_buffer_size(PACKETS);
    void *buffer = aligned_alloc(64, (size + 63) / 64 * 64);
    int queue;
    CHECK(buffer != NULL);
    memset(buffer, 0, size);
    CHECK(hostcall_enable(buffer, PACKETS, &queue) == HOSTCALL_OK);
    CHECK(listener_slack(buffer) == 20000); /* the listener started with the policy set before */

    /* Applied to the running listener. */
    CHECK(hostcall_set_wait_times(0, 250, 250, 33) == HOSTCALL_OK);
    CHECK(listener_slack(buffer) == 33000);
    CHECK(hostcall_set_wait_policy(HOSTCALL_WAIT_BOUNDED_LATENCY) == HOSTCALL_OK);
    CHECK(listener_slack(buffer) == 5000);

    /* After an idle spell, a call is still served. */
    struct timespec idle = {0, 50 * 1000 * 1000};
    nanosleep(&idle, NULL);
    CHECK(listener_slack(buffer) == 5000);

    CHECK(hostcall_disable(buffer, &queue) == HOSTCALL_OK);
    CHECK(hostcall_unregister_service(SLACK_SERVICE) == HOSTCALL_OK);
    free(buffer);

    if (failures) {
        fprintf(stderr, "wait_test: %d checks failed\n", failures);
        return 1;
    }
    printf("wait_test: ok\n");
    return 0;
}
