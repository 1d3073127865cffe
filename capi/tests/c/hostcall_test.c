/*
 * The C side of the C ABI test (capi/tests/c_program.rs builds and runs it).
 *
 *   hostcall_test layout  prints "layout NAME VALUE" lines: the header's offsets, sizes and
 *                         constants (the three protocols' layouts, the line protocol's for
 *                         several packet counts), which the Rust test compares with the Rust
 *                         definitions, and a "version STRING" line (HOSTCALL_VERSION);
 *   hostcall_test run     the lifecycle: sizes, two buffers enabled for two queues, every misuse
 *                         refused, a C service and emulated waves on two threads, disable, reuse;
 *   hostcall_test exit    enables two buffers, makes calls, and returns from main without
 *                         disabling them (the process must still exit promptly and cleanly);
 *   hostcall_test builtins  the built-in services as ROCm's device code uses them, in both
 *                         protocols: printf from a whole wave (the message stream chunked here,
 *                         as ROCm's device code chunks it) to stdout and stderr, DEVMEM allocate
 *                         and free, FUNCTION_CALL refused before the opt-in and served after;
 *   hostcall_test phase   the phase protocol: sizes, options refused, enable / call / disable
 *                         with a bitmap passed in and with none (the library allocates it).
 */
#include "hostcall.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADD 100u
#define PICKY 101u
#define PACKETS 8u
#define CALLS 200


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
    P("status.options", HOSTCALL_ERR_OPTIONS);
    P("status.rpc_client_size", HOSTCALL_ERR_RPC_CLIENT_SIZE);
    P("status.memory", HOSTCALL_ERR_MEMORY);
    P("status.not_registered", HOSTCALL_ERR_NOT_REGISTERED);
    P("status.in_log_callback", HOSTCALL_ERR_IN_LOG_CALLBACK);
    P("status.unknown_reason", HOSTCALL_ERR_UNKNOWN_REASON);
    P("memory.auto", HOSTCALL_MEMORY_AUTO);
    P("memory.host", HOSTCALL_MEMORY_HOST);
    P("memory.hsa", HOSTCALL_MEMORY_HSA);
    P("memory.cuda", HOSTCALL_MEMORY_CUDA);
    P("phase.buffer_align", HOSTCALL_PHASE_BUFFER_ALIGN);
    P("lib.phase.buffer_align", hostcall_buffer_alignment_for(HOSTCALL_PROTOCOL_PHASE));
    P("lib.stack.buffer_align", hostcall_buffer_alignment_for(HOSTCALL_PROTOCOL_STACK));
    P("phase.occupied_words.33", HOSTCALL_PHASE_OCCUPIED_WORDS(33));
    for (int i = 0; i < 2; i++) {
        const unsigned n = i ? 1000 : 3;
        printf("layout phase.device_phase_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_PHASE_DEVICE_PHASE_OFFSET);
        printf("layout phase.occupied_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_PHASE_OCCUPIED_OFFSET(n));
        printf("layout phase.host_phase_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_PHASE_HOST_PHASE_OFFSET(n));
        printf("layout phase.headers_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_PHASE_HEADERS_OFFSET(n));
        printf("layout phase.payloads_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_PHASE_PAYLOADS_OFFSET(n));
        printf("layout phase.buffer_size.%u %llu\n", n, (unsigned long long)HOSTCALL_PHASE_BUFFER_SIZE(n));
        printf("layout lib.phase.buffer_size.%u %llu\n", n,
               (unsigned long long)hostcall_buffer_size_for(HOSTCALL_PROTOCOL_PHASE, n));
    }
    P("line.prefix.size", sizeof(hostcall_line_prefix_t));
    P("line.prefix.requests", offsetof(hostcall_line_prefix_t, requests));
    P("line.prefix.replies", offsetof(hostcall_line_prefix_t, replies));
    P("line.prefix.device_seq", offsetof(hostcall_line_prefix_t, device_seq));
    P("line.prefix.occupied", offsetof(hostcall_line_prefix_t, occupied));
    P("line.prefix.served", offsetof(hostcall_line_prefix_t, served));
    P("line.prefix.doorbell", offsetof(hostcall_line_prefix_t, doorbell));
    P("line.prefix.num_packets", offsetof(hostcall_line_prefix_t, num_packets));
    P("line.request.size", sizeof(hostcall_line_request_t));
    P("line.request.align", HOSTCALL_ALIGNOF(hostcall_line_request_t));
    P("line.request.head", offsetof(hostcall_line_request_t, head));
    P("line.request.mask", offsetof(hostcall_line_request_t, mask));
    P("line.request.reserved", offsetof(hostcall_line_request_t, reserved));
    P("line.request.lanes", offsetof(hostcall_line_request_t, lanes));
    P("line.request.lane_words", HOSTCALL_LINE_REQUEST_LANE_WORDS);
    P("line.reply.size", sizeof(hostcall_line_reply_t));
    P("line.reply.align", HOSTCALL_ALIGNOF(hostcall_line_reply_t));
    P("line.reply.lanes", offsetof(hostcall_line_reply_t, lanes));
    P("line.reply.lane_words", HOSTCALL_LINE_REPLY_LANE_WORDS);
    P("line.seq_max", HOSTCALL_LINE_SEQ_MAX);
    P("line.seq_bits", HOSTCALL_LINE_SEQ_BITS);
    P("line.data_mask", HOSTCALL_LINE_DATA_MASK);
    P("line.word", HOSTCALL_LINE_WORD(0x1ffdeadbeefcafeull, 7u));
    P("line.word.max", HOSTCALL_LINE_WORD(UINT64_MAX, HOSTCALL_LINE_SEQ_MAX));
    P("line.seq_of", HOSTCALL_LINE_SEQ_OF(0x123456789abcdef0ull));
    P("line.data_of", HOSTCALL_LINE_DATA_OF(0x123456789abcdef0ull));
    P("line.buffer_align", HOSTCALL_LINE_BUFFER_ALIGN);
    P("rpc.max_ports", HOSTCALL_RPC_MAX_PORTS);
    P("rpc.max_lanes", HOSTCALL_RPC_MAX_LANES);
    P("rpc.client_size", HOSTCALL_RPC_CLIENT_SIZE);
    P("rpc.buffer_align", HOSTCALL_RPC_BUFFER_ALIGN);
    {
        /* The geometries c_program.rs lists: offsets and sizes from the macros and the library. */
        static const unsigned geometry[][2] = {{1, 1}, {3, 2}, {64, 32}, {4096, 64}};
        for (size_t i = 0; i < sizeof geometry / sizeof geometry[0]; i++) {
            const unsigned p = geometry[i][0], l = geometry[i][1];
            char name[64];
            snprintf(name, sizeof name, "rpc.device_mailbox_offset.%u.%u", p, l);
            P(name, HOSTCALL_RPC_DEVICE_MAILBOX_OFFSET(p));
            snprintf(name, sizeof name, "rpc.headers_offset.%u.%u", p, l);
            P(name, HOSTCALL_RPC_HEADERS_OFFSET(p));
            snprintf(name, sizeof name, "rpc.lanes_offset.%u.%u", p, l);
            P(name, HOSTCALL_RPC_LANES_OFFSET(p));
            snprintf(name, sizeof name, "rpc.buffer_size.%u.%u", p, l);
            P(name, HOSTCALL_RPC_BUFFER_SIZE(p, l));
            snprintf(name, sizeof name, "lib.rpc.buffer_size.%u.%u", p, l);
            P(name, hostcall_rpc_buffer_size(p, l));
        }
    }
    {
        /* The packet counts c_program.rs lists (the_header_layout_matches_rust): the same. */
        static const unsigned counts[] = {2, 3, 31, 32, 33, 64, 1000, 1u << 24};
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
            const unsigned n = counts[i];
            printf("layout line.occupied_words.%u %llu\n", n, (unsigned long long)HOSTCALL_LINE_OCCUPIED_WORDS(n));
            printf("layout line.device_seq_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_LINE_DEVICE_SEQ_OFFSET);
            printf("layout line.occupied_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_LINE_OCCUPIED_OFFSET(n));
            printf("layout line.served_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_LINE_SERVED_OFFSET(n));
            printf("layout line.requests_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_LINE_REQUESTS_OFFSET(n));
            printf("layout line.replies_offset.%u %llu\n", n, (unsigned long long)HOSTCALL_LINE_REPLIES_OFFSET(n));
            printf("layout line.buffer_size.%u %llu\n", n, (unsigned long long)HOSTCALL_LINE_BUFFER_SIZE(n));
        }
    }
    P("protocol.stack", HOSTCALL_PROTOCOL_STACK);
    P("protocol.phase", HOSTCALL_PROTOCOL_PHASE);
    P("options.size", sizeof(hostcall_enable_options_t));
    P("options.field.size", offsetof(hostcall_enable_options_t, size));
    P("options.protocol", offsetof(hostcall_enable_options_t, protocol));
    P("options.occupied", offsetof(hostcall_enable_options_t, occupied));
    P("options.device_ordinal", offsetof(hostcall_enable_options_t, device_ordinal));
    P("options.reserved", offsetof(hostcall_enable_options_t, reserved));
    P("options.size_v1", HOSTCALL_ENABLE_OPTIONS_SIZE_V1);
    P("options.size_v3", HOSTCALL_ENABLE_OPTIONS_SIZE_V3);
    P("options.rpc_files_dir", offsetof(hostcall_enable_options_t, rpc_files_dir));
    P("options.max_size", HOSTCALL_ENABLE_OPTIONS_MAX_SIZE);
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


/* ---- Built-in services and the phase protocol ---- */

static const char *protocol_name(uint32_t protocol) {
    return protocol == HOSTCALL_PROTOCOL_PHASE ? "phase" : "stack";
}

/* A buffer of protocol for PACKETS packets, aligned as the library says, zeroed. */
static void *alloc_for(uint32_t protocol) {
    size_t size = hostcall_buffer_size_for(protocol, PACKETS);
    void *buffer = aligned_alloc(hostcall_buffer_alignment_for(protocol), size);
    if (buffer) {
        memset(buffer, 0, size);
    }
    return buffer;
}

/* A message being built: the words one lane sends (PROTOCOL section 4). */
struct message {
    uint64_t words[64];
    size_t count;
};

static void put_word(struct message *m, uint64_t word) {
    if (m->count < sizeof m->words / sizeof m->words[0]) {
        m->words[m->count++] = word;
    } else {
        failures++;
    }
}

/* A NUL-terminated string, packed little-endian, 8 bytes per word, zero-padded. */
static void put_string(struct message *m, const char *s) {
    size_t len = strlen(s) + 1;
    for (size_t at = 0; at < len; at += 8) {
        uint64_t word = 0;
        memcpy(&word, s + at, len - at < 8 ? len - at : 8);
        put_word(m, word);
    }
}

static void put_double(struct message *m, double value) {
    uint64_t word;
    memcpy(&word, &value, sizeof word);
    put_word(m, word);
}

/* Sends one message per active lane of mask to service, chunked as ROCm's device code does: each
 * call carries a descriptor (BEGIN on the first, END on the last, LEN data words, the message id
 * the host gave in its reply to BEGIN) and up to 7 words; lanes whose message ended drop out of
 * later calls. replies[lane] gets the host's reply to that lane's END (or the error reply that
 * ended its stream). */
static int send_messages(void *buffer, uint32_t service, uint64_t mask, const struct message *messages,
                         uint64_t replies[64][2]) {
    size_t sent[64] = {0};
    uint64_t ids[64] = {0};
    uint64_t open = mask;
    while (open) {
        uint64_t requests[64][8];
        uint64_t answers[64][2];
        int begin[64], end[64];
        size_t len[64];
        memset(requests, 0, sizeof requests);
        for (int lane = 0; lane < 64; lane++) {
            if (!(open >> lane & 1)) continue;
            size_t left = messages[lane].count - sent[lane];
            len[lane] = left < HOSTCALL_MSG_MAX_WORDS ? left : HOSTCALL_MSG_MAX_WORDS;
            begin[lane] = sent[lane] == 0 && ids[lane] == 0;
            end[lane] = left <= HOSTCALL_MSG_MAX_WORDS;
            requests[lane][0] = HOSTCALL_MSG_DESCRIPTOR(begin[lane], end[lane], len[lane], ids[lane]);
            memcpy(&requests[lane][1], &messages[lane].words[sent[lane]], len[lane] * sizeof(uint64_t));
        }
        int status = hostcall_emulated_call(buffer, PACKETS, service, open, (const uint64_t(*)[8])requests, answers);
        if (status != HOSTCALL_OK) return status;
        for (int lane = 0; lane < 64; lane++) {
            if (!(open >> lane & 1)) continue;
            if (end[lane] || answers[lane][0] == HOSTCALL_ERROR_REPLY) {
                replies[lane][0] = answers[lane][0];
                replies[lane][1] = answers[lane][1];
                open &= ~(1ull << lane);
                continue;
            }
            if (begin[lane]) ids[lane] = HOSTCALL_MSG_ID(answers[lane][0]);
            sent[lane] += len[lane];
        }
    }
    return HOSTCALL_OK;
}

/* printf from every lane of a wave, each line of another length (lane 7's spans many chunks);
 * checks each lane's reply against snprintf's count. The Rust side checks what reached stdout. */
static void printf_from_a_wave(void *buffer, uint32_t protocol) {
    static struct message messages[64];
    uint64_t replies[64][2];
    char text[64][160];
    const char *format = "printf %s lane %2d: %5.2f %s|\n";
    for (int lane = 0; lane < 64; lane++) {
        char tail[128];
        size_t n = lane == 7 ? 100 : (size_t)lane;
        memset(tail, 'x', n);
        tail[n] = 0;
        struct message *m = &messages[lane];
        m->count = 0;
        put_word(m, 0); /* control: stdout */
        put_string(m, format);
        put_string(m, protocol_name(protocol));
        put_word(m, (uint64_t)lane);
        put_double(m, lane / 4.0);
        put_string(m, tail);
        snprintf(text[lane], sizeof text[lane], format, protocol_name(protocol), lane, lane / 4.0, tail);
    }
    CHECK(send_messages(buffer, HOSTCALL_SERVICE_PRINTF, UINT64_MAX, messages, replies) == HOSTCALL_OK);
    for (int lane = 0; lane < 64; lane++) {
        CHECK(replies[lane][0] == strlen(text[lane]) && replies[lane][1] == 0);
    }
    /* One lane to stderr (control bit 0). */
    messages[0].count = 0;
    put_word(&messages[0], 1);
    put_string(&messages[0], "printf %s to stderr: %d%%\n");
    put_string(&messages[0], protocol_name(protocol));
    put_word(&messages[0], (uint64_t)-5);
    CHECK(send_messages(buffer, HOSTCALL_SERVICE_PRINTF, 1, messages, replies) == HOSTCALL_OK);
    snprintf(text[0], sizeof text[0], "printf %s to stderr: %d%%\n", protocol_name(protocol), -5);
    CHECK(replies[0][0] == strlen(text[0]));
}

/* DEVMEM as ROCm's device malloc uses it: allocate (slot[0] = 0, slot[1] = bytes), use, free
 * (slot[0] = address). Every failure answers a null address. */
static void devmem(void *buffer) {
    uint64_t req[4][8], rep[4][2];
    const uint64_t sizes[4] = {64, 4096, 2u << 20, 0};
    memset(req, 0, sizeof req);
    for (int lane = 0; lane < 4; lane++) req[lane][1] = sizes[lane];
    CHECK(hostcall_emulated_call(buffer, PACKETS, HOSTCALL_SERVICE_DEVMEM, 0xf, (const uint64_t(*)[8])req, rep) ==
          HOSTCALL_OK);
    for (int lane = 0; lane < 3; lane++) {
        CHECK(rep[lane][0] != 0 && rep[lane][0] != HOSTCALL_ERROR_REPLY);
        if (rep[lane][0] != 0 && rep[lane][0] != HOSTCALL_ERROR_REPLY) {
            memset((void *)(uintptr_t)rep[lane][0], 0xab, (size_t)sizes[lane]); /* host memory: usable */
        }
    }
    CHECK(rep[3][0] == 0 && rep[3][1] == HOSTCALL_ERROR_REFUSED); /* zero bytes */
    uint64_t addresses[3] = {rep[0][0], rep[1][0], rep[2][0]};
    memset(req, 0, sizeof req);
    for (int lane = 0; lane < 3; lane++) req[lane][0] = addresses[lane];
    CHECK(hostcall_emulated_call(buffer, PACKETS, HOSTCALL_SERVICE_DEVMEM, 0x7, (const uint64_t(*)[8])req, rep) ==
          HOSTCALL_OK);
    CHECK(rep[0][0] == 0 && rep[0][1] == 0 && rep[2][0] == 0 && rep[2][1] == 0);
    /* Freed twice, and too large: refused, with a null address. */
    memset(req, 0, sizeof req);
    req[0][0] = addresses[1];
    req[1][1] = 1ull << 40;
    CHECK(hostcall_emulated_call(buffer, PACKETS, HOSTCALL_SERVICE_DEVMEM, 0x3, (const uint64_t(*)[8])req, rep) ==
          HOSTCALL_OK);
    CHECK(rep[0][0] == 0 && rep[0][1] == HOSTCALL_ERROR_BAD_REQUEST);
    CHECK(rep[1][0] == 0 && rep[1][1] == HOSTCALL_ERROR_REFUSED);
}

/* A host function for FUNCTION_CALL: out = {in[0] * in[1] + in[2], in[6]}. */
static void mul_add(uint64_t out[2], const uint64_t in[7]) {
    out[0] = in[0] * in[1] + in[2];
    out[1] = in[6];
}

static void function_call(void *buffer, int enabled) {
    uint64_t req[2][8] = {{(uint64_t)(uintptr_t)mul_add, 6, 7, 0, 0, 0, 0, 99}, {0}};
    uint64_t rep[2][2];
    CHECK(hostcall_emulated_call(buffer, PACKETS, HOSTCALL_SERVICE_FUNCTION_CALL, 0x3, (const uint64_t(*)[8])req,
                                 rep) == HOSTCALL_OK);
    if (enabled) {
        CHECK(rep[0][0] == 42 && rep[0][1] == 99);
        CHECK(rep[1][0] == HOSTCALL_ERROR_REPLY && rep[1][1] == HOSTCALL_ERROR_BAD_REQUEST); /* null */
    } else {
        CHECK(rep[0][0] == HOSTCALL_ERROR_REPLY && rep[0][1] == HOSTCALL_ERROR_UNKNOWN_SERVICE);
    }
}

static int builtins(void) {
    const void *queue = (const void *)0x4000;
    for (uint32_t protocol = HOSTCALL_PROTOCOL_STACK; protocol <= HOSTCALL_PROTOCOL_PHASE; protocol++) {
        void *buffer = alloc_for(protocol);
        hostcall_enable_options_t options = HOSTCALL_ENABLE_OPTIONS_INIT;
        options.protocol = protocol;
        CHECK(hostcall_enable_ex(buffer, PACKETS, queue, &options) == HOSTCALL_OK);
        printf_from_a_wave(buffer, protocol);
        devmem(buffer);
        function_call(buffer, protocol == HOSTCALL_PROTOCOL_PHASE);
        if (protocol == HOSTCALL_PROTOCOL_STACK) {
            CHECK(hostcall_enable_function_calls_unsafe() == HOSTCALL_OK);
            function_call(buffer, 1);
            CHECK(hostcall_enable_function_calls_unsafe() == HOSTCALL_ERR_SERVICE_TAKEN);
        }
        CHECK(hostcall_disable(buffer, queue) == HOSTCALL_OK);
        free(buffer);
    }
    /* With DEVMEM unregistered, a device malloc still gets a null address, never UINT64_MAX. */
    void *buffer = alloc_buffer(PACKETS);
    CHECK(hostcall_enable(buffer, PACKETS, queue) == HOSTCALL_OK);
    CHECK(hostcall_register_service(HOSTCALL_SERVICE_DEVMEM, picky_service, NULL) == HOSTCALL_ERR_SERVICE_TAKEN);
    CHECK(hostcall_unregister_service(HOSTCALL_SERVICE_DEVMEM) == HOSTCALL_OK);
    uint64_t req[1][8] = {{0, 64}}, rep[1][2];
    CHECK(hostcall_emulated_call(buffer, PACKETS, HOSTCALL_SERVICE_DEVMEM, 1, (const uint64_t(*)[8])req, rep) ==
          HOSTCALL_OK);
    CHECK(rep[0][0] == 0 && rep[0][1] == HOSTCALL_ERROR_UNKNOWN_SERVICE);
    CHECK(hostcall_disable(buffer, queue) == HOSTCALL_OK);
    free(buffer);
    printf("hostcall_test: %s\n", failures ? "builtins failed" : "ok");
    return failures ? 1 : 0;
}

/* ADD calls from a wave with several lane patterns; then every claim is released. */
static void phase_calls(void *buffer, const uint32_t *bitmap) {
    for (uint64_t c = 0; c < 50; c++) {
        add_call(buffer, c % 3 ? UINT64_MAX : 0x8000000000000001ull | c << 4, c);
    }
    for (size_t w = 0; w < HOSTCALL_PHASE_OCCUPIED_WORDS(PACKETS); w++) {
        CHECK(__atomic_load_n(&bitmap[w], __ATOMIC_ACQUIRE) == 0);
    }
}

static void phase_options_refused(void *buffer, uint32_t *bitmap) {
    const void *q = (const void *)0x5001;
    hostcall_enable_options_t o = HOSTCALL_ENABLE_OPTIONS_INIT;
    o.protocol = HOSTCALL_PROTOCOL_PHASE;
    o.size = 0;
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &o) == HOSTCALL_ERR_OPTIONS);
    o.size = HOSTCALL_ENABLE_OPTIONS_SIZE_V1 - 1;
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &o) == HOSTCALL_ERR_OPTIONS);
    o.size = HOSTCALL_ENABLE_OPTIONS_MAX_SIZE + 1;
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &o) == HOSTCALL_ERR_OPTIONS);
    o.size = sizeof o;
    o.protocol = 7;
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &o) == HOSTCALL_ERR_OPTIONS);
    CHECK(strstr(hostcall_last_error(), "unknown protocol 7") != NULL);
    o.protocol = HOSTCALL_PROTOCOL_PHASE;
    o.reserved = 1;
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &o) == HOSTCALL_ERR_OPTIONS);
    o.reserved = 0;
    /* A newer caller's larger struct: refused if it sets what this library does not know. */
    struct {
        hostcall_enable_options_t v1;
        uint64_t newer;
    } v2;
    memset(&v2, 0, sizeof v2);
    v2.v1 = o;
    v2.v1.size = sizeof v2;
    v2.newer = 1;
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &v2.v1) == HOSTCALL_ERR_OPTIONS);
    o.protocol = HOSTCALL_PROTOCOL_STACK;
    o.occupied = bitmap;
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &o) == HOSTCALL_ERR_OPTIONS); /* no bitmap in stack */
    o.protocol = HOSTCALL_PROTOCOL_PHASE;
    o.occupied = (uint32_t *)(void *)((char *)bitmap + 2);
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &o) == HOSTCALL_ERR_MISALIGNED);
    o.occupied = (uint32_t *)buffer + 100; /* inside the buffer */
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &o) == HOSTCALL_ERR_OVERLAPS);
    o.occupied = bitmap;
    CHECK(hostcall_enable_ex((char *)buffer + 8, PACKETS, q, &o) == HOSTCALL_ERR_MISALIGNED); /* 64 needed */
    CHECK(hostcall_enable_ex(buffer, 1, q, &o) == HOSTCALL_ERR_PACKET_COUNT);
    /* Nothing was enabled by any of these. */
    CHECK(hostcall_disable(buffer, q) == HOSTCALL_ERR_NOT_ENABLED);
    /* The larger struct with nothing unknown set is accepted (and NULL options are the defaults,
     * the stack protocol: tried on a stack buffer below). */
    v2.newer = 0;
    CHECK(hostcall_enable_ex(buffer, PACKETS, q, &v2.v1) == HOSTCALL_OK);
    CHECK(hostcall_disable(buffer, q) == HOSTCALL_OK);
}

static int phase(void) {
    uint64_t lanes_served = 0;
    CHECK(hostcall_register_service(ADD, add_service, &lanes_served) == HOSTCALL_OK);
    CHECK(hostcall_buffer_size_for(HOSTCALL_PROTOCOL_PHASE, PACKETS) == HOSTCALL_PHASE_BUFFER_SIZE(PACKETS));
    CHECK(hostcall_buffer_size_for(HOSTCALL_PROTOCOL_STACK, PACKETS) == HOSTCALL_BUFFER_SIZE(PACKETS));
    CHECK(hostcall_buffer_alignment_for(HOSTCALL_PROTOCOL_PHASE) == HOSTCALL_PHASE_BUFFER_ALIGN);
    CHECK(hostcall_buffer_alignment_for(HOSTCALL_PROTOCOL_STACK) == HOSTCALL_BUFFER_ALIGN);
    CHECK(hostcall_buffer_size_for(7, PACKETS) == 0 && hostcall_buffer_alignment_for(7) == 0);
    CHECK(hostcall_buffer_size_for(HOSTCALL_PROTOCOL_PHASE, 1) == 0);

    const void *queue = (const void *)0x5000;
    void *buffer = alloc_for(HOSTCALL_PROTOCOL_PHASE);
    /* The bitmap, as ROCm hands it over: ceil(n / 32) zeroed words (here host memory). */
    uint32_t *bitmap = calloc(HOSTCALL_PHASE_OCCUPIED_WORDS(PACKETS), sizeof(uint32_t));
    CHECK(buffer && bitmap);
    phase_options_refused(buffer, bitmap);

    /* Passed in: the prefix points device code at it, and the calls claim through it. */
    hostcall_enable_options_t options = HOSTCALL_ENABLE_OPTIONS_INIT;
    options.protocol = HOSTCALL_PROTOCOL_PHASE;
    options.occupied = bitmap;
    options.device_ordinal = 1;
    CHECK(hostcall_enable_ex(buffer, PACKETS, queue, &options) == HOSTCALL_OK);
    const hostcall_phase_prefix_t *prefix = (const hostcall_phase_prefix_t *)buffer;
    CHECK(__atomic_load_n(&prefix->occupied, __ATOMIC_RELAXED) == (uint64_t)(uintptr_t)bitmap);
    CHECK(__atomic_load_n(&prefix->num_packets, __ATOMIC_RELAXED) == PACKETS);
    CHECK(hostcall_enable_ex(buffer, PACKETS, queue, &options) == HOSTCALL_ERR_ALREADY_ENABLED);
    phase_calls(buffer, bitmap);
    uint64_t req[1][8] = {{0}}, rep[1][2];
    CHECK(hostcall_emulated_call(buffer, PACKETS + 1, ADD, 1, (const uint64_t(*)[8])req, rep) ==
          HOSTCALL_ERR_PACKET_COUNT_MISMATCH);
    CHECK(hostcall_disable(buffer, queue) == HOSTCALL_OK);

    /* NULL: the library allocates it, outside the buffer, and frees it at disable. */
    options.occupied = NULL;
    CHECK(hostcall_enable_ex(buffer, PACKETS, queue, &options) == HOSTCALL_OK);
    uint64_t allocated = __atomic_load_n(&prefix->occupied, __ATOMIC_RELAXED);
    uint64_t start = (uint64_t)(uintptr_t)buffer;
    CHECK(allocated != 0 && allocated % 4 == 0);
    CHECK(allocated + 4 * HOSTCALL_PHASE_OCCUPIED_WORDS(PACKETS) <= start ||
          allocated >= start + HOSTCALL_PHASE_BUFFER_SIZE(PACKETS));
    phase_calls(buffer, (const uint32_t *)(uintptr_t)allocated);
    CHECK(hostcall_disable(buffer, queue) == HOSTCALL_OK);
    CHECK(hostcall_disable(buffer, queue) == HOSTCALL_ERR_NOT_ENABLED);

    /* Both protocols side by side on one listener; NULL options are the stack protocol. */
    void *stack = alloc_buffer(PACKETS);
    options.occupied = bitmap;
    CHECK(hostcall_enable_ex(buffer, PACKETS, queue, &options) == HOSTCALL_OK);
    CHECK(hostcall_enable_ex(stack, PACKETS, (const void *)0x5002, NULL) == HOSTCALL_OK);
    add_call(stack, 0xff, 1);
    add_call(buffer, 0xff, 2);
    CHECK(hostcall_disable(stack, (const void *)0x5002) == HOSTCALL_OK);
    CHECK(hostcall_disable(buffer, queue) == HOSTCALL_OK);
    free(stack);
    free(buffer);
    free(bitmap);
    printf("phase lanes served: %llu\n", (unsigned long long)lanes_served);
    printf("hostcall_test: %s\n", failures ? "phase failed" : "ok");
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "run";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(mode, "layout") == 0) return print_layout();
    if (strcmp(mode, "run") == 0) return run();
    if (strcmp(mode, "exit") == 0) return exit_without_disable();
    if (strcmp(mode, "builtins") == 0) return builtins();
    if (strcmp(mode, "phase") == 0) return phase();
    fprintf(stderr, "usage: %s [layout|run|exit|builtins|phase]\n", argv[0]);
    return 2;
}
