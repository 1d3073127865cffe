// Kernels of the `cuda_waves` example: GPU warps making hostcalls against the Rust listener.
// Build (on the device machine, or anywhere with nvcc):
//   nvcc -arch=sm_90 -cubin -I include -o kernels.cubin std-adapter/examples/cuda/kernels.cu
// (variants.cuh, the benchmark variants of the protocol calls, is found beside this file).
#include "hostcall_cuda.cuh"
#include "hostcall_cuda_rpc.cuh"
#include "variants.cuh"

// The lane service of the example (id MIX_SERVICE): a hash of all 8 request words, and the sum
// of the first two. The host computes the same in examples/cuda_waves/main.rs (`mix`).
#define MIX_SERVICE 100u

__device__ __forceinline__ uint64_t mix(const uint64_t (&r)[8]) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
#pragma unroll
    for (int k = 0; k < 8; ++k)
        h = (h ^ r[k]) * 0x100000001B3ull;
    return h ^ (h >> 29);
}

// Request k of lane `lane` of warp `warp`, call `call`: every word depends on all three, so a
// reply routed to the wrong lane, packet or call does not verify.
__device__ __forceinline__ void make_request(uint64_t (&r)[8], unsigned warp, unsigned lane, unsigned call) {
    r[0] = (static_cast<uint64_t>(warp) << 32) | call;
    r[1] = lane;
#pragma unroll
    for (int k = 2; k < 8; ++k)
        r[k] = r[0] * (k + 1) ^ (static_cast<uint64_t>(lane) << (k * 4));
}

// The RPC client object (LLVM libc's rpc::Client): the host builds it over the RPC buffer it serves
// and copies it here before each launch (hostcall::backend::cuda::rpc_buffer).
__device__ hostcall::rpc_client_object __llvm_rpc_client;

// Kernel flags (the protocol calls' variants are tunings, variants.cuh): open the client with keep_packet
// (keep_port for RPC); only lane 0 of
// each warp calls (and checks: the host expects warps x calls replies).
#define KEEP_PACKET (1u << 16)
#define ONE_LANE (1u << 17)

#define WAIT_ARGS unsigned spin_ns, unsigned min_sleep_ns, unsigned max_sleep_ns, unsigned poll_stagger_ns

// Adds a warp's counts to `counters` ([0] errors, [1] lane replies checked): a warp reduction,
// then one atomic per warp. Call it from the whole warp.
__device__ __forceinline__ void add_counts(unsigned long long *counters, unsigned long long errors,
                                           unsigned long long checked) {
    for (int d = 16; d > 0; d /= 2) {
        errors += __shfl_down_sync(0xffffffffu, errors, d);
        checked += __shfl_down_sync(0xffffffffu, checked, d);
    }
    if (hostcall::detail::lane_id() == 0) {
        atomicAdd(&counters[0], errors);
        atomicAdd(&counters[1], checked);
    }
}

// The phase and line protocols' device calls behind one face, for the benchmark kernels.
struct phase_protocol {
    using client = hostcall::phase_client;
    static __device__ client open(const void *buffer, hostcall::wait_policy policy, unsigned start, bool keep) {
        return hostcall::phase_open(buffer, policy, start, keep);
    }
    template <typename Tuning>
    static __device__ void call(client &c, const uint64_t (&request)[8], uint64_t (&reply)[2],
                                hostcall::phase_timing *timing) {
        hostcall::phase_call<Tuning>(c, MIX_SERVICE, request, reply, timing);
    }
    static __device__ void release_held(client &c) { hostcall::phase_release_held(c); }
};

// The line protocol (PROTOCOL.md section 9): the same steps are timed (claim, fill, submit for
// release, wait, reply).
struct line_protocol {
    using client = hostcall::line_client;
    static __device__ client open(const void *buffer, hostcall::wait_policy policy, unsigned start, bool keep) {
        return hostcall::line_open(buffer, policy, start, keep);
    }
    template <typename Tuning>
    static __device__ void call(client &c, const uint64_t (&request)[8], uint64_t (&reply)[2],
                                hostcall::phase_timing *timing) {
        hostcall::line_call<Tuning>(c, MIX_SERVICE, request, reply, timing);
    }
    static __device__ void release_held(client &c) { hostcall::line_release_held(c); }
};

// LLVM libc's RPC (hostcall_cuda_rpc.cuh): `buffer` is the port state in device memory (null: read
// the mailboxes at every open, as LLVM's client does); the buffer itself is the client object's.
// The lane service through this project's 'h' opcodes.
struct rpc_protocol {
    using client = hostcall::rpc_client;
    static __device__ client open(const void *port_state, hostcall::wait_policy policy, unsigned start, bool keep) {
        return hostcall::rpc_open(__llvm_rpc_client, static_cast<uint32_t *>(const_cast<void *>(port_state)), policy,
                                  start, keep);
    }
    template <typename Tuning>
    static __device__ void call(client &c, const uint64_t (&request)[8], uint64_t (&reply)[2],
                                hostcall::phase_timing *timing) {
        hostcall::rpc_call<Tuning>(c, hostcall::rpc_hostcall_opcode(MIX_SERVICE), request, reply, timing);
    }
    static __device__ void release_held(client &c) { hostcall::rpc_release_held(c); }
};

// Every warp makes `calls` calls; every lane (only lane 0 with ONE_LANE) checks its reply.
// `counters[0]` += errors, `counters[1]` += replies checked. With `timing` (device memory, one
// phase_timing per warp), the leader's per-step cycles; with `per_call` (device memory, `calls`
// entries, warp 0 only), the cycles of each of warp 0's calls. `clocks[0..4]`: warp 0's leader's
// clock64 and global timer at its start and end (to convert cycles to ns).
template <typename P, typename Tuning, unsigned FLAGS>
__device__ __forceinline__ void calls_impl(const void *buffer, unsigned calls, WAIT_ARGS, unsigned long long *counters,
                                           hostcall::phase_timing *timing, unsigned long long *per_call,
                                           unsigned long long *clocks) {
    const hostcall::wait_policy policy = {spin_ns, min_sleep_ns, max_sleep_ns, poll_stagger_ns};
    const unsigned warp = hostcall::global_warp_id();
    const unsigned lane = hostcall::detail::lane_id();
    constexpr bool keep = (FLAGS & KEEP_PACKET) != 0;
    typename P::client c = P::open(buffer, policy, warp, keep);
    hostcall::phase_timing local = {0, 0, 0, 0, 0, 0};
    unsigned long long errors = 0, checked = 0;
    const bool first = warp == 0 && lane == 0;
    unsigned long long c0 = 0, g0 = 0;
    if (first && clocks) {
        c0 = clock64();
        g0 = hostcall::detail::global_timer_ns();
    }
    for (unsigned call = 0; call < calls; ++call) {
        if ((FLAGS & ONE_LANE) && lane != 0)
            continue;
        uint64_t request[8], reply[2];
        make_request(request, warp, lane, call);
        const unsigned long long start = clock64();
        P::template call<Tuning>(c, request, reply, timing ? &local : nullptr);
        if (first && per_call) {
            // A call may return before its reply loads complete: time until the reply is usable
            // (branch on it; a 2^-64 chance of one cycle too many).
            const unsigned long long extra = (reply[0] ^ reply[1]) == 0x0123456789abcdefull ? 1 : 0;
            if (extra)
                per_call[call] = 0;
            per_call[call] = clock64() - start + extra;
        }
        errors += (reply[0] != mix(request)) + (reply[1] != request[0] + request[1]);
        checked += 1;
    }
    __syncwarp();
    P::release_held(c);
    if (first && clocks) {
        clocks[0] = c0;
        clocks[1] = clock64();
        clocks[2] = g0;
        clocks[3] = hostcall::detail::global_timer_ns();
    }
    add_counts(counters, errors, checked);
    if (lane == 0 && timing)
        timing[warp] = local;
}

// The benchmark kernels run up to 1,024 threads a block (4,224 warps: 32 a block), which holds them
// to 64 registers; BOUNDED_CALLS_KERNEL names the bound, so that one variant can go without it.
#define PROTOCOL_CALLS_KERNEL(name, protocol, tuning, flags)                                                           \
    BOUNDED_CALLS_KERNEL(name, protocol, tuning, flags, __launch_bounds__(1024))
#define BOUNDED_CALLS_KERNEL(name, protocol, tuning, flags, bounds)                                                     \
    extern "C" __global__ void bounds                                                                                  \
        name(const void *buffer, unsigned calls, WAIT_ARGS, unsigned long long *counters,                              \
             hostcall::phase_timing *timing, unsigned long long *per_call, unsigned long long *clocks) {               \
        calls_impl<protocol, tuning, flags>(buffer, calls, spin_ns, min_sleep_ns, max_sleep_ns, poll_stagger_ns, counters,   \
                                    timing, per_call, clocks);                                                         \
    }
#define CALLS_KERNEL(name, tuning, flags) PROTOCOL_CALLS_KERNEL(name, phase_protocol, tuning, flags)
#define LINE_CALLS_KERNEL(name, tuning, flags) PROTOCOL_CALLS_KERNEL(name, line_protocol, tuning, flags)

CALLS_KERNEL(hc_calls, hostcall::tuning, 0)
CALLS_KERNEL(hc_calls_store_sys, variants::store_sys, 0)
CALLS_KERNEL(hc_calls_fence_sc, variants::fence_sc, 0)
CALLS_KERNEL(hc_calls_pipelined, variants::pipelined, 0)
CALLS_KERNEL(hc_calls_no_ring, variants::no_ring, 0)
CALLS_KERNEL(hc_calls_check_claim, variants::check_claim, 0)
CALLS_KERNEL(hc_calls_lane_fill, variants::lane_fill, 0)
CALLS_KERNEL(hc_calls_transposed_fill, variants::transposed_fill, 0)
CALLS_KERNEL(hc_calls_keep_packet, hostcall::tuning, KEEP_PACKET)

LINE_CALLS_KERNEL(hc_line_calls, hostcall::tuning, 0)
LINE_CALLS_KERNEL(hc_line_calls_no_ring, variants::no_ring, 0)
LINE_CALLS_KERNEL(hc_line_calls_keep_packet, hostcall::tuning, KEEP_PACKET)
LINE_CALLS_KERNEL(hc_line_calls_lane_fill, variants::lane_fill, 0)
LINE_CALLS_KERNEL(hc_line_calls_keep_packet_lane_fill, variants::lane_fill, KEEP_PACKET)
LINE_CALLS_KERNEL(hc_line_calls_one_lane, hostcall::tuning, ONE_LANE)
LINE_CALLS_KERNEL(hc_line_calls_keep_packet_pipelined, variants::pipelined, KEEP_PACKET)
// Without the 64-register bound (more registers, no spills): launched only with a few warps a block.
BOUNDED_CALLS_KERNEL(hc_line_calls_keep_packet_unbounded, line_protocol, hostcall::tuning, KEEP_PACKET, )

#define RPC_CALLS_KERNEL(name, tuning, flags) PROTOCOL_CALLS_KERNEL(name, rpc_protocol, tuning, flags)
RPC_CALLS_KERNEL(hc_rpc_calls, hostcall::tuning, 0)
RPC_CALLS_KERNEL(hc_rpc_calls_keep_port, hostcall::tuning, KEEP_PACKET)
RPC_CALLS_KERNEL(hc_rpc_calls_lane_fill, variants::lane_fill, 0)
RPC_CALLS_KERNEL(hc_rpc_calls_transposed_fill, variants::transposed_fill, 0)
RPC_CALLS_KERNEL(hc_rpc_calls_keep_port_lane_fill, variants::lane_fill, KEEP_PACKET)
RPC_CALLS_KERNEL(hc_rpc_calls_store_sys, variants::store_sys, 0)

// The ping-pong floor: one thread stores round r+1 to `to_host` (system scope, relaxed: one word
// needs no fence) and spins until the host thread echoes it into `from_host`. With `fence`, a
// fence.sc.sys comes before each store (what a release store of the phase costs on top).
extern "C" __global__ void hc_floor(unsigned *to_host, const unsigned *from_host, unsigned rounds, unsigned fence,
                                    unsigned long long *out_ns) {
    const uint64_t start = hostcall::detail::global_timer_ns();
    for (unsigned r = 1; r <= rounds; ++r) {
        if (fence)
            hostcall::detail::fence_sc_sys();
        hostcall::detail::st_relaxed_sys(to_host, r);
        while (hostcall::detail::ld_relaxed_sys(from_host) != r) {
        }
    }
    out_ns[0] = hostcall::detail::global_timer_ns() - start;
}

// The line protocol's edge cases on the device (tests/cuda.rs): each warp alternates whole-warp
// calls (the transposed fill and poll) with calls from the lanes where (lane + call) % 3 != 0
// (the per-lane path; a keep_packet client claims a second packet for them), on a keep_packet
// client when `keep`. counters as hc_calls: [0] += errors, [1] += lane replies checked.
extern "C" __global__ void hc_line_mixed(const void *buffer, unsigned calls, unsigned keep,
                                         unsigned long long *counters) {
    const unsigned warp = hostcall::global_warp_id();
    const unsigned lane = hostcall::detail::lane_id();
    hostcall::line_client c = hostcall::line_open(buffer, hostcall::default_wait_policy(), warp, keep != 0);
    unsigned long long errors = 0, checked = 0;
    for (unsigned call = 0; call < calls; ++call) {
        if (call % 2 == 0 || (lane + call) % 3 != 0) {
            uint64_t request[8], reply[2];
            make_request(request, warp, lane, call);
            hostcall::line_call(c, MIX_SERVICE, request, reply);
            errors += (reply[0] != mix(request)) + (reply[1] != request[0] + request[1]);
            checked += 1;
        }
        __syncwarp(); // the next call starts with the whole warp again
    }
    hostcall::line_release_held(c);
    add_counts(counters, errors, checked);
}

// The RPC client's edge cases on the device (tests/cuda.rs), each warp on the buffer of
// __llvm_rpc_client with `port_state` (null: LLVM's open, reading the mailboxes): whole-warp calls
// alternate with calls from the lanes where (lane + call) % 3 != 0 (a keep_port client opens a
// second port for them); after every fourth call the whole warp sends one packet and closes
// without reading an answer (the port is left the host's: the next opener must find out); call 1
// of each warp uses opcode UNKNOWN_OPCODE, which the host hands back untouched (the answer is the
// request's words 0 and 1). counters as hc_calls: [0] += errors, [1] += lane replies checked;
// [2 + call] += the errors of call `call` (which call broke, when one does).
#define UNKNOWN_OPCODE ((static_cast<unsigned>('z') << 24) | 1u)
extern "C" __global__ void hc_rpc_mixed(void *port_state, unsigned calls, unsigned keep, unsigned long long *counters) {
    const unsigned warp = hostcall::global_warp_id();
    const unsigned lane = hostcall::detail::lane_id();
    hostcall::rpc_client c = hostcall::rpc_open(__llvm_rpc_client, static_cast<uint32_t *>(port_state),
                                                hostcall::default_wait_policy(), warp, keep != 0);
    unsigned long long errors = 0, checked = 0;
    for (unsigned call = 0; call < calls; ++call) {
        if (call % 2 == 0 || (lane + call) % 3 != 0) {
            uint64_t request[8], reply[2];
            make_request(request, warp, lane, call);
            unsigned long long e;
            if (call == 1) {
                hostcall::rpc_call(c, UNKNOWN_OPCODE, request, reply);
                e = (reply[0] != request[0]) + (reply[1] != request[1]);
            } else {
                hostcall::rpc_call(c, hostcall::rpc_hostcall_opcode(MIX_SERVICE), request, reply);
                e = (reply[0] != mix(request)) + (reply[1] != request[0] + request[1]);
            }
            if (e != 0)
                atomicAdd(&counters[2 + call], e);
            errors += e;
            checked += 1;
        }
        __syncwarp(); // the next call starts with the whole warp again
        if (call % 4 == 3) {
            uint64_t request[8];
            make_request(request, warp, lane, 1000u + call);
            hostcall::rpc_port p = hostcall::rpc_open_port(c, hostcall::rpc_hostcall_opcode(MIX_SERVICE));
            hostcall::rpc_send(c, p, request);
            hostcall::rpc_close(c, p);
        }
    }
    hostcall::rpc_release_held(c);
    add_counts(counters, errors, checked);
}

// Sets every packet's device_seq of a line buffer to `seq` (one thread; launched alone, before
// the calls): a test starts the sequences just short of 0xffffffff so its calls cross the wrap,
// and the refresh runs on the GPU.
extern "C" __global__ void hc_line_set_seq(const void *buffer, unsigned seq) {
    const hostcall_line_prefix_t *prefix = static_cast<const hostcall_line_prefix_t *>(buffer);
    unsigned *device_seq = reinterpret_cast<unsigned *>(prefix->device_seq);
    for (unsigned i = 0; i < prefix->num_packets; ++i)
        device_seq[i] = seq;
}

// The link's bandwidth between the GPU and mapped host memory, by whole warps: `groups` blocks
// of 4 KB (256 pieces of 16 bytes) at `host`, one warp per block at a time. mode 0: load whole
// lines (load k of lane L reads piece 32 k + L: 512 contiguous bytes per instruction, as a
// transposed reply poll reads whole lines), summed into `sink`; mode 1: store whole lines the
// same way (as a transposed fill); mode 2: store piece 8 L + k (16 bytes of each of 32 lines per
// instruction, as lanes that each store their own 128 bytes).
extern "C" __global__ void hc_link(uint64_t *host, unsigned long long groups, unsigned mode,
                                   unsigned long long *sink) {
    const unsigned lane = hostcall::detail::lane_id();
    const unsigned long long warps = (static_cast<unsigned long long>(gridDim.x) * blockDim.x) / 32u;
    uint64_t acc = 0;
    for (unsigned long long g = (static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32u;
         g < groups; g += warps) {
#pragma unroll
        for (unsigned k = 0; k < 8; ++k) {
            const unsigned long long piece = g * 256u + (mode == 2 ? lane * 8u + k : k * 32u + lane);
            if (mode == 0) {
                uint64_t a, b;
                hostcall::detail::ld_v2_sys(host + 2u * piece, a, b);
                acc += a ^ b;
            } else {
                hostcall::detail::st_v2<true>(host + 2u * piece, piece, g);
            }
        }
    }
    if (mode == 0 && acc == 0x5eed)
        atomicAdd(sink, 1ull); // keeps the loads
}

// printf through the message stream: lanes 0..lanes-1 of warp 0 print one line each, of
// different lengths (a divergent stream); `results[lane]` = the host's count, or -1.
extern "C" __global__ void hc_printf(const void *buffer, unsigned lanes, long long *results) {
    hostcall::phase_client c = hostcall::phase_open(buffer);
    const unsigned lane = hostcall::detail::lane_id();
    if (hostcall::global_warp_id() != 0 || lane >= lanes)
        return;
    const char *names[4] = {"a", "bb", "a much longer string, to make this lane's message span more chunks", "dddd"};
    const int n = hostcall::phase_printf(c, "cuda: printf from the GPU: lane %u of warp %d, %s, %.3f, 0x%llx\n", lane,
                                         0, names[lane % 4], 1.5 * lane, 0xabcdull << lane);
    results[lane] = n;
}

// printf through the RPC client ('h' opcodes to the PRINTF service, its message stream), as
// hc_printf: lanes 0..lanes-1 of warp 0 print one line each; `results[lane]` = the host's count.
extern "C" __global__ void hc_rpc_printf(void *port_state, unsigned lanes, long long *results) {
    hostcall::rpc_client c = hostcall::rpc_open(__llvm_rpc_client, static_cast<uint32_t *>(port_state));
    const unsigned lane = hostcall::detail::lane_id();
    if (hostcall::global_warp_id() != 0 || lane >= lanes)
        return;
    const char *names[4] = {"a", "bb", "a much longer string, to make this lane's message span more calls", "dddd"};
    const int n = hostcall::rpc_printf(c, "cuda: rpc printf from the GPU: lane %u of warp %d, %s, %.3f, 0x%llx\n", lane,
                                       0, names[lane % 4], 1.5 * lane, 0xabcdull << lane);
    results[lane] = n;
}

// LLVM libc's puts on the wire: lanes 0..lanes-1 of warp 0 each write a line of 20 + 90 * lane
// bytes ('a' + (i + lane) % 26 at byte i: up to 5 packets of the stream) with the 'c' opcode
// WRITE_TO_STDOUT_NEWLINE, as LLVM libc's device code does (open, send_n, recv, close);
// `results[lane]` = the host's answer, the bytes written (with the newline).
#define LIBC_WRITE_TO_STDOUT_NEWLINE ((static_cast<unsigned>('c') << 24) | 5u)
extern "C" __global__ void hc_rpc_puts(void *port_state, unsigned lanes, unsigned long long *results) {
    hostcall::rpc_client c = hostcall::rpc_open(__llvm_rpc_client, static_cast<uint32_t *>(port_state));
    const unsigned lane = hostcall::detail::lane_id();
    if (hostcall::global_warp_id() != 0 || lane >= lanes)
        return;
    char line[20 + 90 * 31];
    const unsigned size = 20u + 90u * lane;
    for (unsigned i = 0; i < size; ++i)
        line[i] = static_cast<char>('a' + (i + lane) % 26u);
    hostcall::rpc_port p = hostcall::rpc_open_port(c, LIBC_WRITE_TO_STDOUT_NEWLINE);
    hostcall::rpc_send_n(c, p, line, size);
    uint64_t answer[8];
    hostcall::rpc_recv(c, p, answer);
    hostcall::rpc_close(c, p);
    results[lane] = answer[0];
}

// LLVM libc's puts from every lane of every warp, `calls` times: each lane writes a 24-byte line
// ('a' + (i + lane + warp) % 26 at byte i: one packet) with WRITE_TO_STDOUT_NEWLINE (open, send_n,
// recv, close, as LLVM libc's device code does). counters[0] += lanes whose answer is not 25 (the
// line and its newline), counters[1] += lanes checked.
extern "C" __global__ void hc_rpc_puts_all(void *port_state, unsigned calls, unsigned long long *counters) {
    hostcall::rpc_client c = hostcall::rpc_open(__llvm_rpc_client, static_cast<uint32_t *>(port_state));
    const unsigned lane = hostcall::detail::lane_id();
    const unsigned warp = hostcall::global_warp_id();
    char line[24];
    for (unsigned i = 0; i < 24; ++i)
        line[i] = static_cast<char>('a' + (i + lane + warp) % 26u);
    unsigned long long errors = 0, checked = 0;
    for (unsigned call = 0; call < calls; ++call) {
        hostcall::rpc_port p = hostcall::rpc_open_port(c, LIBC_WRITE_TO_STDOUT_NEWLINE);
        hostcall::rpc_send_n(c, p, line, 24);
        uint64_t answer[8];
        hostcall::rpc_recv(c, p, answer);
        hostcall::rpc_close(c, p);
        errors += answer[0] != 25;
        checked += 1;
    }
    atomicAdd(&counters[0], errors);
    atomicAdd(&counters[1], checked);
}

// FUNCTION_CALL (id 1): each lane asks the host to run `function(out, in)` on
// in = {lane, warp, 7, ...}; the host function (cuda_waves/main.rs: `add_mul`) answers
// {in[0] + in[1], in[0] * in[2]}. counters[0] += errors, counters[1] += replies checked.
extern "C" __global__ void hc_function_call(const void *buffer, uint64_t function, unsigned calls,
                                            unsigned long long *counters) {
    hostcall::phase_client c = hostcall::phase_open(buffer);
    const unsigned lane = hostcall::detail::lane_id();
    const unsigned warp = hostcall::global_warp_id();
    unsigned long long errors = 0, checked = 0;
    for (unsigned call = 0; call < calls; ++call) {
        const uint64_t a = lane + 1000ull * call, b = warp, m = 7 + call;
        const uint64_t request[8] = {function, a, b, m, 0, 0, 0, 0};
        uint64_t reply[2];
        hostcall::phase_call(c, HOSTCALL_SERVICE_FUNCTION_CALL, request, reply);
        errors += (reply[0] != a + b) + (reply[1] != a * m);
        checked += 1;
    }
    atomicAdd(&counters[0], errors);
    atomicAdd(&counters[1], checked);
}

// The stack protocol producer, for platforms with host-native atomics only. The example never
// launches it where cudaDevAttrHostNativeAtomicSupported is 0 (the host refuses the buffer).
extern "C" __global__ void hc_stack_calls(const void *buffer, unsigned calls, unsigned long long *counters) {
    const unsigned warp = hostcall::global_warp_id();
    const unsigned lane = hostcall::detail::lane_id();
    unsigned long long errors = 0;
    for (unsigned call = 0; call < calls; ++call) {
        uint64_t request[8], reply[2];
        make_request(request, warp, lane, call);
        hostcall::stack::stack_call(buffer, MIX_SERVICE, request, reply);
        errors += (reply[0] != mix(request)) + (reply[1] != request[0] + request[1]);
    }
    atomicAdd(&counters[0], errors);
    atomicAdd(&counters[1], calls);
}

// MALLOC and FREE as LLVM libc's GPU allocator sends them (tests/cuda.rs).
#include "memory.cuh"
