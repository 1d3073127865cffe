/*
 * hostcall_cuda_rpc.cuh: a CUDA client of LLVM libc's GPU RPC (llvm-project libc/shared/rpc.h
 * @039da685; the host side is hostcall_core::rpc and this project's listener), written from the
 * wire format: our own code, byte-compatible with upstream's buffer and client object.
 *
 *   __device__ hostcall::rpc_client_object __llvm_rpc_client;    // the host fills it (below)
 *
 *   hostcall::rpc_client c = hostcall::rpc_open(__llvm_rpc_client, port_state);  // once per warp
 *   uint64_t request[8] = {...}, reply[2];
 *   hostcall::rpc_call(c, hostcall::rpc_hostcall_opcode(100), request, reply);  // every active lane
 *   hostcall::rpc_printf(c, "lane %d\n", lane);                  // the PRINTF service's stream
 *
 *   hostcall::rpc_port p = hostcall::rpc_open_port(c, opcode);   // or a conversation of its own:
 *   hostcall::rpc_send(c, p, words); hostcall::rpc_recv(c, p, words); hostcall::rpc_close(c, p);
 *   hostcall::rpc_send_n(c, p, bytes, size);                     // a stream (LLVM's 'c' opcodes)
 *
 * A warp is a client of 32 lanes: the buffer's lane count (Protocol::Rpc { lanes: 32 } on the
 * host) must be 32. Lanes that call together (__activemask()) share one port.
 *
 * ---------------------------------------------------------------------------------------------
 * THE WIRE (hostcall.h HOSTCALL_RPC_*; PROTOCOL.md and the core's rpc module docs)
 *
 * P ports: the host's mailbox u32[P] (the client's inbox) at 0, the client's mailbox u32[P] at 4P,
 * headers {mask u64, opcode u32, pad} at 8P, lane buffers u64[P][32][8] at 24P, all in pinned,
 * device-mapped host memory. The client owns port p while inbox[p] == outbox[p], the host while
 * they differ; each side writes only its own mailbox, flipping it 0 <-> 1.
 *
 * Who writes what:
 *   lock bits (in the client object, device memory)  client warps: fetch_or at open, and at close
 *   port_state[p] (device memory, optional, ours)     the warp holding port p, before unlocking it
 *   header[p], lane buffers of p                      the warp holding p, while the client owns it
 *   outbox[p]                                         the warp holding p: one release store a flip
 *   inbox[p], the host's lane buffer words            the host, while it owns p
 *
 * One call (rpc_call: open, send one packet, receive the answer, close), by the leader (the
 * lowest active lane) unless said otherwise:
 *   1. open: from c.start (the warp's global id by default) upwards, wrapping:
 *      atom.acquire.gpu.or of the port's lock bit (a set bit: busy, next port), then whether the
 *      client owns the port: with port_state, a clean state says so with no read of host memory;
 *      else (a dirty state, or no port_state, as LLVM's client always does) ld.acquire.sys of the
 *      inbox against the outbox bit (ld.relaxed.sys of the outbox without port_state); a port the
 *      host still owns (its last call was send-only) is unlocked and skipped;
 *   2. header: {activemask, opcode} as one 16-byte store;
 *   3. fill: each lane's 8 words, 16-byte stores; a full warp under load (other ports of its lock
 *      word held) stores them transposed through shuffles, 512 contiguous bytes a store (the lane
 *      buffers of a port are laid out as a phase packet's slots: tuning::phase_transposed picks);
 *   4. __syncwarp, then st.release.sys of the flipped outbox (pairs with the host's Acquire fence
 *      in rpc::View::turn; LLVM's client: a release fence, then a relaxed store);
 *   5. wait: ld.acquire.sys polls of the inbox until it equals the outbox (pairs with the
 *      host's Release fence in rpc::Turn::finish): spin for wait_policy::spin_ns, then back off;
 *   6. __syncwarp, then each lane reads its 2 reply words, one 16-byte system-scope load;
 *   7. close: __syncwarp, port_state[p] = outbox bit (clean: the port is the client's), then
 *      red.release.gpu.and of the lock bit (pairs with step 1's acquire of the next opener).
 *   keep_port (rpc_open): a whole warp keeps its port locked from one call to the next, skipping
 *   1 and 7; it must give it back with rpc_release_held (from all 32 lanes) before it ends.
 *
 * The port count must be even: the headers (at 8P) and lane buffers (at 24P) are accessed 16
 * bytes at a time (hostcall::backend::cuda::rpc_buffer refuses an odd count).
 *
 * Which port: LLVM's client scans from port 0 at every open, so under load every warp contends
 * for the same low ports' lock bits (and reads their mailboxes over PCIe). This client starts at
 * the warp's global id, as the phase client does, so with at least as many ports as warps each
 * warp's first try is its own port; and its port_state spares the mailbox reads.
 *
 * port_state: u32 per port in device memory, zeroed before the first launch (the host's
 * View::init leaves both mailboxes 0): bit 0 the outbox as last stored, bit 1 (DIRTY) "closed
 * while the host owned it" (after a send-only call). It is exact because only warps of this
 * client write the outbox, and only while holding the lock. Pass null to share the buffer with
 * another device implementation (LLVM libc's own client): every open then reads both mailboxes.
 *
 * No doorbell: upstream's layout has none (clr adds one outside this rpc.h), so serve RPC buffers
 * with a spinning listener, or one that polls on its timeout.
 */
#ifndef HOSTCALL_CUDA_RPC_CUH_INCLUDED
#define HOSTCALL_CUDA_RPC_CUH_INCLUDED

#include "hostcall_cuda.cuh"

#include <stddef.h>

/* The lanes of a port for this client: a warp. */
#define HOSTCALL_RPC_CUDA_LANES 32u

/* port_state bit 1: the port was closed while the host owned it (its mailboxes may differ). */
#define HOSTCALL_RPC_PORT_DIRTY 2u

#if defined(__CUDACC__)

namespace hostcall {

/* rpc::Header: written by the opening warp, read by the host at each turn. */
struct rpc_header {
    uint64_t mask;
    uint32_t opcode;
    uint32_t padding;
};

/* rpc::Client (rpc::Process<false>), the object in the device symbol HOSTCALL_RPC_CLIENT_SYMBOL:
 * the host builds it over the buffer's device address (hostcall_core::rpc::client_object, or
 * hostcall_rpc_client_object in C) and copies it into the symbol before the first launch. */
struct rpc_client_object {
    uint32_t port_count;
    uint32_t padding;
    const uint32_t *inbox; /* the host's mailbox */
    uint32_t *outbox;      /* the client's mailbox */
    rpc_header *header;
    uint64_t *packet;      /* the lane buffers, 8 words a lane */
    uint32_t lock[HOSTCALL_RPC_MAX_PORTS / 32u];
};

static_assert(sizeof(rpc_client_object) == HOSTCALL_RPC_CLIENT_SIZE, "the client object of rpc.h @039da685");
static_assert(offsetof(rpc_client_object, inbox) == 8 && offsetof(rpc_client_object, packet) == 32 &&
                  offsetof(rpc_client_object, lock) == 40,
              "rpc::Process<false>'s fields");
static_assert(sizeof(rpc_header) == 16, "rpc::Header");

/* This project's 'h' namespace: hostcall service `service` (below 2^24) as one packet each way,
 * served by the listener as a hostcall packet (hostcall_core::rpc::opcode::HOSTCALL). */
__host__ __device__ constexpr uint32_t rpc_hostcall_opcode(uint32_t service) {
    return (static_cast<uint32_t>('h') << 24) | (service & 0xffffffu);
}

/* A warp's handle on one buffer: the client object's pointers, read once. */
struct rpc_client : detail::claims {
    uint32_t *lock;          /* device memory: the object's lock bits */
    const uint32_t *inbox;   /* host memory */
    uint32_t *outbox;        /* host memory */
    rpc_header *header;      /* host memory */
    uint64_t *packet;        /* host memory */
    uint32_t *port_state;    /* device memory, or null */
    unsigned ports;
    /* keep (keep_port): `held` is the kept port (with detail::CLAIM_BUSY as its open found it),
     * held_state its outbox bit. */
};

/* An open port, the same in every lane of the call. */
struct rpc_port {
    unsigned index;    /* the port, with detail::CLAIM_BUSY when others of its lock word were held */
    unsigned mask;     /* the lanes of the call */
    unsigned out;      /* the outbox bit (the client's own word: kept here, never read back) */
    bool owns;         /* whether the client owns the buffer without waiting */
    bool receive;      /* whether the last operation was a receive */
};

/* The handle of the calling warp on the buffer of `object` (device memory, filled by the host
 * before the launch, so plain loads read it). `port_state`: see the top of this file. */
__device__ inline rpc_client rpc_open(rpc_client_object &object, uint32_t *port_state = nullptr,
                                      wait_policy wait = default_wait_policy(), unsigned start = global_warp_id(),
                                      bool keep_port = false) {
    rpc_client c;
    c.lock = object.lock;
    c.inbox = object.inbox;
    c.outbox = object.outbox;
    c.header = object.header;
    c.packet = object.packet;
    c.port_state = port_state;
    c.ports = object.port_count;
    static_cast<detail::claims &>(c) = detail::fresh_claims(start, wait, keep_port);
    return c;
}

namespace detail {

/* Step 1, after the lock bit of `index` was won: whether the client owns the port, and its
 * outbox bit in `out`. */
__device__ inline bool rpc_owned(const rpc_client &c, unsigned index, unsigned &out) {
    if (c.port_state != nullptr) {
        /* Relaxed: device-only word, ordered by the lock's acquire (the previous holder stored it
         * before its release of the lock). */
        const unsigned state = ld_relaxed_gpu(&c.port_state[index]);
        out = state & 1u;
        if ((state & HOSTCALL_RPC_PORT_DIRTY) == 0)
            /* Clean: the previous holder saw inbox == outbox with an acquire and left them so;
             * only the client changes them from there. Its acquire of the host's flip, then its
             * release of the lock and our acquire, order the host's last accesses before ours. */
            return true;
    } else {
        /* Relaxed: the client's own word (host memory), last stored by a warp whose lock release
         * our acquire saw. */
        out = ld_relaxed_sys(&c.outbox[index]) != 0u ? 1u : 0u;
    }
    /* Acquire: pairs with the host's Release fence before its flip (rpc::Turn::finish): its
     * accesses to the port's lane buffers happen before ours. */
    return (ld_acquire_sys(&c.inbox[index]) != 0u ? 1u : 0u) == out;
}

/* Step 1 (leader): opens a port from c.start upwards, wrapping; sleeps and tries again when
 * every port is busy. Returns the index (with CLAIM_BUSY when other ports of its lock word were
 * held: a sign of load) and its outbox bit in `out`. */
__device__ inline unsigned rpc_claim(const rpc_client &c, unsigned &out) {
    /* claim_bit's acquire pairs with the release `red.and` of the port's previous holder (step 7). */
    return claim_bit(c.lock, c.ports, c.start, [&](unsigned index, unsigned bit) {
        if (rpc_owned(c, index, out))
            return true;
        /* Release: keeps the lock's release chain for the next opener (we wrote nothing). */
        red_and_release_gpu(&c.lock[index / 32u], ~bit);
        return false;
    });
}

/* Steps 1 and 2 by the calling lanes: the leader opens a port and writes its header; every lane
 * gets the port. */
__device__ inline rpc_port rpc_begin(rpc_client &c, unsigned opcode, unsigned mask, bool is_leader,
                                     unsigned leader) {
    unsigned index = 0, out = 0;
    if (is_leader)
        index = rpc_claim(c, out);
    rpc_port p;
    p.index = __shfl_sync(mask, index, leader);
    p.out = __shfl_sync(mask, out, leader);
    p.mask = mask;
    p.owns = true;
    p.receive = false;
    return p;
}

__device__ __forceinline__ unsigned rpc_index(const rpc_port &p) { return p.index & ~CLAIM_BUSY; }

__device__ __forceinline__ uint64_t *rpc_lanes(const rpc_client &c, const rpc_port &p) {
    return c.packet + static_cast<size_t>(rpc_index(p)) * HOSTCALL_RPC_CUDA_LANES * 8u;
}

/* Step 2 (leader): the header, one 16-byte store (published by the flip's release). */
__device__ __forceinline__ void rpc_write_header(const rpc_client &c, const rpc_port &p, unsigned opcode) {
    st_v2<false>(reinterpret_cast<uint64_t *>(&c.header[rpc_index(p)]), static_cast<uint64_t>(p.mask),
                 static_cast<uint64_t>(opcode));
}

/* Step 5 (every lane): waits until the client owns the port (the leader polls; __syncwarp hands
 * its acquire to the other lanes' loads that follow). */
__device__ inline void rpc_wait(const rpc_client &c, rpc_port &p, bool is_leader) {
    if (!p.owns && is_leader)
        /* Acquire: pairs with the host's Release fence before its flip (rpc::Turn::finish). */
        poll_acquire_sys(&c.inbox[rpc_index(p)], p.out, c.wait, global_timer_ns(),
                         [](unsigned w) { return w != 0u ? 1u : 0u; });
    __syncwarp(p.mask);
    p.owns = true;
}

/* Step 3 (every lane): this lane's 8 words into its lane buffer, or a full warp's transposed. */
template <typename Tuning>
__device__ inline void rpc_fill(const rpc_client &c, const rpc_port &p, unsigned lane, const uint64_t (&words)[8]) {
    uint64_t *lanes = rpc_lanes(c, p);
    if (p.mask == 0xffffffffu && Tuning::phase_transposed((p.index & CLAIM_BUSY) != 0)) {
        fill_transposed<Tuning::sys_stores>(lanes, lane, words);
    } else {
        uint64_t *slot = lanes + lane * 8u;
#pragma unroll
        for (unsigned k = 0; k < 8; k += 2)
            st_v2<Tuning::sys_stores>(slot + k, words[k], words[k + 1]);
    }
}

/* Step 4 (every lane): hands the port to the host. __syncwarp orders every lane's accesses
 * before the leader's release store (barrier, then the release's cumulativity). */
__device__ inline void rpc_flip(const rpc_client &c, rpc_port &p, bool is_leader) {
    __syncwarp(p.mask);
    p.out ^= 1u;
    if (is_leader)
        /* Release: pairs with the host's Acquire fence in rpc::View::turn. */
        st_release_sys(&c.outbox[rpc_index(p)], p.out);
    p.owns = false;
}

/* The first N words of this lane's buffer (after rpc_wait), 16 bytes a load at system scope. */
template <unsigned N>
__device__ inline void rpc_read(const rpc_client &c, const rpc_port &p, unsigned lane, uint64_t (&words)[N]) {
    static_assert(N % 2 == 0 && N <= 8, "whole 16-byte pieces of a lane buffer");
    const uint64_t *slot = rpc_lanes(c, p) + lane * 8u;
#pragma unroll
    for (unsigned k = 0; k < N; k += 2)
        ld_v2_sys(slot + k, words[k], words[k + 1]);
}

/* Step 7 (every lane): the port's state, then the unlock. */
__device__ inline void rpc_end(const rpc_client &c, unsigned index, unsigned out, bool owns, unsigned mask,
                               bool is_leader) {
    /* Orders every lane's reads of the port before the release. */
    __syncwarp(mask);
    if (is_leader) {
        if (c.port_state != nullptr)
            /* Relaxed: published to the next opener by the release below. */
            st_relaxed_gpu(&c.port_state[index], out | (owns ? 0u : HOSTCALL_RPC_PORT_DIRTY));
        /* Release: pairs with the acquire fetch_or of the next opener (step 1). */
        red_and_release_gpu(&c.lock[index / 32u], ~(1u << (index % 32u)));
    }
}

__device__ __forceinline__ bool rpc_is_leader(unsigned mask) { return lane_id() == static_cast<unsigned>(__ffs(mask) - 1); }

} // namespace detail

/* Opens a port for a call of `opcode` by the calling lanes (they must stay together until
 * rpc_close). */
__device__ inline rpc_port rpc_open_port(rpc_client &c, unsigned opcode) {
    const unsigned mask = __activemask();
    const unsigned leader = __ffs(mask) - 1;
    const bool is_leader = detail::lane_id() == leader;
    rpc_port p = detail::rpc_begin(c, opcode, mask, is_leader, leader);
    if (is_leader)
        detail::rpc_write_header(c, p, opcode);
    return p;
}

/* Sends one packet: this lane's 8 words (upstream's Port::send). */
template <typename Tuning = tuning>
__device__ inline void rpc_send(rpc_client &c, rpc_port &p, const uint64_t (&words)[8]) {
    const bool is_leader = detail::rpc_is_leader(p.mask);
    detail::rpc_wait(c, p, is_leader);
    detail::rpc_fill<Tuning>(c, p, detail::lane_id(), words);
    detail::rpc_flip(c, p, is_leader);
    p.receive = false;
}

/* Receives one packet: this lane's 8 words (upstream's Port::recv; a receive after a receive
 * first hands the previous packet back). */
__device__ inline void rpc_recv(rpc_client &c, rpc_port &p, uint64_t (&words)[8]) {
    const bool is_leader = detail::rpc_is_leader(p.mask);
    if (p.receive)
        detail::rpc_flip(c, p, is_leader);
    detail::rpc_wait(c, p, is_leader);
    detail::rpc_read(c, p, detail::lane_id(), words);
    p.receive = true;
}

namespace detail {

/* Up to `count` (at most 8) words of the bytes from `bytes + at` to `bytes + size`, little-endian,
 * the rest zero. */
__device__ inline void rpc_pack(uint64_t *words, unsigned count, const unsigned char *bytes, uint64_t at,
                                uint64_t size) {
    for (unsigned k = 0; k < count; ++k) {
        uint64_t w = 0;
        for (unsigned b = 0; b < 8; ++b) {
            const uint64_t i = at + 8u * k + b;
            if (i < size)
                w |= static_cast<uint64_t>(bytes[i]) << (8u * b);
        }
        words[k] = w;
    }
}

/* The largest `v` of the lanes of `mask`. */
__device__ inline uint64_t rpc_max(unsigned mask, uint64_t v) {
    for (unsigned lane = 0; lane < 32; ++lane) {
        if ((mask >> lane) & 1u) {
            const uint64_t other = __shfl_sync(mask, static_cast<unsigned long long>(v), lane);
            v = other > v ? other : v;
        }
    }
    return v;
}

} // namespace detail

/* Sends this lane's `size` bytes at `data` as a stream (upstream's Port::send_n): the first
 * packet carries the size in word 0 and the first 56 bytes, each next one 64 bytes, as many
 * packets as the longest lane of the call needs (a lane whose bytes are done sends zeroes). */
template <typename Tuning = tuning>
__device__ inline void rpc_send_n(rpc_client &c, rpc_port &p, const void *data, uint64_t size) {
    const unsigned char *bytes = static_cast<const unsigned char *>(data);
    uint64_t words[8];
    words[0] = size;
    detail::rpc_pack(words + 1, 7, bytes, 0, size);
    rpc_send<Tuning>(c, p, words);
    const uint64_t longest = detail::rpc_max(p.mask, size);
    for (uint64_t at = 56; at < longest; at += 64) {
        detail::rpc_pack(words, 8, bytes, at, size);
        rpc_send<Tuning>(c, p, words);
    }
}

/* Closes the port: unlocks it (a port closed after a send stays the host's until it answers; the
 * next opener sees that). */
__device__ inline void rpc_close(rpc_client &c, const rpc_port &p) {
    detail::rpc_end(c, detail::rpc_index(p), p.out, p.owns, p.mask, detail::rpc_is_leader(p.mask));
}

/* One call by the calling warp's active lanes: each sends its 8 request words with `opcode` and
 * receives the first 2 words of the host's answer (the 'h' opcodes' reply: rpc_hostcall_opcode).
 * Call it from converged code. `timing`, if not null, gets the leader's per-step cycles added
 * (claim: open; fill: header and fill; release: the flip; wait; reply). */
template <typename Tuning = tuning>
__device__ inline void rpc_call(rpc_client &c, unsigned opcode, const uint64_t (&request)[8], uint64_t (&reply)[2],
                                phase_timing *timing = nullptr) {
    const detail::warp_call w = detail::begin_call(timing);
    /* Only a whole warp may keep a port: two divergent parts of one warp may call at once. */
    const bool keep = c.keep && w.mask == 0xffffffffu;
    rpc_port p;
    if (keep && c.held != detail::NOT_HELD) {
        p.index = c.held;
        p.out = c.held_state;
        p.mask = w.mask;
        p.owns = true;
        p.receive = false;
    } else {
        p = detail::rpc_begin(c, opcode, w.mask, w.is_leader, w.leader);
    }
    const unsigned long long t1 = detail::clock_if(w.timed);
    if (w.is_leader)
        detail::rpc_write_header(c, p, opcode);
    detail::rpc_fill<Tuning>(c, p, w.lane, request);
    const unsigned long long t2 = detail::clock_if(w.timed);
    detail::rpc_flip(c, p, w.is_leader);
    const unsigned long long t3 = detail::clock_if(w.timed);
    detail::rpc_wait(c, p, w.is_leader);
    const unsigned long long t4 = detail::clock_if(w.timed);
    uint64_t r[2];
    detail::rpc_read(c, p, w.lane, r);
    reply[0] = r[0];
    reply[1] = r[1];
    if (keep) {
        c.held = p.index;
        c.held_state = p.out;
        /* Orders every lane's reply loads before the next call's fill, which may store into
         * other lanes' buffers (the transposed fill). */
        __syncwarp(w.mask);
    } else {
        detail::rpc_end(c, detail::rpc_index(p), p.out, true, w.mask, w.is_leader);
    }
    if (w.timed) {
        /* The reply loads complete when their values are used: branch on them (a 2^-64 chance of
         * one cycle too many), so that the reply step is timed whole. */
        if ((r[0] ^ r[1]) == 0x0123456789abcdefull)
            timing->fill += 1;
        detail::add_steps(timing, w.t0, t1, t2, t3, t4);
    }
}

/* Gives back the port a keep_port client holds. Call it from every lane of the warp, after its
 * last rpc_call: it converges them first (__syncwarp of the whole warp), since parts of a warp
 * arriving apart would each release the port, the second time perhaps while another warp holds
 * it. */
__device__ inline void rpc_release_held(rpc_client &c) {
    __syncwarp();
    if (c.held == detail::NOT_HELD)
        return;
    detail::rpc_end(c, c.held & ~detail::CLAIM_BUSY, c.held_state, true, 0xffffffffu, detail::lane_id() == 0);
    c.held = detail::NOT_HELD;
}

/* A hostcall of `service` through the 'h' opcodes: the message streams and printf of
 * hostcall_cuda.cuh (send_message, printf_to) on an RPC client. */
template <typename Tuning = tuning>
__device__ inline void service_call(rpc_client &c, unsigned service, const uint64_t (&request)[8],
                                    uint64_t (&reply)[2]) {
    rpc_call<Tuning>(c, rpc_hostcall_opcode(service), request, reply);
}

/* printf through the host's PRINTF service (id 2) over the 'h' opcodes. */
template <typename... Args> __device__ int rpc_printf(rpc_client &c, const char *format, Args... args) {
    return printf_to(c, false, format, args...);
}

} // namespace hostcall

#endif /* __CUDACC__ */
#endif /* HOSTCALL_CUDA_RPC_CUH_INCLUDED */
