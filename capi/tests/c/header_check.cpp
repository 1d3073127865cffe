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
