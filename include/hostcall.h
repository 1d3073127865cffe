/*
 * hostcall.h: the C interface of `hostcall`, a Rust implementation of AMD ROCm's GPU hostcall
 * protocol. The section numbers below are those of PROTOCOL.md, at the root of the project, which
 * describes the wire format in full.
 *
 * Part 1, the wire layout (buffers, packets, services, message descriptors, error replies), is
 * plain types, macros and static asserts: usable from C11, C++11, CUDA and HIP, host or device.
 * Part 2 declares the host library (libhostcall_capi.so / libhostcall_capi.a): ROCm's
 * `rochostcall.hpp` functions (getHostcallBufferSize, getHostcallBufferAlignment,
 * enableHostcalls, disableHostcalls) and this project's `hostcall_*` API. Define
 * HOSTCALL_LAYOUT_ONLY before including to get part 1 alone.
 *
 * All integers are little-endian. Every offset and size below is checked at compile time.
 */
#ifndef HOSTCALL_H_INCLUDED
#define HOSTCALL_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of hostcall this header belongs to: the version of the crates, and of the library
 * (capi/tests/c_program.rs checks that they agree). The shared library's SONAME carries the part
 * that names its ABI: libhostcall_capi.so.0.MINOR before 1.0, libhostcall_capi.so.MAJOR from 1.0. */
#define HOSTCALL_VERSION_MAJOR 0
#define HOSTCALL_VERSION_MINOR 1
#define HOSTCALL_VERSION_PATCH 0
#define HOSTCALL_STRINGIFY_(x) #x
#define HOSTCALL_STRINGIFY(x) HOSTCALL_STRINGIFY_(x)
/* "MAJOR.MINOR.PATCH" */
#define HOSTCALL_VERSION                                                                            \
    HOSTCALL_STRINGIFY(HOSTCALL_VERSION_MAJOR)                                                      \
    "." HOSTCALL_STRINGIFY(HOSTCALL_VERSION_MINOR) "." HOSTCALL_STRINGIFY(HOSTCALL_VERSION_PATCH)

/* A static assertion that works in C11 and in C++11 (and so in CUDA and HIP). */
#if defined(__cplusplus)
#define HOSTCALL_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define HOSTCALL_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* ============================================================================================ */
/* Part 1: the wire layout                                                                      */
/* ============================================================================================ */

/* Lanes in a wave; payload slots per packet. */
#define HOSTCALL_LANES 64
/* Request words per lane (the whole slot). */
#define HOSTCALL_SLOT_WORDS 8
/* Reply words per lane (the first words of the lane's slot). */
#define HOSTCALL_REPLY_WORDS 2

/* ---- Section 1: the stack protocol (ROCm's default ABI) ---- */

/* The start of a buffer: the fields device code reads. */
typedef struct hostcall_buffer_prefix {
    uint64_t headers;     /* address of hostcall_packet_header_t[num_packets] */
    uint64_t payloads;    /* address of hostcall_payload_t[num_packets] */
    uint64_t doorbell;    /* signal handle the device increments after a push */
    uint64_t free_stack;  /* tagged pointer: top of the free packets */
    uint64_t ready_stack; /* tagged pointer: top of the submitted packets */
    uint64_t index_mask;  /* next_power_of_two(num_packets) - 1 */
} hostcall_buffer_prefix_t;

/* One packet's header. */
typedef struct hostcall_packet_header {
    uint64_t next;       /* tagged pointer to the next packet of the stack holding this one */
    uint64_t activemask; /* bit i set: lane i's slot holds a request */
    uint32_t service;    /* service id (HOSTCALL_SERVICE_*) */
    uint32_t control;    /* HOSTCALL_CONTROL_* bits */
} hostcall_packet_header_t;

/* One packet's payload: lane i uses slots[i]. */
typedef struct hostcall_payload {
    uint64_t slots[HOSTCALL_LANES][HOSTCALL_SLOT_WORDS];
} hostcall_payload_t;

/* The buffer's alignment; headers start at HOSTCALL_HEADERS_OFFSET, payloads right after the
 * headers (aligned to 8). Size = HOSTCALL_BUFFER_SIZE(n); the library's
 * hostcall_buffer_size(n) / getHostcallBufferSize(n) compute the same. */
#define HOSTCALL_BUFFER_ALIGN 8
#define HOSTCALL_HEADERS_OFFSET 48
#define HOSTCALL_PAYLOADS_OFFSET(n) ((((size_t)HOSTCALL_HEADERS_OFFSET + (size_t)(n) * 24u) + 7u) & ~(size_t)7u)
#define HOSTCALL_BUFFER_SIZE(n) (HOSTCALL_PAYLOADS_OFFSET(n) + (size_t)(n) * 4096u)
/* The stack protocol needs at least 2 packets; this library accepts at most 2^24. */
#define HOSTCALL_MIN_PACKETS 2
#define HOSTCALL_MAX_PACKETS (1u << 24)

/* hostcall_packet_header_t.control */
#define HOSTCALL_CONTROL_READY 1u /* the packet holds a request the host has not answered */
/* This project's extension: the host answered at least one lane with an error reply. ROCm's
 * device code ignores it (reserved bits) and overwrites control on its next submit. */
#define HOSTCALL_CONTROL_HOST_ERROR 2u

HOSTCALL_STATIC_ASSERT(sizeof(hostcall_buffer_prefix_t) == 48, "buffer prefix size");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_buffer_prefix_t, headers) == 0, "prefix.headers");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_buffer_prefix_t, payloads) == 8, "prefix.payloads");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_buffer_prefix_t, doorbell) == 16, "prefix.doorbell");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_buffer_prefix_t, free_stack) == 24, "prefix.free_stack");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_buffer_prefix_t, ready_stack) == 32, "prefix.ready_stack");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_buffer_prefix_t, index_mask) == 40, "prefix.index_mask");
HOSTCALL_STATIC_ASSERT(sizeof(hostcall_packet_header_t) == 24, "packet header size");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_packet_header_t, next) == 0, "header.next");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_packet_header_t, activemask) == 8, "header.activemask");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_packet_header_t, service) == 16, "header.service");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_packet_header_t, control) == 20, "header.control");
HOSTCALL_STATIC_ASSERT(sizeof(hostcall_payload_t) == 4096, "payload size");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_payload_t, slots) == 0, "payload.slots");
HOSTCALL_STATIC_ASSERT(HOSTCALL_HEADERS_OFFSET == sizeof(hostcall_buffer_prefix_t), "headers offset");
HOSTCALL_STATIC_ASSERT(HOSTCALL_BUFFER_SIZE(2) == 48 + 2 * 24 + 2 * 4096, "buffer size formula");

/* ---- Section 2: the phase protocol (ROCm's opt-in ABI; needs no platform atomics) ---- */

/* The start of a phase-protocol buffer. */
typedef struct hostcall_phase_prefix {
    uint64_t device_phase; /* address of uint32_t[num_packets], flipped by the device */
    uint64_t host_phase;   /* address of uint32_t[num_packets], flipped by the host */
    uint64_t occupied;     /* address of the device-local uint32_t bitmap of claimed packets */
    uint64_t headers;      /* address of hostcall_phase_header_t[num_packets] */
    uint64_t payloads;     /* address of hostcall_payload_t[num_packets] */
    uint64_t doorbell;     /* signal handle the device increments */
    uint32_t num_packets;
} hostcall_phase_prefix_t;

/* One phase-protocol packet's header. */
typedef struct hostcall_phase_header {
    uint64_t activemask;
    uint32_t service;
} hostcall_phase_header_t;

HOSTCALL_STATIC_ASSERT(offsetof(hostcall_phase_prefix_t, device_phase) == 0, "phase.device_phase");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_phase_prefix_t, host_phase) == 8, "phase.host_phase");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_phase_prefix_t, occupied) == 16, "phase.occupied");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_phase_prefix_t, headers) == 24, "phase.headers");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_phase_prefix_t, payloads) == 32, "phase.payloads");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_phase_prefix_t, doorbell) == 40, "phase.doorbell");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_phase_prefix_t, num_packets) == 48, "phase.num_packets");
HOSTCALL_STATIC_ASSERT(sizeof(hostcall_phase_prefix_t) == 56, "phase prefix size");
HOSTCALL_STATIC_ASSERT(sizeof(hostcall_phase_header_t) == 16, "phase header size");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_phase_header_t, activemask) == 0, "phase header.activemask");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_phase_header_t, service) == 8, "phase header.service");

/* ---- Section 3: services ---- */

#define HOSTCALL_SERVICE_RESERVED 0u      /* always answered with an error */
#define HOSTCALL_SERVICE_FUNCTION_CALL 1u /* slot[0] = fn(out[2], in[7]) address, slot[1..8] inputs */
#define HOSTCALL_SERVICE_PRINTF 2u        /* message stream */
#define HOSTCALL_SERVICE_DEVMEM 3u        /* slot[0] != 0: free it; else allocate slot[1] bytes */
#define HOSTCALL_SERVICE_SANITIZER 4u     /* address-sanitizer report, once per packet */

/* The error reply of this project: reply word 0 = HOSTCALL_ERROR_REPLY, word 1 = the code. */
#define HOSTCALL_ERROR_REPLY UINT64_MAX
#define HOSTCALL_ERROR_UNKNOWN_SERVICE 1u  /* no service under the packet's id */
#define HOSTCALL_ERROR_SERVICE_PANICKED 2u /* the service's handler failed (panicked) */
#define HOSTCALL_ERROR_BAD_REQUEST 3u      /* malformed request for its service */
#define HOSTCALL_ERROR_REFUSED 4u          /* refused (a limit, an unknown address, no memory) */
#define HOSTCALL_ERROR_SHUTTING_DOWN 5u    /* the host is shutting down */

/* ---- Section 4: message streams (slot[0] of each call is a descriptor) ---- */

#define HOSTCALL_MSG_BEGIN 0x1ull        /* bit 0: first chunk of a message */
#define HOSTCALL_MSG_END 0x2ull          /* bit 1: last chunk */
#define HOSTCALL_MSG_RESERVED 0x1cull    /* bits 2..4: must be 0 */
#define HOSTCALL_MSG_LEN_SHIFT 5         /* bits 5..7: data words in this call, 0..=7 */
#define HOSTCALL_MSG_LEN_MASK 0x7ull
#define HOSTCALL_MSG_ID_SHIFT 8          /* bits 8..63: message id (56 bits) */
#define HOSTCALL_MSG_ID_MASK 0xffffffffffffffull
#define HOSTCALL_MSG_MAX_WORDS 7         /* data words per call (slot[1..=7]) */
#define HOSTCALL_MSG_LEN(descriptor) (((uint64_t)(descriptor) >> HOSTCALL_MSG_LEN_SHIFT) & HOSTCALL_MSG_LEN_MASK)
#define HOSTCALL_MSG_ID(descriptor) (((uint64_t)(descriptor) >> HOSTCALL_MSG_ID_SHIFT) & HOSTCALL_MSG_ID_MASK)
#define HOSTCALL_MSG_DESCRIPTOR(begin, end, len, id)                                                  \
    (((begin) ? HOSTCALL_MSG_BEGIN : 0ull) | ((end) ? HOSTCALL_MSG_END : 0ull) |                        \
     (((uint64_t)(len) & HOSTCALL_MSG_LEN_MASK) << HOSTCALL_MSG_LEN_SHIFT) |                            \
     (((uint64_t)(id) & HOSTCALL_MSG_ID_MASK) << HOSTCALL_MSG_ID_SHIFT))

/* ---- Section 6: where a kernel finds its buffer ---- */

/* Byte offset of `hidden_hostcall_buffer` in a kernel's implicit arguments. */
#define HOSTCALL_IMPLICITARG_OFFSET_V4 24 /* code-object ABI < 500 (8-byte slot 3) */
#define HOSTCALL_IMPLICITARG_OFFSET_V5 80 /* code-object ABI >= 500 (8-byte slot 10) */

/* ============================================================================================ */
/* Part 2: the host library                                                                     */
/* ============================================================================================ */
#if !defined(HOSTCALL_LAYOUT_ONLY)

/* ---- ROCm's rochostcall.hpp interface (C linkage) ---- */

/* Bytes a buffer of num_packets packets needs; 0 for a refused count (< 2 or > 2^24). */
size_t getHostcallBufferSize(uint32_t num_packets);
/* The alignment a buffer needs (8). */
uint32_t getHostcallBufferAlignment(void);
/* Initialises the buffer, starts the listener if none runs, serves the buffer for queue (one
 * distinct buffer per queue). The buffer is getHostcallBufferSize(num_packets) bytes and must stay
 * valid until disableHostcalls returns for it (or the process ends). False on failure: see
 * hostcall_last_error(). */
bool enableHostcalls(void *buffer, uint32_t num_packets, const void *queue);
/* Stops serving the buffer; afterwards it may be reused or freed. After the last buffer the
 * listener stops and its thread is joined. A failure is recorded for hostcall_last_error(). */
void disableHostcalls(void *buffer, const void *queue);

/* ---- This project's API: the same with status codes ---- */

/* Status codes (0 = success). */
#define HOSTCALL_OK 0
#define HOSTCALL_ERR_NULL 1                   /* a required pointer is null */
#define HOSTCALL_ERR_MISALIGNED 2             /* buffer not aligned to hostcall_buffer_alignment() */
#define HOSTCALL_ERR_PACKET_COUNT 3           /* fewer than 2 or more than 2^24 packets */
#define HOSTCALL_ERR_ALREADY_ENABLED 4        /* buffer already enabled (for any queue) */
#define HOSTCALL_ERR_OTHER_LISTENER 5         /* buffer enabled or served on another listener */
#define HOSTCALL_ERR_OVERLAPS 6               /* buffer overlaps an enabled buffer */
#define HOSTCALL_ERR_QUEUE_TAKEN 7            /* the queue already has a buffer */
#define HOSTCALL_ERR_NOT_ENABLED 8            /* buffer not enabled */
#define HOSTCALL_ERR_WRONG_QUEUE 9            /* buffer enabled for another queue */
#define HOSTCALL_ERR_PACKET_COUNT_MISMATCH 10 /* buffer enabled with another packet count */
#define HOSTCALL_ERR_FROM_LISTENER 11         /* called from a service (the listener thread) */
#define HOSTCALL_ERR_SERVICE_TAKEN 12         /* service id already registered */
#define HOSTCALL_ERR_TIMED_OUT 13             /* an emulated call got no answer in time */
#define HOSTCALL_ERR_THREAD 14                /* the listener thread could not start */
#define HOSTCALL_ERR_PANIC 15                 /* an internal error was caught */
#define HOSTCALL_ERR_OTHER 16                 /* anything else */

/* How long hostcall_emulated_call waits for a packet and for its reply. */
#define HOSTCALL_EMULATED_TIMEOUT_MS 10000

size_t hostcall_buffer_size(uint32_t num_packets);
uint32_t hostcall_buffer_alignment(void);
int hostcall_enable(void *buffer, uint32_t num_packets, const void *queue);
int hostcall_disable(void *buffer, const void *queue);
/* The message of the last failed call on this thread ("" if none); valid until the next failure
 * on this thread. */
const char *hostcall_last_error(void);

/* A service: reads one lane's 8 request words, writes its 2 reply words and returns 0, or returns
 * HOSTCALL_ERROR_* (1..5) to answer the lane with an error reply (other values: REFUSED). Called
 * on the listener thread; must not throw or longjmp out. */
typedef int (*hostcall_service_fn)(const uint64_t request[8], uint64_t reply[2], void *ctx);
/* Registers fn (with ctx) as service id for every buffer enabled above. */
int hostcall_register_service(uint32_t id, hostcall_service_fn fn, void *ctx);
int hostcall_unregister_service(uint32_t id);

/* One hostcall by an emulated wave (CPU thread) with activemask, through the real producer path
 * on an enabled buffer: lane i sends requests[i] to service and gets replies[i]. Both arrays have
 * at least 64 - clz(activemask) entries; inactive entries are neither read nor written. An error
 * reply of the host ({HOSTCALL_ERROR_REPLY, code}) still returns HOSTCALL_OK. */
int hostcall_emulated_call(void *buffer, uint32_t num_packets, uint32_t service, uint64_t activemask,
                           const uint64_t (*requests)[8], uint64_t (*replies)[2]);

#endif /* !HOSTCALL_LAYOUT_ONLY */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HOSTCALL_H_INCLUDED */
