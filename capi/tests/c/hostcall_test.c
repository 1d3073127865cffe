/*
 * The C side of the C ABI test (capi/tests/c_program.rs builds and runs it).
 *
 *   hostcall_test layout  prints "layout NAME VALUE" lines: the header's offsets, sizes and
 *                         constants, which the Rust test compares with the Rust definitions,
 *                         and a "version STRING" line (HOSTCALL_VERSION);
 *   hostcall_test run     the lifecycle: sizes, two buffers enabled for two queues, every misuse
 *                         refused, a C service and emulated waves on two threads, disable, reuse;
 *   hostcall_test exit    enables two buffers, makes calls, and returns from main without
 *                         disabling them (the process must still exit promptly and cleanly).
 */
#include "hostcall.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADD 100u
#define PICKY 101u
#define PACKETS 8u
#define CALLS 200

static int failures = 0;

#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    hostcall_last_error());                                                          \
            failures++;                                                                               \
        }                                                                                             \
    } while (0)

/* ADD: {in[0] + in[1], in[2]}; counts lanes in *ctx (only the listener thread writes it). */
static int add_service(const uint64_t request[8], uint64_t reply[2], void *ctx) {
    *(uint64_t *)ctx += 1;
    reply[0] = request[0] + request[1];
    reply[1] = request[2];
    return 0;
}

/* PICKY: refuses 13 with BAD_REQUEST, echoes anything else. */
static int picky_service(const uint64_t request[8], uint64_t reply[2], void *ctx) {
    (void)ctx;
    if (request[0] == 13) {
        return (int)HOSTCALL_ERROR_BAD_REQUEST;
    }
    reply[0] = request[0];
    reply[1] = 0;
    return 0;
}

static void *alloc_buffer(uint32_t packets) {
    size_t size = hostcall_buffer_size(packets);
    /* aligned_alloc wants a multiple of the alignment: buffer sizes are multiples of 8. */
    void *buffer = aligned_alloc(hostcall_buffer_alignment(), size);
    if (buffer) {
        memset(buffer, 0, size);
    }
    return buffer;
}

/* One call of ADD with `mask` on `buffer`; checks every active lane's reply. */
static void add_call(void *buffer, uint64_t mask, uint64_t tag) {
    uint64_t requests[64][8];
    uint64_t replies[64][2];
    memset(requests, 0, sizeof requests);
    for (int lane = 0; lane < 64; lane++) {
        requests[lane][0] = tag;
        requests[lane][1] = (uint64_t)lane;
        requests[lane][2] = tag ^ 0xabcdu;
        replies[lane][0] = replies[lane][1] = 0x5a5a5a5a;
    }
    int status = hostcall_emulated_call(buffer, PACKETS, ADD, mask, (const uint64_t(*)[8])requests, replies);
    CHECK(status == HOSTCALL_OK);
    for (int lane = 0; lane < 64; lane++) {
        if (mask >> lane & 1) {
            CHECK(replies[lane][0] == tag + (uint64_t)lane && replies[lane][1] == (tag ^ 0xabcdu));
        } else {
            CHECK(replies[lane][0] == 0x5a5a5a5a); /* inactive lanes are not written */
        }
    }
}

struct wave_args {
    void *buffer;
    uint64_t seed;
};

static void *wave_thread(void *arg) {
    struct wave_args *w = (struct wave_args *)arg;
    for (int c = 0; c < CALLS; c++) {
        uint64_t mask = (c % 2) ? UINT64_MAX : (0x8000000000000005ull | (uint64_t)c << 8);
        add_call(w->buffer, mask, w->seed + (uint64_t)c);
    }
    return NULL;
}

static uint64_t lanes_in(uint64_t mask) {
    uint64_t n = 0;
    for (; mask; mask &= mask - 1) n++;
    return n;
}

static uint64_t expected_lanes(void) {
    uint64_t total = 0;
    for (int c = 0; c < CALLS; c++) {
        total += (c % 2) ? 64 : lanes_in(0x8000000000000005ull | (uint64_t)c << 8);
    }
    return total;
}

static int print_layout(void) {
#define P(name, value) printf("layout %s %llu\n", name, (unsigned long long)(value))
    P("prefix.size", sizeof(hostcall_buffer_prefix_t));
    P("prefix.headers", offsetof(hostcall_buffer_prefix_t, headers));
    P("prefix.payloads", offsetof(hostcall_buffer_prefix_t, payloads));
    P("prefix.doorbell", offsetof(hostcall_buffer_prefix_t, doorbell));
    P("prefix.free_stack", offsetof(hostcall_buffer_prefix_t, free_stack));
    P("prefix.ready_stack", offsetof(hostcall_buffer_prefix_t, ready_stack));
    P("prefix.index_mask", offsetof(hostcall_buffer_prefix_t, index_mask));
    P("header.size", sizeof(hostcall_packet_header_t));
    P("header.next", offsetof(hostcall_packet_header_t, next));
    P("header.activemask", offsetof(hostcall_packet_header_t, activemask));
    P("header.service", offsetof(hostcall_packet_header_t, service));
    P("header.control", offsetof(hostcall_packet_header_t, control));
    P("payload.size", sizeof(hostcall_payload_t));
    P("phase.size", sizeof(hostcall_phase_prefix_t));
    P("phase.device_phase", offsetof(hostcall_phase_prefix_t, device_phase));
    P("phase.host_phase", offsetof(hostcall_phase_prefix_t, host_phase));
    P("phase.occupied", offsetof(hostcall_phase_prefix_t, occupied));
    P("phase.headers", offsetof(hostcall_phase_prefix_t, headers));
    P("phase.payloads", offsetof(hostcall_phase_prefix_t, payloads));
    P("phase.doorbell", offsetof(hostcall_phase_prefix_t, doorbell));
    P("phase.num_packets", offsetof(hostcall_phase_prefix_t, num_packets));
    P("phase_header.size", sizeof(hostcall_phase_header_t));
    P("phase_header.activemask", offsetof(hostcall_phase_header_t, activemask));
    P("phase_header.service", offsetof(hostcall_phase_header_t, service));
    P("headers_offset", HOSTCALL_HEADERS_OFFSET);
    P("payloads_offset.3", HOSTCALL_PAYLOADS_OFFSET(3));
    P("buffer_size.3", HOSTCALL_BUFFER_SIZE(3));
    P("buffer_size.1000", HOSTCALL_BUFFER_SIZE(1000));
    P("lib.buffer_size.3", hostcall_buffer_size(3));
    P("lib.buffer_size.1000", getHostcallBufferSize(1000));
    P("buffer_align", HOSTCALL_BUFFER_ALIGN);
    P("lib.buffer_align", getHostcallBufferAlignment());
    P("max_packets", HOSTCALL_MAX_PACKETS);
    P("lanes", HOSTCALL_LANES);
    P("slot_words", HOSTCALL_SLOT_WORDS);
    P("reply_words", HOSTCALL_REPLY_WORDS);
    P("service.function_call", HOSTCALL_SERVICE_FUNCTION_CALL);
    P("service.printf", HOSTCALL_SERVICE_PRINTF);
    P("service.devmem", HOSTCALL_SERVICE_DEVMEM);
    P("service.sanitizer", HOSTCALL_SERVICE_SANITIZER);
    P("control.ready", HOSTCALL_CONTROL_READY);
    P("control.host_error", HOSTCALL_CONTROL_HOST_ERROR);
    P("error.reply", HOSTCALL_ERROR_REPLY);
    P("error.unknown_service", HOSTCALL_ERROR_UNKNOWN_SERVICE);
    P("error.service_panicked", HOSTCALL_ERROR_SERVICE_PANICKED);
    P("error.bad_request", HOSTCALL_ERROR_BAD_REQUEST);
    P("error.refused", HOSTCALL_ERROR_REFUSED);
    P("error.shutting_down", HOSTCALL_ERROR_SHUTTING_DOWN);
    P("msg.begin", HOSTCALL_MSG_BEGIN);
    P("msg.end", HOSTCALL_MSG_END);
    P("msg.reserved", HOSTCALL_MSG_RESERVED);
    P("msg.descriptor", HOSTCALL_MSG_DESCRIPTOR(1, 1, 7, 0xabcdefull));
    P("msg.len", HOSTCALL_MSG_LEN(HOSTCALL_MSG_DESCRIPTOR(0, 1, 5, 77)));
    P("msg.id", HOSTCALL_MSG_ID(HOSTCALL_MSG_DESCRIPTOR(1, 0, 3, 0xffffffffffffffull)));
    P("implicitarg.v4", HOSTCALL_IMPLICITARG_OFFSET_V4);
    P("implicitarg.v5", HOSTCALL_IMPLICITARG_OFFSET_V5);
    P("emulated_timeout_ms", HOSTCALL_EMULATED_TIMEOUT_MS);
    P("version.major", HOSTCALL_VERSION_MAJOR);
    P("version.minor", HOSTCALL_VERSION_MINOR);
    P("version.patch", HOSTCALL_VERSION_PATCH);
    P("status.null", HOSTCALL_ERR_NULL);
    P("status.misaligned", HOSTCALL_ERR_MISALIGNED);
    P("status.packet_count", HOSTCALL_ERR_PACKET_COUNT);
    P("status.already_enabled", HOSTCALL_ERR_ALREADY_ENABLED);
    P("status.other_listener", HOSTCALL_ERR_OTHER_LISTENER);
    P("status.overlaps", HOSTCALL_ERR_OVERLAPS);
    P("status.queue_taken", HOSTCALL_ERR_QUEUE_TAKEN);
    P("status.not_enabled", HOSTCALL_ERR_NOT_ENABLED);
    P("status.wrong_queue", HOSTCALL_ERR_WRONG_QUEUE);
    P("status.packet_count_mismatch", HOSTCALL_ERR_PACKET_COUNT_MISMATCH);
    P("status.from_listener", HOSTCALL_ERR_FROM_LISTENER);
    P("status.service_taken", HOSTCALL_ERR_SERVICE_TAKEN);
    P("status.timed_out", HOSTCALL_ERR_TIMED_OUT);
    P("status.thread", HOSTCALL_ERR_THREAD);
    P("status.panic", HOSTCALL_ERR_PANIC);
    P("status.other", HOSTCALL_ERR_OTHER);
#undef P
    printf("version %s\n", HOSTCALL_VERSION);
    return 0;
}

static void check_misuse(void *a, void *b, const void *qa, const void *qb) {
    const void *qc = (const void *)0x3000;
    CHECK(hostcall_enable(a, PACKETS, qa) == HOSTCALL_ERR_ALREADY_ENABLED);
    CHECK(strstr(hostcall_last_error(), "already enabled") != NULL);
    CHECK(hostcall_enable(a, PACKETS, qc) == HOSTCALL_ERR_ALREADY_ENABLED); /* a second queue */
    CHECK(!enableHostcalls(a, PACKETS, qa));
    CHECK(hostcall_enable(b, PACKETS, qa) == HOSTCALL_ERR_ALREADY_ENABLED); /* and a taken queue */
    void *c = alloc_buffer(PACKETS);
    CHECK(hostcall_enable(c, PACKETS, qb) == HOSTCALL_ERR_QUEUE_TAKEN);
    CHECK(hostcall_enable(NULL, PACKETS, qc) == HOSTCALL_ERR_NULL);
    CHECK(hostcall_enable((char *)c + 4, PACKETS, qc) == HOSTCALL_ERR_MISALIGNED);
    CHECK(hostcall_enable(c, 1, qc) == HOSTCALL_ERR_PACKET_COUNT);
    CHECK(hostcall_enable(c, 0, qc) == HOSTCALL_ERR_PACKET_COUNT);
    CHECK(hostcall_enable(c, UINT32_MAX, qc) == HOSTCALL_ERR_PACKET_COUNT);
    CHECK(hostcall_enable((char *)a + 64, 2, qc) == HOSTCALL_ERR_OVERLAPS);
    CHECK(hostcall_disable(a, qb) == HOSTCALL_ERR_WRONG_QUEUE);
    CHECK(hostcall_disable(c, qc) == HOSTCALL_ERR_NOT_ENABLED);
    CHECK(hostcall_disable(NULL, qa) == HOSTCALL_ERR_NULL);
    disableHostcalls(c, qc); /* ROCm's void version: only records the error */
    CHECK(strstr(hostcall_last_error(), "not enabled") != NULL);
    uint64_t req[1][8] = {{0}};
    uint64_t rep[1][2];
    CHECK(hostcall_emulated_call(c, PACKETS, ADD, 1, (const uint64_t(*)[8])req, rep) == HOSTCALL_ERR_NOT_ENABLED);
    CHECK(hostcall_emulated_call(a, PACKETS + 1, ADD, 1, (const uint64_t(*)[8])req, rep) ==
          HOSTCALL_ERR_PACKET_COUNT_MISMATCH);
    CHECK(hostcall_emulated_call(a, PACKETS, ADD, 1, NULL, rep) == HOSTCALL_ERR_NULL);
    CHECK(hostcall_register_service(ADD, add_service, NULL) == HOSTCALL_ERR_SERVICE_TAKEN);
    CHECK(hostcall_register_service(7, NULL, NULL) == HOSTCALL_ERR_NULL);
    /* Nothing broke: c can be enabled correctly, used, and disabled. */
    CHECK(hostcall_enable(c, PACKETS, qc) == HOSTCALL_OK);
    add_call(c, 0xf0f0, 99);
    CHECK(hostcall_disable(c, qc) == HOSTCALL_OK);
    free(c);
}

static void check_error_replies(void *buffer) {
    uint64_t req[2][8] = {{13}, {14}};
    uint64_t rep[2][2];
    CHECK(hostcall_emulated_call(buffer, PACKETS, PICKY, 3, (const uint64_t(*)[8])req, rep) == HOSTCALL_OK);
    CHECK(rep[0][0] == HOSTCALL_ERROR_REPLY && rep[0][1] == HOSTCALL_ERROR_BAD_REQUEST);
    CHECK(rep[1][0] == 14 && rep[1][1] == 0);
    CHECK(hostcall_emulated_call(buffer, PACKETS, 999, 1, (const uint64_t(*)[8])req, rep) == HOSTCALL_OK);
    CHECK(rep[0][0] == HOSTCALL_ERROR_REPLY && rep[0][1] == HOSTCALL_ERROR_UNKNOWN_SERVICE);
}

static int run(void) {
    uint64_t lanes_served = 0;
    CHECK(hostcall_buffer_size(PACKETS) == HOSTCALL_BUFFER_SIZE(PACKETS));
    CHECK(getHostcallBufferSize(PACKETS) == HOSTCALL_BUFFER_SIZE(PACKETS));
    CHECK(hostcall_buffer_alignment() == HOSTCALL_BUFFER_ALIGN);
    CHECK(hostcall_buffer_size(1) == 0 && strlen(hostcall_last_error()) > 0);
    CHECK(hostcall_register_service(ADD, add_service, &lanes_served) == HOSTCALL_OK);
    CHECK(hostcall_register_service(PICKY, picky_service, NULL) == HOSTCALL_OK);

    const void *qa = (const void *)0x1000, *qb = (const void *)0x2000;
    void *a = alloc_buffer(PACKETS), *b = alloc_buffer(PACKETS);
    CHECK(a && b);
    CHECK(enableHostcalls(a, PACKETS, qa));
    CHECK(hostcall_enable(b, PACKETS, qb) == HOSTCALL_OK);
    check_misuse(a, b, qa, qb);
    check_error_replies(a);

    struct wave_args wa = {a, 1000000}, wb = {b, 2000000};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, wave_thread, &wa) == 0);
    CHECK(pthread_create(&tb, NULL, wave_thread, &wb) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);

    disableHostcalls(a, qa);
    CHECK(hostcall_disable(b, qb) == HOSTCALL_OK);
    CHECK(hostcall_disable(b, qb) == HOSTCALL_ERR_NOT_ENABLED);
    /* The listener thread has been joined: reading the service's counter is race-free. */
    uint64_t expected = 2 * expected_lanes() + 8 /* the 8 lanes of check_misuse's call */;
    printf("lanes served: %llu, expected %llu\n", (unsigned long long)lanes_served,
           (unsigned long long)expected);
    CHECK(lanes_served == expected);
    free(a);
    free(b);

    /* A buffer may be enabled again afterwards: the listener starts anew. */
    void *again = alloc_buffer(PACKETS);
    CHECK(hostcall_enable(again, PACKETS, qa) == HOSTCALL_OK);
    add_call(again, 1, 5);
    CHECK(hostcall_disable(again, qa) == HOSTCALL_OK);
    free(again);

    if (failures) {
        printf("hostcall_test: %d checks failed\n", failures);
        return 1;
    }
    printf("hostcall_test: ok\n");
    return 0;
}

static atomic_int calls_in_loop;

/* Calls until the process ends. */
static void *call_forever(void *buffer) {
    for (uint64_t c = 0;; c++) {
        add_call(buffer, 0x5, c);
        atomic_fetch_add(&calls_in_loop, 1);
    }
    return NULL;
}

/* Enables two buffers, makes calls, leaves a thread calling in a loop (so the listener is busy
 * when the process exits), and returns without disabling (nor freeing: the buffers are still
 * enabled, so the library may read them until the process is gone). */
static int exit_without_disable(void) {
    void *a = alloc_buffer(PACKETS), *b = alloc_buffer(PACKETS);
    CHECK(hostcall_register_service(ADD, add_service, calloc(1, sizeof(uint64_t))) == HOSTCALL_OK);
    CHECK(enableHostcalls(a, PACKETS, (const void *)0x1000));
    CHECK(enableHostcalls(b, PACKETS, (const void *)0x2000));
    for (uint64_t c = 0; c < 10; c++) {
        add_call(a, UINT64_MAX, c);
        add_call(b, 0x11, c);
    }
    pthread_t caller;
    CHECK(pthread_create(&caller, NULL, call_forever, b) == 0);
    CHECK(pthread_detach(caller) == 0);
    while (atomic_load(&calls_in_loop) < 3) {
    }
    printf("hostcall_test: exiting with %s\n", failures ? "failures" : "two buffers enabled");
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "run";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(mode, "layout") == 0) return print_layout();
    if (strcmp(mode, "run") == 0) return run();
    if (strcmp(mode, "exit") == 0) return exit_without_disable();
    fprintf(stderr, "usage: %s [layout|run|exit]\n", argv[0]);
    return 2;
}
