// The header from C++ (built by capi/tests/c_program.rs with g++ -std=c++11): the layout part
// compiles, the static asserts hold, and ROCm's names link with C linkage, as a C++ runtime that
// used rochostcall.hpp would call them.
#include "hostcall.h"

#include <cstdio>
#include <cstdlib>
#include <type_traits>

static_assert(std::is_standard_layout<hostcall_buffer_prefix_t>::value, "prefix is standard layout");
static_assert(std::is_standard_layout<hostcall_packet_header_t>::value, "header is standard layout");
static_assert(std::is_trivially_copyable<hostcall_payload_t>::value, "payload is plain words");
static_assert(std::is_standard_layout<hostcall_phase_prefix_t>::value, "phase prefix is standard layout");
static_assert(std::is_trivially_copyable<hostcall_enable_options_t>::value, "options are plain data");
static_assert(std::is_standard_layout<hostcall_line_prefix_t>::value, "line prefix is standard layout");
static_assert(std::is_standard_layout<hostcall_line_request_t>::value, "line request is standard layout");
static_assert(std::is_trivially_copyable<hostcall_line_reply_t>::value, "line reply is plain words");
static_assert(alignof(hostcall_line_request_t) == HOSTCALL_LINE_BUFFER_ALIGN, "line request alignment");
// The line macros are constant expressions in C++11 too.
static_assert(HOSTCALL_LINE_WORD(HOSTCALL_SERVICE_PRINTF, 9u) == (9ull << 57 | 2u), "line word");
static_assert(HOSTCALL_LINE_SEQ_OF(HOSTCALL_LINE_WORD(~0ull, HOSTCALL_LINE_SEQ_MAX)) == 127u, "line seq");
static_assert(HOSTCALL_LINE_DATA_OF(HOSTCALL_LINE_WORD(~0ull, 1u)) == HOSTCALL_LINE_DATA_MASK, "line data");
static_assert(HOSTCALL_LINE_BUFFER_SIZE(3) == 18880 && HOSTCALL_LINE_REPLIES_OFFSET(3) == 14272, "line size");
// A line buffer laid out by hand, as a runtime with its own allocator would: the arrays land on
// the offsets the macros give, each 64-aligned.
struct line_buffer_4 {
    hostcall_line_prefix_t prefix;
    alignas(64) uint32_t device_seq[4];
    alignas(64) uint32_t occupied[HOSTCALL_LINE_OCCUPIED_WORDS(4)];
    alignas(64) uint32_t served[4];
    hostcall_line_request_t requests[4];
    hostcall_line_reply_t replies[4];
};
static_assert(offsetof(line_buffer_4, device_seq) == HOSTCALL_LINE_DEVICE_SEQ_OFFSET, "line device_seq");
static_assert(offsetof(line_buffer_4, occupied) == HOSTCALL_LINE_OCCUPIED_OFFSET(4), "line occupied");
static_assert(offsetof(line_buffer_4, served) == HOSTCALL_LINE_SERVED_OFFSET(4), "line served");
static_assert(offsetof(line_buffer_4, requests) == HOSTCALL_LINE_REQUESTS_OFFSET(4), "line requests");
static_assert(offsetof(line_buffer_4, replies) == HOSTCALL_LINE_REPLIES_OFFSET(4), "line replies");
static_assert(sizeof(line_buffer_4) == HOSTCALL_LINE_BUFFER_SIZE(4), "line buffer size");

int main() {
    const uint32_t packets = 4;
    const size_t size = getHostcallBufferSize(packets);
    if (size != HOSTCALL_BUFFER_SIZE(packets) || getHostcallBufferAlignment() != HOSTCALL_BUFFER_ALIGN) {
        std::fprintf(stderr, "size or alignment differ\n");
        return 1;
    }
    void *buffer = std::malloc(size); // aligned to alignof(max_align_t) >= 8
    int queue = 0;
    if (!enableHostcalls(buffer, packets, &queue)) {
        std::fprintf(stderr, "enableHostcalls: %s\n", hostcall_last_error());
        return 1;
    }
    uint64_t requests[1][8] = {{1, 2, 3}};
    uint64_t replies[1][2] = {{0, 0}};
    // No service 100 is registered here: the host answers with an error reply.
    int status = hostcall_emulated_call(buffer, packets, 100, 1, requests, replies);
    disableHostcalls(buffer, &queue);
    std::free(buffer);
    if (status != HOSTCALL_OK || replies[0][0] != HOSTCALL_ERROR_REPLY ||
        replies[0][1] != HOSTCALL_ERROR_UNKNOWN_SERVICE) {
        std::fprintf(stderr, "unexpected reply: status %d, %s\n", status, hostcall_last_error());
        return 1;
    }
    // The options initialiser compiles as C++11; a phase buffer with a bitmap the library allocates.
    hostcall_enable_options_t options = HOSTCALL_ENABLE_OPTIONS_INIT;
    options.protocol = HOSTCALL_PROTOCOL_PHASE;
    // The size macro is a constant expression: a static buffer of the phase alignment.
    alignas(HOSTCALL_PHASE_BUFFER_ALIGN) static unsigned char phase[HOSTCALL_PHASE_BUFFER_SIZE(4)];
    if (hostcall_buffer_size_for(HOSTCALL_PROTOCOL_PHASE, packets) != sizeof phase ||
        hostcall_buffer_alignment_for(HOSTCALL_PROTOCOL_PHASE) != HOSTCALL_PHASE_BUFFER_ALIGN ||
        hostcall_enable_ex(phase, packets, &queue, &options) != HOSTCALL_OK ||
        hostcall_emulated_call(phase, packets, 100, 1, requests, replies) != HOSTCALL_OK ||
        replies[0][1] != HOSTCALL_ERROR_UNKNOWN_SERVICE || hostcall_disable(phase, &queue) != HOSTCALL_OK) {
        std::fprintf(stderr, "phase buffer: %s\n", hostcall_last_error());
        return 1;
    }
    std::printf("header_check: ok\n");
    return 0;
}
