/* The header from C99 (built by capi/tests/c_program.rs with -std=c99 -pedantic -Werror): the
 * layouts compile and keep their alignments without C11's keywords, and the library links. */
#include "hostcall.h"

#include <stdio.h>

/* A line buffer of 4 packets laid out as a struct: its arrays land where the macros say. */
struct line_buffer_4 {
    hostcall_line_prefix_t prefix;
    HOSTCALL_ALIGNAS(64) uint32_t device_seq[4];
    HOSTCALL_ALIGNAS(64) uint32_t occupied[HOSTCALL_LINE_OCCUPIED_WORDS(4)];
    HOSTCALL_ALIGNAS(64) uint32_t served[4];
    hostcall_line_request_t requests[4];
    hostcall_line_reply_t replies[4];
};

int main(void) {
    int ok = getHostcallBufferSize(4) == HOSTCALL_BUFFER_SIZE(4) &&
             hostcall_buffer_size_for(HOSTCALL_PROTOCOL_PHASE, 4) == HOSTCALL_PHASE_BUFFER_SIZE(4) &&
             HOSTCALL_ALIGNOF(hostcall_line_request_t) == HOSTCALL_LINE_BUFFER_ALIGN &&
             HOSTCALL_ALIGNOF(hostcall_line_reply_t) == HOSTCALL_LINE_BUFFER_ALIGN &&
             offsetof(struct line_buffer_4, occupied) == HOSTCALL_LINE_OCCUPIED_OFFSET(4) &&
             offsetof(struct line_buffer_4, served) == HOSTCALL_LINE_SERVED_OFFSET(4) &&
             offsetof(struct line_buffer_4, requests) == HOSTCALL_LINE_REQUESTS_OFFSET(4) &&
             offsetof(struct line_buffer_4, replies) == HOSTCALL_LINE_REPLIES_OFFSET(4) &&
             sizeof(struct line_buffer_4) == HOSTCALL_LINE_BUFFER_SIZE(4);
    printf("header_c99: %s\n", ok ? "ok" : "layout differs");
    return ok ? 0 : 1;
}
