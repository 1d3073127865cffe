/*
 * hostcall.h: the C interface of `hostcall`, a Rust implementation of AMD ROCm's GPU hostcall
 * protocol. The section numbers below are those of PROTOCOL.md, at the root of the project, which
 * describes the wire format in full.
 *
 * Part 1, the wire layout (the buffers and packets of the stack, phase and line protocols, the
 * LLVM libc RPC buffer's offsets and sizes, services, message descriptors, error replies), is
 * plain types, macros and static asserts:
 * usable from C11, C++11, CUDA and HIP, host or device (and from C99 with GCC or Clang).
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

/* A member's alignment (written before its type) and a type's alignment: C++11's and C11's
 * keywords, GCC's and Clang's spellings in C before C11 (-std=c99 -pedantic stays quiet). */
#if defined(__cplusplus)
#define HOSTCALL_ALIGNAS(n) alignas(n)
#define HOSTCALL_ALIGNOF(type) alignof(type)
#elif (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L) || !defined(__GNUC__)
#define HOSTCALL_ALIGNAS(n) _Alignas(n)
#define HOSTCALL_ALIGNOF(type) _Alignof(type)
#else
#define HOSTCALL_ALIGNAS(n) __attribute__((aligned(n)))
#define HOSTCALL_ALIGNOF(type) __alignof__(type)
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

/* ---- Section 1: the stack protocol (ROCm's default ABI, in every ROCm release) ---- */

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

/* ---- Section 2: the phase protocol (ROCm's opt-in ABI, USE_NEW_HOSTCALL_IMPL builds; needs no platform atomics) ---- */

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

/* Where this library puts a phase buffer's arrays: each on a 64-byte line of its own, at these
 * offsets from the buffer's start (device code finds them through the prefix, so only the
 * library relies on them): device_phase, the in-buffer occupied bitmap (unused when the bitmap is
 * passed to hostcall_enable_ex or allocated by it, as it always is there), host_phase, headers,
 * payloads. Size = HOSTCALL_PHASE_BUFFER_SIZE(n), alignment HOSTCALL_PHASE_BUFFER_ALIGN; the
 * library's hostcall_buffer_size_for / hostcall_buffer_alignment_for compute the same. */
#define HOSTCALL_PHASE_BUFFER_ALIGN 64
#define HOSTCALL_PHASE_LINE_UP(x) ((((size_t)(x)) + 63u) & ~(size_t)63u)
/* Words (uint32_t) of the occupied bitmap for n packets: ceil(n / 32). */
#define HOSTCALL_PHASE_OCCUPIED_WORDS(n) (((size_t)(n) + 31u) / 32u)
#define HOSTCALL_PHASE_DEVICE_PHASE_OFFSET 64
#define HOSTCALL_PHASE_OCCUPIED_OFFSET(n) HOSTCALL_PHASE_LINE_UP(HOSTCALL_PHASE_DEVICE_PHASE_OFFSET + 4u * (size_t)(n))
#define HOSTCALL_PHASE_HOST_PHASE_OFFSET(n)                                                           \
    HOSTCALL_PHASE_LINE_UP(HOSTCALL_PHASE_OCCUPIED_OFFSET(n) + 4u * HOSTCALL_PHASE_OCCUPIED_WORDS(n))
#define HOSTCALL_PHASE_HEADERS_OFFSET(n) HOSTCALL_PHASE_LINE_UP(HOSTCALL_PHASE_HOST_PHASE_OFFSET(n) + 4u * (size_t)(n))
#define HOSTCALL_PHASE_PAYLOADS_OFFSET(n) HOSTCALL_PHASE_LINE_UP(HOSTCALL_PHASE_HEADERS_OFFSET(n) + 16u * (size_t)(n))
#define HOSTCALL_PHASE_BUFFER_SIZE(n) (HOSTCALL_PHASE_PAYLOADS_OFFSET(n) + (size_t)(n) * 4096u)

HOSTCALL_STATIC_ASSERT(HOSTCALL_PHASE_BUFFER_SIZE(3) == 320 + 3 * 4096, "phase buffer size formula");

/* ---- Section 3: services ---- */

#define HOSTCALL_SERVICE_RESERVED 0u      /* always answered with an error */
#define HOSTCALL_SERVICE_FUNCTION_CALL 1u /* slot[0] = fn(out[2], in[7]) address, slot[1..8] inputs */
#define HOSTCALL_SERVICE_PRINTF 2u        /* message stream */
#define HOSTCALL_SERVICE_DEVMEM 3u        /* slot[0] != 0: free it; else allocate slot[1] bytes */
#define HOSTCALL_SERVICE_SANITIZER 4u     /* address-sanitizer report, once per packet */

/* The error reply of this project: reply word 0 = HOSTCALL_ERROR_REPLY, word 1 = the code.
 * Except for DEVMEM, whose device code takes any non-zero word 0 as the address of its block:
 * every failure of a DEVMEM call (refused, unknown address, no such service, ...) is answered
 * {0, code}, a null address. */
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

/* ---- Section 9: the line protocol (this project's own; needs no platform atomics) ---- */

/* Every shared word of a line buffer's request and reply blocks is a line word: the 7-bit
 * sequence of the call that wrote it in the top bits and 57 data bits below, stored and loaded as
 * one aligned 8-byte access, so a reader that sees the sequence it expects has the data stored
 * with it. Each packet counts its calls: the first after the host's init has sequence 1, then +1,
 * and after HOSTCALL_LINE_SEQ_MAX comes 1 again; 0 is never a sequence (the zeroed buffer holds no
 * call). At the claims of the calls with sequence HOSTCALL_LINE_SEQ_MAX, and of 1 after a wrap,
 * the wave zeroes every request and reply word of the packet (not the head) and then issues a
 * release fence. A 64-bit value v travels as its low 57 bits, HOSTCALL_LINE_WORD(v, seq), with its
 * top 7 bits (v >> 57) packed into a lane's last word: see the request and reply blocks below.
 * Bits marked reserved are stored as zero and ignored by the host. The buffer is served by the
 * Rust crates (hostcall_core::line); this library's hostcall_enable_ex serves only ROCm's two
 * protocols. */
#define HOSTCALL_LINE_SEQ_BITS 7u
#define HOSTCALL_LINE_SEQ_MAX 127u
#define HOSTCALL_LINE_DATA_MASK ((1ull << 57) - 1ull)
#define HOSTCALL_LINE_WORD(data, seq) (((uint64_t)(seq) << 57) | ((uint64_t)(data) & HOSTCALL_LINE_DATA_MASK))
#define HOSTCALL_LINE_SEQ_OF(word) ((uint32_t)((uint64_t)(word) >> 57))
#define HOSTCALL_LINE_DATA_OF(word) ((uint64_t)(word) & HOSTCALL_LINE_DATA_MASK)
/* Line words per lane: a request (HOSTCALL_SLOT_WORDS words' low bits, then their top bits) and a
 * reply (HOSTCALL_REPLY_WORDS words' low bits, then their top bits). */
#define HOSTCALL_LINE_REQUEST_LANE_WORDS 9
#define HOSTCALL_LINE_REPLY_LANE_WORDS 3

/* The start of a line-protocol buffer, written by the host once, before the hand-off (device code
 * finds every array through it). */
typedef struct hostcall_line_prefix {
    uint64_t requests;   /* address of hostcall_line_request_t[num_packets] */
    uint64_t replies;    /* address of hostcall_line_reply_t[num_packets] */
    uint64_t device_seq; /* address of uint32_t[num_packets]: each packet's last sequence, written by
                          * the wave holding it (device only) */
    uint64_t occupied;   /* address of the uint32_t bitmap of claimed packets, as in the phase
                          * protocol (device only) */
    uint64_t served;     /* address of uint32_t[num_packets]: each packet's last sequence answered,
                          * written by the host (host only) */
    uint64_t doorbell;   /* signal handle the device may increment after a submit */
    uint32_t num_packets;
} hostcall_line_prefix_t;

/* One packet's request block, written only by the wave holding the packet (between its claim and
 * its submit; zeroed by it at the two refresh claims per sequence cycle): the head and the mask
 * word, then every lane's line words, contiguous (a one-lane call's words are bytes 0..88, the
 * block's first two 64-byte lines). seq is the call's sequence, a_k lane i's request word k:
 *   lanes[i][k] = HOSTCALL_LINE_WORD(a_k, seq) for k < 8,
 *   lanes[i][8] = HOSTCALL_LINE_WORD(sum over k of (a_k >> 57) << (7 k), seq) (bit 56 reserved).
 * The host decodes a_k = HOSTCALL_LINE_DATA_OF(lanes[i][k])
 *   | ((HOSTCALL_LINE_DATA_OF(lanes[i][8]) >> (7 k)) & 0x7f) << 57. */
typedef struct hostcall_line_request {
    HOSTCALL_ALIGNAS(64) uint64_t head; /* WORD((mask >> 57) << 32 | service, seq): the word the host
                                         * polls; bits 39..57 reserved */
    uint64_t mask;                      /* WORD(mask, seq): the activemask's low 57 bits */
    uint64_t lanes[HOSTCALL_LANES][HOSTCALL_LINE_REQUEST_LANE_WORDS];
    uint64_t reserved[6];               /* zero; never read by the host */
} hostcall_line_request_t;              /* 4672 bytes */

/* One packet's reply block, written by the host (and zeroed by the wave at its refresh claims);
 * lane i polls lanes[i] until all 3 words carry its call's sequence:
 *   lanes[i][0] = WORD(r0, seq), lanes[i][1] = WORD(r1, seq),
 *   lanes[i][2] = WORD((r0 >> 57) | (r1 >> 57) << 7, seq) (bits 14..57 reserved). */
typedef struct hostcall_line_reply {
    HOSTCALL_ALIGNAS(64) uint64_t lanes[HOSTCALL_LANES][HOSTCALL_LINE_REPLY_LANE_WORDS];
} hostcall_line_reply_t;                /* 1536 bytes */

HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_REQUEST_LANE_WORDS == HOSTCALL_SLOT_WORDS + 1, "line request words");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_REPLY_LANE_WORDS == HOSTCALL_REPLY_WORDS + 1, "line reply words");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_SEQ_MAX == (1u << HOSTCALL_LINE_SEQ_BITS) - 1u, "line seq max");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_WORD(0x1ffdeadbeefcafeull, 7u) == 0x0fffdeadbeefcafeull, "line word");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_DATA_OF(HOSTCALL_LINE_WORD(~0ull, 127u)) == HOSTCALL_LINE_DATA_MASK,
                       "line data round trip");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_DATA_OF(HOSTCALL_LINE_WORD(0x1ffdeadbeefcafeull, 127u)) == 0x1ffdeadbeefcafeull,
                       "line data");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_SEQ_OF(HOSTCALL_LINE_WORD(~0ull, 127u)) == 127u, "line seq round trip");
HOSTCALL_STATIC_ASSERT(sizeof(hostcall_line_prefix_t) == 56, "line prefix size");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_prefix_t, requests) == 0, "line.requests");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_prefix_t, replies) == 8, "line.replies");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_prefix_t, device_seq) == 16, "line.device_seq");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_prefix_t, occupied) == 24, "line.occupied");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_prefix_t, served) == 32, "line.served");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_prefix_t, doorbell) == 40, "line.doorbell");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_prefix_t, num_packets) == 48, "line.num_packets");
HOSTCALL_STATIC_ASSERT(sizeof(hostcall_line_request_t) == 4672, "line request size");
HOSTCALL_STATIC_ASSERT(HOSTCALL_ALIGNOF(hostcall_line_request_t) == 64, "line request alignment");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_request_t, head) == 0, "line request.head");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_request_t, mask) == 8, "line request.mask");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_request_t, lanes) == 16, "line request.lanes");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_request_t, lanes[1]) == 16 + 72, "line request.lanes stride");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_request_t, reserved) == 4624, "line request.reserved");
HOSTCALL_STATIC_ASSERT(sizeof(hostcall_line_reply_t) == 1536, "line reply size");
HOSTCALL_STATIC_ASSERT(HOSTCALL_ALIGNOF(hostcall_line_reply_t) == 64, "line reply alignment");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_reply_t, lanes) == 0, "line reply.lanes");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_line_reply_t, lanes[1]) == 24, "line reply.lanes stride");

/* Where this project puts a line buffer's arrays (hostcall_core::line::Layout, in the Rust
 * crates): each on a 64-byte line of its own, at these offsets from the buffer's start (device
 * code finds them through the prefix, so only the host side relies on them): device_seq,
 * occupied, served, requests, replies. Size = HOSTCALL_LINE_BUFFER_SIZE(n) for 2 ..=
 * HOSTCALL_MAX_PACKETS packets, alignment HOSTCALL_LINE_BUFFER_ALIGN (line::buffer_size and
 * line::buffer_align compute the same). A runtime may keep device_seq and occupied in device
 * memory instead: the host never touches them after init. */
#define HOSTCALL_LINE_BUFFER_ALIGN 64
#define HOSTCALL_LINE_ALIGN_UP(x) ((((size_t)(x)) + 63u) & ~(size_t)63u)
/* Words (uint32_t) of the occupied bitmap for n packets: ceil(n / 32). */
#define HOSTCALL_LINE_OCCUPIED_WORDS(n) (((size_t)(n) + 31u) / 32u)
#define HOSTCALL_LINE_DEVICE_SEQ_OFFSET 64
#define HOSTCALL_LINE_OCCUPIED_OFFSET(n) HOSTCALL_LINE_ALIGN_UP(HOSTCALL_LINE_DEVICE_SEQ_OFFSET + 4u * (size_t)(n))
#define HOSTCALL_LINE_SERVED_OFFSET(n)                                                                \
    HOSTCALL_LINE_ALIGN_UP(HOSTCALL_LINE_OCCUPIED_OFFSET(n) + 4u * HOSTCALL_LINE_OCCUPIED_WORDS(n))
#define HOSTCALL_LINE_REQUESTS_OFFSET(n) HOSTCALL_LINE_ALIGN_UP(HOSTCALL_LINE_SERVED_OFFSET(n) + 4u * (size_t)(n))
#define HOSTCALL_LINE_REPLIES_OFFSET(n) HOSTCALL_LINE_ALIGN_UP(HOSTCALL_LINE_REQUESTS_OFFSET(n) + 4672u * (size_t)(n))
#define HOSTCALL_LINE_BUFFER_SIZE(n) (HOSTCALL_LINE_REPLIES_OFFSET(n) + (size_t)(n) * 1536u)

HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_DEVICE_SEQ_OFFSET >= sizeof(hostcall_line_prefix_t), "line device_seq offset");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_OCCUPIED_OFFSET(3) == 128, "line occupied offset formula");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_SERVED_OFFSET(3) == 192, "line served offset formula");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_REQUESTS_OFFSET(3) == 256, "line requests offset formula");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_REPLIES_OFFSET(3) == 14272, "line replies offset formula");
HOSTCALL_STATIC_ASSERT(HOSTCALL_LINE_BUFFER_SIZE(3) == 18880, "line buffer size formula");

/* ---- LLVM libc's GPU RPC (libc/shared/rpc.h @039da685; hostcall_core::rpc) ---- */

/* A buffer of P ports of L lanes (L = the client's warp or wave width): the host mailbox
 * uint32_t[P] at 0 (the client's inbox), the device mailbox uint32_t[P] at 4P, the headers
 * {uint64_t mask; uint32_t opcode; uint32_t pad;}[P] at 8P, the lane buffers uint64_t[P][L][8] at
 * 24P; alignment 8. The client object (the device symbol HOSTCALL_RPC_CLIENT_SYMBOL) is
 * HOSTCALL_RPC_CLIENT_SIZE bytes: port_count, four device pointers, the lock bits; the host builds
 * it with hostcall_rpc_client_object and copies it into the symbol before the first launch. Both
 * sizes hold for this rpc.h only: the wire format has no version field. */
#define HOSTCALL_RPC_MAX_PORTS 4096u
#define HOSTCALL_RPC_MAX_LANES 64u
#define HOSTCALL_RPC_CLIENT_SIZE 552u
#define HOSTCALL_RPC_CLIENT_SYMBOL "__llvm_rpc_client"
#define HOSTCALL_RPC_BUFFER_ALIGN 8
#define HOSTCALL_RPC_DEVICE_MAILBOX_OFFSET(p) (4u * (size_t)(p))
#define HOSTCALL_RPC_HEADERS_OFFSET(p) (8u * (size_t)(p))
#define HOSTCALL_RPC_LANES_OFFSET(p) (24u * (size_t)(p))
#define HOSTCALL_RPC_BUFFER_SIZE(p, l) (24u * (size_t)(p) + 64u * (size_t)(p) * (size_t)(l))

HOSTCALL_STATIC_ASSERT(HOSTCALL_RPC_BUFFER_SIZE(1, 1) == 88, "rpc buffer size formula");
HOSTCALL_STATIC_ASSERT(HOSTCALL_RPC_BUFFER_SIZE(4096, 32) == 8486912, "rpc buffer size formula");

/* ============================================================================================ */
/* Part 2: the host library                                                                     */
/* ============================================================================================ */
#if !defined(HOSTCALL_LAYOUT_ONLY)

/* Pointer contracts. Every function checks what can be checked of the pointers it takes (null,
 * alignment, overlap with the memory the listener shares) and answers a violation with its status
 * code; what cannot be checked (that the memory is really there, and stays there) is stated with
 * each function. Nothing the library is given is dereferenced as more than the contract says: a
 * pointer documented "any alignment" is read bytewise, arrays that may overlap are read whole
 * before anything is written. `queue` arguments are keys, compared and never dereferenced.
 *
 * Built-in services: from the first enable on, PRINTF (to this process's stdout and stderr),
 * DEVMEM (blocks of host memory, refused with {0, code} beyond the library's limits) and
 * SANITIZER (device AddressSanitizer reports, through the process's ASan runtime where it has one,
 * else to stderr) are served, as ROCm's runtime serves them, so ROCm's device printf and device
 * malloc work through enableHostcalls. FUNCTION_CALL is served only after
 * hostcall_enable_function_calls_unsafe(). An aborting SANITIZER report ends the process (as in
 * ROCm) only after hostcall_allow_device_to_end_process(1); by default it is printed and counted
 * and the process goes on. */

/* ---- ROCm's rochostcall.hpp interface (C linkage): the stack protocol ---- */

/* Bytes a buffer of num_packets packets needs; 0 for a refused count (< 2 or > 2^24). */
size_t getHostcallBufferSize(uint32_t num_packets);
/* The alignment a buffer needs (8). */
uint32_t getHostcallBufferAlignment(void);
/* Initialises the buffer, starts the listener if none runs, serves the buffer for queue (one
 * distinct buffer per queue). The buffer is getHostcallBufferSize(num_packets) bytes, aligned to
 * getHostcallBufferAlignment() (checked), and must stay valid until disableHostcalls returns for
 * it (or the process ends). False on failure: see hostcall_last_error(). */
bool enableHostcalls(void *buffer, uint32_t num_packets, const void *queue);
/* Stops serving the buffer; afterwards it may be reused or freed. After the last buffer the
 * listener stops and its thread is joined. ROCm's void signature: to learn the result, call
 * hostcall_disable (the same disable, returning a status), or read hostcall_last_error() after it
 * ("" when it succeeded: every successful call clears it). */
void disableHostcalls(void *buffer, const void *queue);

/* ---- This project's API: the same with status codes ---- */

/* Status codes (0 = success). */
#define HOSTCALL_OK 0
#define HOSTCALL_ERR_NULL 1                   /* a required pointer is null */
#define HOSTCALL_ERR_MISALIGNED 2             /* a pointer not aligned as its contract says */
#define HOSTCALL_ERR_PACKET_COUNT 3           /* fewer than 2 or more than 2^24 packets */
#define HOSTCALL_ERR_ALREADY_ENABLED 4        /* buffer already enabled (for any queue) */
#define HOSTCALL_ERR_OTHER_LISTENER 5         /* buffer enabled or served on another listener */
#define HOSTCALL_ERR_OVERLAPS 6               /* memory overlaps an enabled buffer (or its bitmap) */
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
#define HOSTCALL_ERR_OPTIONS 17               /* hostcall_enable_options_t (or a wait policy) refused */
#define HOSTCALL_ERR_RPC_CLIENT_SIZE 18       /* the device's RPC client symbol has another size */
#define HOSTCALL_ERR_MEMORY 19                /* the memory asked for does not fit here (below) */
#define HOSTCALL_ERR_NOT_REGISTERED 20        /* no service is registered under the id */
#define HOSTCALL_ERR_IN_LOG_CALLBACK 21       /* not allowed inside the log callback (below) */
#define HOSTCALL_ERR_UNKNOWN_REASON 22        /* not a HOSTCALL_REASON_* (hostcall_count_reason) */

/* How long hostcall_emulated_call waits for a packet and for its reply. */
#define HOSTCALL_EMULATED_TIMEOUT_MS 10000

/* hostcall_buffer_size, hostcall_buffer_alignment, hostcall_enable, hostcall_disable: ROCm's four
 * functions above with status codes (the stack protocol). hostcall_enable checks buffer for null
 * and for alignment to hostcall_buffer_alignment(). queue names the queue (never dereferenced)
 * and must not be NULL: enable and disable refuse a NULL queue with HOSTCALL_ERR_NULL (it would
 * name every NULL enable alike); enableHostcalls returns false for it. */
size_t hostcall_buffer_size(uint32_t num_packets);
uint32_t hostcall_buffer_alignment(void);
int hostcall_enable(void *buffer, uint32_t num_packets, const void *queue);
int hostcall_disable(void *buffer, const void *queue);
/* The message of the last call on this thread if it failed, "" if it succeeded: every function
 * of this library but hostcall_last_error and hostcall_status_string clears it when it succeeds
 * and sets it when it fails. Valid until the next call into the library on this thread. */
const char *hostcall_last_error(void);
/* What a status code (HOSTCALL_OK, HOSTCALL_ERR_*) means: a static string, "unknown status code"
 * for any other value. */
const char *hostcall_status_string(int code);

/* ---- Memory ---- */

/* Which memory the library serves with: what it allocates for devices (DEVMEM blocks, so ROCm's
 * device malloc and LLVM libc's MALLOC / FREE; the phase protocol's occupied bitmaps when none is
 * passed in) and where it puts the doorbell whose handle goes into every buffer. Buffers are
 * still the caller's: allocate them where the device reaches them (ROCm fine-grained memory;
 * CUDA pinned, device-mapped host memory, cuMemHostAlloc with DEVICEMAP).
 *   HOSTCALL_MEMORY_AUTO  the platform's: HSA where an AMD GPU is found; else CUDA where a CUDA
 *                         device is found (a library built with the `cuda` feature: device memory
 *                         from a stream-ordered pool, whose calls never wait for a running kernel,
 *                         its frees on a side thread; the doorbell in pinned, mapped memory); else
 *                         host memory, which only emulated waves reach (the reason says why, and a
 *                         CUDA driver present in a build without the feature is warned about)
 *   HOSTCALL_MEMORY_HOST  host memory
 *   HOSTCALL_MEMORY_HSA   HSA memory (GPU 0), or HOSTCALL_ERR_MEMORY
 *   HOSTCALL_MEMORY_CUDA  CUDA memory (device 0), or HOSTCALL_ERR_MEMORY (also in a library built
 *                         without the `cuda` feature)
 * Without a call to hostcall_set_memory, the environment variable HOSTCALL_MEMORY names it (auto,
 * host, hsa, cuda; unset: auto), read by the first call that needs the runtime (an enable, a
 * service registration). */
#define HOSTCALL_MEMORY_AUTO 0
#define HOSTCALL_MEMORY_HOST 1
#define HOSTCALL_MEMORY_HSA 2
#define HOSTCALL_MEMORY_CUDA 3
/* Chooses the memory (HOSTCALL_MEMORY_*); call it before the first enable or service
 * registration. Returns HOSTCALL_OK, or HOSTCALL_ERR_MEMORY with the reason in
 * hostcall_last_error() and nothing set up (choose again): an unknown kind, memory missing from
 * this build or machine, or a runtime already serving with another memory (the memory in use is
 * accepted). */
int hostcall_set_memory(uint32_t kind);
/* Which memory the library serves with and why, in words ("cuda: CUDA device 0 (...)", "host: no
 * device memory fits, ..."), choosing it as the first enable would if nothing has yet. NULL on
 * failure (a HOSTCALL_MEMORY that does not fit: see hostcall_last_error()). Valid for the life of
 * the process. */
const char *hostcall_memory_reason(void);

/* ---- Logs ---- */

/* The library logs the lifecycle (listener start and stop, buffers served, the backend chosen) at
 * INFO, each enable and disable and the backend's probing at DEBUG, each call of a C service and
 * each emulated call at TRACE (nothing is formatted at a level no one listens to), and every
 * refusal that loses device output (a budget, a bad free, an unknown service, ...) at WARN,
 * rate-limited: at most 10 lines a kind per 10 s, the next line saying how many were suppressed.
 * Without a callback they go to stderr ("hostcall: LEVEL module: text") at the level the
 * environment variable HOSTCALL_LOG names (off, error, warn, info, debug, trace; unset: warn),
 * read at the first call into the library. */
#define HOSTCALL_LOG_OFF 0
#define HOSTCALL_LOG_ERROR 1
#define HOSTCALL_LOG_WARN 2
#define HOSTCALL_LOG_INFO 3
#define HOSTCALL_LOG_DEBUG 4
#define HOSTCALL_LOG_TRACE 5
/* Called with each line at the callback's level or more severe: level (HOSTCALL_LOG_ERROR..
 * HOSTCALL_LOG_TRACE), the module that logged and the text (both valid for the call only), and
 * user. Called on any of the library's threads (the listener's included), never under the
 * library's locks nor during its set-up: a line logged inside a hostcall_* call is delivered
 * just before that call returns (before its hostcall_last_error() is set), so the callback may
 * call the library (a line those calls log is delivered after the callback returns, never
 * inside it); hostcall_set_log_callback from inside it is refused with
 * HOSTCALL_ERR_IN_LOG_CALLBACK (nothing changed). It must not throw or longjmp. */
typedef void (*hostcall_log_fn)(int level, const char *target, const char *message, void *user);
/* Sends the lines at min_level (HOSTCALL_LOG_*) or more severe to fn instead of stderr; fn NULL
 * goes back to stderr at HOSTCALL_LOG's level. Returns HOSTCALL_OK once no thread runs the
 * callback it replaced (its user may be freed then: it is never called again);
 * HOSTCALL_ERR_IN_LOG_CALLBACK from inside the callback; HOSTCALL_ERR_OTHER in a process that
 * has a Rust `log` logger of its own (the lines go there). */
int hostcall_set_log_callback(hostcall_log_fn fn, int min_level, void *user);

/* ---- Statistics ---- */

/* Why something was refused: the index of its count in `refusals` below. A count is a lane for
 * what a service finds in one lane (budgets, bad frees, allocation failures, bad requests, a lane
 * handler's panic), every lane of the packet for what answers a whole packet (unknown service,
 * shutting down), one finding for a malformed packet, one message for the printf limits
 * (FOREIGN_MESSAGE: a message chunk naming a message another lane has open: a guessed id), one
 * request for STALLED_REQUEST (a line request still incomplete after line::STALL_LOOKS looks,
 * reported once per sequence, still served if it completes). */
#define HOSTCALL_REASON_UNKNOWN_SERVICE 0
#define HOSTCALL_REASON_MALFORMED_PACKET 1
#define HOSTCALL_REASON_BAD_REQUEST 2
#define HOSTCALL_REASON_OPEN_MESSAGES 3
#define HOSTCALL_REASON_HELD_BYTES 4
#define HOSTCALL_REASON_FOREIGN_MESSAGE 5
#define HOSTCALL_REASON_MESSAGE_SIZE 6
#define HOSTCALL_REASON_PRINTF_WORK 7
#define HOSTCALL_REASON_PRINTF_OUTPUT 8
#define HOSTCALL_REASON_DEVMEM_BYTES 9
#define HOSTCALL_REASON_DEVMEM_COUNT 10
#define HOSTCALL_REASON_DEVMEM_SIZE 11
#define HOSTCALL_REASON_BAD_FREE 12
#define HOSTCALL_REASON_ALLOCATION_FAILURE 13
#define HOSTCALL_REASON_HANDLER_PANIC 14
#define HOSTCALL_REASON_SHUTTING_DOWN 15
/* An LLVM-RPC call its buffer's policy has off (or naming a FILE it may not use); a lane's stream
 * longer than the buffer's limit; an fopen past the buffer's budget of open files. Each is also
 * logged at WARN, rate-limited. */
#define HOSTCALL_REASON_RPC_REFUSED 16
#define HOSTCALL_REASON_RPC_STREAM_LENGTH 17
#define HOSTCALL_REASON_RPC_OPEN_FILES 18
#define HOSTCALL_REASON_STALLED_REQUEST 19
/* A service call that ran past its listener's stuck_after (one count per call). */
#define HOSTCALL_REASON_STUCK_SERVICE 20
#define HOSTCALL_REASON_SLOTS 32 /* room in `refusals`; `reasons` says how many are counted */
/* The line protocol's number, as hostcall_buffer_stats_t reports a protocol (enable refuses it). */
#define HOSTCALL_PROTOCOL_LINE 2u
#define HOSTCALL_PROTOCOL_RPC 3u /* an LLVM libc GPU RPC buffer (hostcall_enable_ex: the rpc_* options) */

/* The statistics structs are versioned by their first field: set `size` to sizeof(the struct)
 * before the call. The library writes the fields it knows and zeroes the rest up to `size`; a
 * `size` below this header's struct or above HOSTCALL_STATS_MAX_SIZE is refused
 * (HOSTCALL_ERR_OPTIONS) before anything is written. */
#define HOSTCALL_STATS_MAX_SIZE 4096u

/* What the listener of the enabled buffers counted so far. */
typedef struct hostcall_stats {
    uint32_t size;                  /* sizeof(hostcall_stats_t), set by the caller */
    uint32_t reasons;               /* entries of refusals this library counts */
    uint64_t packets;               /* packets served (every service, unknown ids included) */
    uint64_t lane_calls;            /* lanes over those packets */
    uint64_t errors;                /* lanes answered with an error reply */
    uint64_t unknown_service_packets;
    uint64_t malformed;             /* malformed shared state found */
    uint64_t doorbell_wakes;        /* doorbell waits ended by a ring */
    uint64_t timeout_polls;         /* doorbell waits ended by their timeout */
    uint64_t empty_scans;           /* polls that found nothing */
    uint64_t log_lines_suppressed;  /* by the rate limit */
    uint64_t buffers;               /* buffers enabled now */
    uint64_t refusals[HOSTCALL_REASON_SLOTS]; /* by HOSTCALL_REASON_* */
} hostcall_stats_t;

/* One enabled buffer's counters. */
typedef struct hostcall_buffer_stats {
    uint32_t size;        /* sizeof(hostcall_buffer_stats_t), set by the caller */
    uint32_t protocol;    /* HOSTCALL_PROTOCOL_* */
    uint64_t num_packets; /* its packets */
    uint64_t packets;     /* packets served from it */
    uint64_t lane_calls;
    uint64_t errors;
    uint64_t refusals[HOSTCALL_REASON_SLOTS];
} hostcall_buffer_stats_t;

/* One service's counters and timings. Times are log-scale bucket bounds in nanoseconds (0: none
 * counted; UINT64_MAX: past the longest bucket); the queue wait is from the start of the poll that
 * found a packet to the start of its service. */
typedef struct hostcall_service_stats {
    uint32_t size; /* sizeof(hostcall_service_stats_t), set by the caller */
    uint32_t id;   /* the service id asked for */
    uint64_t packets;
    uint64_t lane_calls;
    uint64_t errors;
    uint64_t service_ns_p50;
    uint64_t service_ns_p99;
    uint64_t queue_wait_ns_p50;
    uint64_t queue_wait_ns_p99;
} hostcall_service_stats_t;

HOSTCALL_STATIC_ASSERT(sizeof(hostcall_stats_t) == 344, "stats size");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_stats_t, refusals) == 88, "stats.refusals");
HOSTCALL_STATIC_ASSERT(sizeof(hostcall_buffer_stats_t) == 296, "buffer stats size");
HOSTCALL_STATIC_ASSERT(sizeof(hostcall_service_stats_t) == 64, "service stats size");

/* Fill stats (HOSTCALL_OK; HOSTCALL_ERR_NULL, HOSTCALL_ERR_OPTIONS for a refused size).
 * hostcall_get_buffer_stats: HOSTCALL_ERR_NOT_ENABLED for a buffer not enabled (buffer is only
 * compared); hostcall_get_service_stats: HOSTCALL_ERR_OTHER for an id not registered. */
int hostcall_get_stats(hostcall_stats_t *stats);
int hostcall_get_buffer_stats(const void *buffer, hostcall_buffer_stats_t *stats);
int hostcall_get_service_stats(uint32_t id, hostcall_service_stats_t *stats);

/* ---- ROCm's two protocols, stack and phase ---- */

/* Which wire protocol the device code of the kernels using a buffer speaks. A code object carries
 * no marker of it: the runtime chooses, per buffer, at enable. The stack protocol is ROCm's
 * default in every release (and what enableHostcalls / hostcall_enable set up); the phase
 * protocol is ROCm's opt-in, for device libraries built with USE_NEW_HOSTCALL_IMPL, and needs no
 * CPU/GPU atomics on shared words (no PCIe AtomicOps). */
#define HOSTCALL_PROTOCOL_STACK 0u
#define HOSTCALL_PROTOCOL_PHASE 1u

/* Bytes a buffer of num_packets packets needs in protocol (HOSTCALL_PROTOCOL_*); 0 for an unknown
 * protocol or a refused count (see hostcall_last_error()). Equal to HOSTCALL_BUFFER_SIZE(n) and
 * HOSTCALL_PHASE_BUFFER_SIZE(n). */
size_t hostcall_buffer_size_for(uint32_t protocol, uint32_t num_packets);
/* The alignment a buffer of protocol needs, and hostcall_enable_ex checks: 8 for the stack
 * protocol, 64 (HOSTCALL_PHASE_BUFFER_ALIGN) for the phase protocol; 0 for an unknown protocol. */
uint32_t hostcall_buffer_alignment_for(uint32_t protocol);

/* LLVM libc's GPU RPC: bytes of a buffer of ports ports and lanes lanes (1 ..=
 * HOSTCALL_RPC_MAX_PORTS, 1 ..= HOSTCALL_RPC_MAX_LANES; else 0, see hostcall_last_error()), equal
 * to HOSTCALL_RPC_BUFFER_SIZE. */
size_t hostcall_rpc_buffer_size(uint32_t ports, uint32_t lanes);
/* Writes the client object for a buffer of ports ports at device address device_base into
 * out[0 .. HOSTCALL_RPC_CLIENT_SIZE) (out_len must be at least that). symbol_size: the size of the
 * device image's HOSTCALL_RPC_CLIENT_SYMBOL as the runtime's symbol lookup reports it, or 0 when
 * not known; any other size than HOSTCALL_RPC_CLIENT_SIZE is HOSTCALL_ERR_RPC_CLIENT_SIZE (the
 * device code was built against another rpc.h), nothing written. */
int hostcall_rpc_client_object(uint32_t ports, uint64_t device_base, uint64_t symbol_size, void *out,
                               size_t out_len);

/* The options of hostcall_enable_ex. Start from HOSTCALL_ENABLE_OPTIONS_INIT and set fields:
 *
 *     hostcall_enable_options_t options = HOSTCALL_ENABLE_OPTIONS_INIT;
 *     options.protocol = HOSTCALL_PROTOCOL_PHASE;
 *     options.occupied = bitmap; // or NULL
 *
 * Versioned by size: the library reads the first `size` bytes (read bytewise: any alignment).
 * Fields a newer library has beyond `size` take their defaults; bytes beyond the fields this
 * library knows must be zero, and `reserved` must be zero, else HOSTCALL_ERR_OPTIONS. `size`
 * must be in HOSTCALL_ENABLE_OPTIONS_SIZE_V1..=HOSTCALL_ENABLE_OPTIONS_MAX_SIZE. */
typedef struct hostcall_enable_options {
    uint32_t size;     /* sizeof(hostcall_enable_options_t) */
    uint32_t protocol; /* HOSTCALL_PROTOCOL_STACK (default), HOSTCALL_PROTOCOL_PHASE or
                        * HOSTCALL_PROTOCOL_RPC (size >= V2); other values: HOSTCALL_ERR_OPTIONS */
    /* Phase protocol only (not NULL with the stack protocol: HOSTCALL_ERR_OPTIONS): the occupied
     * bitmap device code claims packets in, HOSTCALL_PHASE_OCCUPIED_WORDS(num_packets) uint32_t,
     * zeroed, 4-aligned (checked: HOSTCALL_ERR_MISALIGNED), overlapping no enabled buffer
     * (checked: HOSTCALL_ERR_OVERLAPS). ROCm allocates it in the GPU's own memory, so the device's
     * atomics on it never cross the bus, and passes it to enable. Written into the buffer's
     * prefix as given (the address device code uses); the library never reads or writes it
     * (emulated waves claim through it as device code does, so for them it must be host memory).
     * It must stay valid until hostcall_disable returns for the buffer. NULL: the library
     * allocates it (zeroed, in the default runtime's device memory: host memory) and frees it at
     * disable. */
    uint32_t *occupied;
    uint32_t device_ordinal; /* the index of the GPU whose queue this is (default 0), kept with
                              * the buffer and reported with each of its packets to services
                              * (SANITIZER's reports name it) */
    uint32_t reserved;       /* must be 0 */
    /* Version 2 (HOSTCALL_ENABLE_OPTIONS_SIZE_V2): an LLVM libc GPU RPC buffer, protocol
     * HOSTCALL_PROTOCOL_RPC, num_packets its ports (1 ..= HOSTCALL_RPC_MAX_PORTS), the buffer
     * hostcall_rpc_buffer_size(ports, rpc_lanes) bytes, HOSTCALL_RPC_BUFFER_ALIGN-aligned. Every
     * opcode of LLVM's server is served by the listener, each group as the policy says. For any
     * other protocol all five fields must be 0. */
    uint32_t rpc_lanes;        /* lanes a port: the client's warp width (32 NVPTX, 64 or 32 AMDGPU) */
    uint32_t rpc_allow;        /* HOSTCALL_RPC_GROUP_* bits served besides the defaults */
    uint32_t rpc_deny;         /* HOSTCALL_RPC_GROUP_* bits not served (wins over rpc_allow) */
    uint32_t rpc_open_files;   /* host files the device may hold open at once (0: 64) */
    uint64_t rpc_stream_bytes; /* bytes kept of one lane's stream: path, format, write (0: 65536) */
    /* Version 3 (HOSTCALL_ENABLE_OPTIONS_SIZE_V3), HOSTCALL_PROTOCOL_RPC only: the directory the
     * files group is confined to (a NUL-terminated path, at most PATH_MAX bytes, an existing
     * directory: HOSTCALL_ERR_OPTIONS otherwise), copied at enable. Required with
     * HOSTCALL_RPC_GROUP_FILES, NULL otherwise. Every path the device names is resolved beneath
     * it by the kernel (openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, Linux 5.6+): an
     * absolute path, ".." above it, a symlink out of it or a /proc magic link is refused. */
    const char *rpc_files_dir;
} hostcall_enable_options_t;

/* The opcode groups of an RPC buffer's policy, and what each lets a device that reaches the
 * buffer do to the host. Console, printf, memory and ROCm's ('r', and this project's 'h') are
 * served by default; files and the groups that run arbitrary host code are not. A refused call is
 * followed to its end and answered with C's failure value (0, NULL, -1), counted as
 * HOSTCALL_REASON_RPC_REFUSED, and logged. */
#define HOSTCALL_RPC_GROUP_CONSOLE 1u /* write bytes to this process's stdout and stderr */
#define HOSTCALL_RPC_GROUP_PRINTF 2u  /* the same, formatted */
#define HOSTCALL_RPC_GROUP_MEMORY 4u  /* allocate and free device memory, within DEVMEM's budgets */
/* fopen, fread, fwrite, fgets, fseek, remove, rename, stdin, ...: create, read, write, remove and
 * rename files beneath options.rpc_files_dir (needed), with this process's permissions; nothing
 * outside it. */
#define HOSTCALL_RPC_GROUP_FILES 8u
/* Not a group of the policy: refused in rpc_allow and rpc_deny (HOSTCALL_ERR_OPTIONS). Whether
 * exit() and abort() end the host is hostcall_allow_device_to_end_process, for the process. */
#define HOSTCALL_RPC_GROUP_EXIT 16u
/* Unsafe: the device then calls any host address as a function, or runs any shell command: every
 * kernel that can reach the buffer is trusted with the whole host process. */
#define HOSTCALL_RPC_GROUP_HOST_CALLS_UNSAFE 32u
#define HOSTCALL_RPC_GROUP_SYSTEM_UNSAFE 64u
#define HOSTCALL_RPC_GROUP_ROCM 128u /* the library's hostcall services (each with its own switch) */
/* Unsafe: the file calls on any path this process may open, as LLVM's server serves them
 * (/proc/self/mem is this process's memory): instead of HOSTCALL_RPC_GROUP_FILES, with
 * rpc_files_dir NULL. */
#define HOSTCALL_RPC_GROUP_FILES_ANYWHERE_UNSAFE 256u

#define HOSTCALL_ENABLE_OPTIONS_SIZE_V1 24u
#define HOSTCALL_ENABLE_OPTIONS_SIZE_V2 48u
#define HOSTCALL_ENABLE_OPTIONS_SIZE_V3 56u
#define HOSTCALL_ENABLE_OPTIONS_MAX_SIZE 1024u
#define HOSTCALL_ENABLE_OPTIONS_INIT                                                                  \
    { (uint32_t)sizeof(hostcall_enable_options_t), HOSTCALL_PROTOCOL_STACK, NULL, 0u, 0u, 0u, 0u, 0u, 0u, 0u, NULL }

HOSTCALL_STATIC_ASSERT(sizeof(hostcall_enable_options_t) == 56, "enable options size (64-bit hosts)");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_enable_options_t, rpc_files_dir) == 48, "options.rpc_files_dir");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_enable_options_t, rpc_lanes) == 24, "options.rpc_lanes");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_enable_options_t, rpc_stream_bytes) == 40, "options.rpc_stream_bytes");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_enable_options_t, size) == 0, "options.size");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_enable_options_t, protocol) == 4, "options.protocol");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_enable_options_t, occupied) == 8, "options.occupied");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_enable_options_t, device_ordinal) == 16, "options.device_ordinal");
HOSTCALL_STATIC_ASSERT(offsetof(hostcall_enable_options_t, reserved) == 20, "options.reserved");

/* hostcall_enable with options (NULL: the defaults, i.e. hostcall_enable). buffer is
 * hostcall_buffer_size_for(protocol, num_packets) bytes aligned to
 * hostcall_buffer_alignment_for(protocol) (null and alignment checked), valid until
 * hostcall_disable returns for it (or the process ends). Returns HOSTCALL_OK or a HOSTCALL_ERR_*
 * code; on failure nothing changed (no bitmap is left allocated). hostcall_disable works on
 * buffers of every protocol, hostcall_emulated_call on either of ROCm's. An RPC buffer (protocol
 * HOSTCALL_PROTOCOL_RPC) is hostcall_rpc_buffer_size(num_packets, options->rpc_lanes) bytes; the
 * runtime copies hostcall_rpc_client_object(num_packets, its device address, ...) into the device
 * image's HOSTCALL_RPC_CLIENT_SYMBOL before the first launch. */
int hostcall_enable_ex(void *buffer, uint32_t num_packets, const void *queue,
                       const hostcall_enable_options_t *options);

/* ---- Services ---- */

/* A service: reads one lane's 8 request words, writes its 2 reply words and returns 0, or returns
 * HOSTCALL_ERROR_* (1..5) to answer the lane with an error reply (other values: REFUSED). Called
 * on the listener thread; must not throw or longjmp out. request and reply are the library's,
 * aligned, valid for the call only. */
typedef int (*hostcall_service_fn)(const uint64_t request[8], uint64_t reply[2], void *ctx);
/* Registers fn (with ctx) as service id for every buffer enabled above. Built-in ids
 * (HOSTCALL_SERVICE_PRINTF, HOSTCALL_SERVICE_DEVMEM) are taken: unregister one first to serve it
 * yourself. ctx is passed to fn as is, never dereferenced. */
int hostcall_register_service(uint32_t id, hostcall_service_fn fn, void *ctx);
/* Unregisters service id (later calls to it: HOSTCALL_ERROR_UNKNOWN_SERVICE). Returns HOSTCALL_OK,
 * or HOSTCALL_ERR_NOT_REGISTERED if id is not registered. */
int hostcall_unregister_service(uint32_t id);
/* Called by a service before it returns an error: counts one refusal of reason
 * (HOSTCALL_REASON_*) for the packet being served on this thread, in the statistics of the
 * listener and of the packet's buffer (one call per lane refused). Counts nothing outside a
 * service. Returns HOSTCALL_OK, or HOSTCALL_ERR_UNKNOWN_REASON for a number naming no reason. */
int hostcall_count_reason(uint32_t reason);
/* Registers the built-in FUNCTION_CALL service (HOSTCALL_SERVICE_FUNCTION_CALL): a lane's slot[0]
 * is the address of a host function void fn(uint64_t out[2], const uint64_t in[7]), called with
 * slot[1..8]; out is the lane's reply (a null address: HOSTCALL_ERROR_BAD_REQUEST). Off until
 * called (calls to it are answered HOSTCALL_ERROR_UNKNOWN_SERVICE), because the library then
 * calls whatever address a device sends: call it only if every device that reaches your buffers
 * is trusted to send addresses of such functions, valid for the rest of the process. Returns
 * HOSTCALL_OK, or HOSTCALL_ERR_SERVICE_TAKEN if id 1 is registered already. */
int hostcall_enable_function_calls_unsafe(void);
/* Whether a device may end this process (allowed non-zero) or not (0, the default): LLVM libc's
 * exit() and abort() over RPC, and SANITIZER reports marked as aborting, on every protocol and
 * every buffer: one decision for the whole process. While it is off, exit and abort are refused
 * (counted as HOSTCALL_REASON_RPC_REFUSED, logged) and an aborting sanitizer report is printed
 * (through the ASan runtime with is_abort = false, or the library's own report on stderr) and
 * counted, and the process goes on. ROCm's runtime and LLVM's server end the process there; this
 * library does only when the embedder says so, because a device's bytes must not take down a
 * process that serves many kernels. Returns HOSTCALL_OK. */
int hostcall_allow_device_to_end_process(int allowed);

/* ---- Wait policy ---- */

/* How the listener of the default runtime waits when idle. After work it polls without sleeping
 * for spin_polls polls, then naps on its doorbell: first min_wait, each further nap twice the
 * last, never longer than max_wait; every wake-up (a ring, or a nap's end) polls every enabled
 * buffer. A device that never rings (LLVM libc's RPC client) is thus served within max_wait plus
 * the timer slack and a wake-up after any idle gap; an idle listener wakes about once per
 * max_wait. A ring that can wake the listener (the host doorbell rung by emulated waves or this
 * project's device helpers; an HSA signal rung during a nap of 2 ms or more) ends a nap at once.
 * Both functions may be called at any time: the running listener takes the policy before its next
 * nap (it is woken to do so at once) and every later listener starts with it.
 *
 *   HOSTCALL_WAIT_BOUNDED_LATENCY (the default): 64 polls, naps 50 us doubling to 200 us, timer
 *       slack 5 us: a silent call is polled within about 200 us, the idle listener wakes about
 *       5,000 times a second;
 *   HOSTCALL_WAIT_SPINNING: never naps: a call is served within one poll, one core is busy;
 *   HOSTCALL_WAIT_POWER_SAVING: 64 polls, naps 1 ms doubling to 10 ms, the inherited slack: a
 *       silent call waits up to about 10 ms, the idle listener wakes about 100 times a second.
 *
 * The measured figures are in docs/performance.md, "Wait policies". */
#define HOSTCALL_WAIT_BOUNDED_LATENCY 0
#define HOSTCALL_WAIT_SPINNING 1
#define HOSTCALL_WAIT_POWER_SAVING 2
/* spin_polls of a listener that never naps. */
#define HOSTCALL_WAIT_SPIN_FOREVER UINT32_MAX

/* Sets a preset (HOSTCALL_OK; HOSTCALL_ERR_OPTIONS for an unknown one). */
int hostcall_set_wait_policy(int preset);
/* Sets explicit values: spin_polls (HOSTCALL_WAIT_SPIN_FOREVER: never nap), the first and the
 * longest nap in microseconds, and the listener threads' timer slack in microseconds (Linux
 * prctl(PR_SET_TIMERSLACK): how late the kernel may end a nap; 0: leave the slack they have).
 * HOSTCALL_OK; HOSTCALL_ERR_OPTIONS if min_wait_us > max_wait_us. */
int hostcall_set_wait_times(uint32_t spin_polls, uint32_t min_wait_us, uint32_t max_wait_us,
                            uint32_t timer_slack_us);
/* Reads the policy in force in the units above (HOSTCALL_OK; HOSTCALL_ERR_NULL for a null
 * pointer). */
int hostcall_get_wait_times(uint32_t *spin_polls, uint32_t *min_wait_us, uint32_t *max_wait_us,
                            uint32_t *timer_slack_us);

/* ---- Emulated waves ---- */

/* One hostcall by an emulated wave (CPU thread) with activemask, through the real producer path
 * of the buffer's protocol on an enabled buffer: lane i sends requests[i] to service and gets
 * replies[i]. An error reply of the host ({HOSTCALL_ERROR_REPLY, code}; {0, code} for DEVMEM)
 * still returns HOSTCALL_OK.
 * Pointers: requests has at least 64 - clz(activemask) readable entries, replies as many writable
 * ones (inactive entries are neither read nor written; both may be NULL when activemask is 0),
 * not accessed by other threads during the call. Checked: null (HOSTCALL_ERR_NULL), aligned to 8
 * (HOSTCALL_ERR_MISALIGNED), apart from the buffer and its occupied bitmap
 * (HOSTCALL_ERR_OVERLAPS). requests and replies may overlap each other: every request is read
 * before any reply is written. The buffer must stay enabled until this returns. */
int hostcall_emulated_call(void *buffer, uint32_t num_packets, uint32_t service, uint64_t activemask,
                           const uint64_t (*requests)[8], uint64_t (*replies)[2]);

#endif /* !HOSTCALL_LAYOUT_ONLY */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HOSTCALL_H_INCLUDED */
