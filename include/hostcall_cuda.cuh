/*
 * hostcall_cuda.cuh: the device side of the hostcall protocols in CUDA C++ (sm_70 and newer).
 *
 * A warp of 32 lanes is a wave: the lanes that call together (__activemask()) share one packet,
 * each lane with its own 8-word request slot and 2-word reply. The host side is this project's
 * Rust listener (crate `hostcall`, feature `cuda`), serving a buffer in pinned, device-mapped
 * host memory. The wire layouts come from hostcall.h (included here with HOSTCALL_LAYOUT_ONLY).
 *
 *   hostcall::phase_client c = hostcall::phase_open(buffer);   // once per warp
 *   uint64_t request[8] = {...}, reply[2];
 *   hostcall::phase_call(c, 100, request, reply);              // every active lane
 *   hostcall::phase_printf(c, "lane %d: %f\n", lane, x);        // PRINTF message stream
 *
 * ---------------------------------------------------------------------------------------------
 * THE PHASE PROTOCOL (PROTOCOL.md section 2; works without platform atomics)
 *
 * Who writes what (the rest of the project's ownership table, core/src/phase.rs, holds):
 *   occupied bitmap      device only (fetch_or to claim, fetch_and to release), device memory
 *   device-state words   device only (the shadow phases and the ring throttle, below)
 *   header, request words   the warp holding the packet, before its release store of the phase
 *   device_phase[i]      the warp holding packet i: one release store per call (flipped value)
 *   host_phase[i], replies  the host, between seeing the flip and its release store of host_phase
 *
 * One call, by the first active lane (the leader) unless said otherwise:
 *   1. claim: atom.acquire.gpu.or on the occupied word (device memory, so the atomic stays on the
 *      GPU: no platform atomics needed); a set bit means busy, try the next index;
 *   2. the phase to store: the packet's SHADOW phase (device memory, below) flipped;
 *   3. fill: the lanes write their 8 words with 16-byte stores. Under load (the claim found
 *      other packets of the same 32-packet bitmap word in use) a full warp writes them transposed
 *      through shuffles, so that each store instruction covers 8 whole 64-byte slots: whole-line
 *      writes over PCIe instead of 16-byte pieces of 32 lines, which is what a busy link needs;
 *      alone, each lane writes its own slot (no shuffles: lower latency). The leader writes the
 *      16-byte header {activemask, service}; __syncwarp orders the lanes' stores before 4.;
 *   4. st.release.sys of the flipped phase to device_phase[i] (pairs with the host's Acquire
 *      fence in phase::Host::serve_packet); the shadow is updated;
 *   5. ring the doorbell, about once per HOSTCALL_CUDA_RING_INTERVAL_NS for the whole GPU
 *      (a throttle word in device memory; the ring itself waits for nothing);
 *   6. wait: ld.acquire.sys polls of host_phase[i] until it equals the stored phase (pairs with
 *      the host's Release store in phase::Host::serve_packet): spin for wait_policy::spin_ns, then
 *      back off with __nanosleep from min_sleep_ns doubling to max_sleep_ns;
 *   7. __syncwarp, then every lane reads its 2 reply words with one 16-byte system-scope load;
 *   8. __syncwarp, then atom.release.gpu.and clears the occupied bit (pairs with step 1's acquire
 *      of the next claimer).
 *
 * Tuning that fits the ABI, and what it rests on:
 *   - The occupied bitmap lives in device memory (cudaMalloc): the prefix's `occupied` field
 *     points there (phase::View::set_occupied_address on the host, which never reads it).
 *   - DEVICE STATE after the bitmap, in the same device allocation (not ABI: only this header's
 *     code reads it; see HOSTCALL_CUDA_DEVICE_STATE_SIZE): a shadow copy of device_phase[i] for
 *     every packet, and the doorbell throttle's last-ring time. The shadow spares a PCIe read of
 *     device_phase at every claim: only this code writes device_phase, so the shadow is exact.
 *   - The claim does not read host_phase (a PCIe round trip) to check the phases agree. A
 *     warp releases its occupied bit only after it saw host_phase == device_phase, and a warp
 *     never abandons a submitted packet, so "bit clear" implies "phases agree". (ROCm's device
 *     code checks; the benchmark variant check_claim, std-adapter/examples/cuda/variants.cuh,
 *     does too, at the cost of that read.)
 *   - All request and reply accesses are 16 bytes wide; the header is one 16-byte store.
 *   - keep_packet (phase_open): a whole warp keeps its packet claimed from one call to the next,
 *     skipping steps 1, 2 and 8 (what that saves is in docs/gpu.md); it must give the
 *     packet back with phase_release_held before it ends. Partial warps always claim and release.
 *   - Do not mix this code with another device implementation (or with the emulated waves of the
 *     Rust crate) on one buffer: they would not keep the shadow.
 *
 * The doorbell. On ROCm it is an HSA signal; here too the prefix's `doorbell` is the device
 * address of an object of ROCm's amd_signal_t layout (64 bytes; 0: none), in mapped host memory:
 * the device stores the global timer (odd, so never 0) into its value word at +8
 * (HOSTCALL_SIGNAL_VALUE_OFFSET) at most once per HOSTCALL_CUDA_RING_INTERVAL_NS. A listener
 * that spins (ListenerConfig::spinning) never looks at it; one that sleeps polls it
 * (hostcall::backend::cuda::MappedDoorbell) and polls its buffers on every timeout anyway.
 *
 * ---------------------------------------------------------------------------------------------
 * THE STACK PROTOCOL (PROTOCOL.md section 1): REQUIRES PLATFORM ATOMICS.
 * Device and host both read-modify-write `ready_stack` in host memory. Where the GPU's atomics on
 * host memory are not atomic with the CPU's (cudaDevAttrHostNativeAtomicSupported == 0, as on
 * the H200 over PCIe), packets are served twice or lost and waves hang. The Rust host refuses to
 * create a stack buffer on such a device (hostcall::backend::cuda::Cuda::check_protocol); stack_call is
 * here for platforms where the attribute is 1.
 */
#ifndef HOSTCALL_CUDA_CUH_INCLUDED
#define HOSTCALL_CUDA_CUH_INCLUDED

#ifndef HOSTCALL_LAYOUT_ONLY
#define HOSTCALL_LAYOUT_ONLY
#endif
#include "hostcall.h"

#include <stdint.h>

/* The device state after the occupied bitmap, in the same device allocation (byte offsets from
 * the bitmap's start; the Rust side computes the same in hostcall::backend::cuda::DeviceStateLayout). */
#define HOSTCALL_CUDA_ALIGN128(x) ((((uint64_t)(x)) + 127u) & ~(uint64_t)127u)
#define HOSTCALL_CUDA_OCCUPIED_BYTES(n) ((((uint64_t)(n) + 31u) / 32u) * 4u)
#define HOSTCALL_CUDA_SHADOW_OFFSET(n) HOSTCALL_CUDA_ALIGN128(HOSTCALL_CUDA_OCCUPIED_BYTES(n))
#define HOSTCALL_CUDA_RING_OFFSET(n) (HOSTCALL_CUDA_SHADOW_OFFSET(n) + HOSTCALL_CUDA_ALIGN128(4u * (uint64_t)(n)))
#define HOSTCALL_CUDA_DEVICE_STATE_SIZE(n) (HOSTCALL_CUDA_RING_OFFSET(n) + 128u)

#ifndef HOSTCALL_CUDA_RING_INTERVAL_NS
#define HOSTCALL_CUDA_RING_INTERVAL_NS 10000u
#endif

/* Byte offset of the value word in a doorbell signal (ROCm's amd_signal_t: kind @0, value @8). */
#define HOSTCALL_SIGNAL_VALUE_OFFSET 8u

#if defined(__CUDACC__)

namespace hostcall {

/* ---- PTX helpers: each names its ordering; the protocol text above says what pairs with it. */
namespace detail {

__device__ __forceinline__ unsigned lane_id() {
    unsigned lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

/* The value word of the doorbell signal whose handle is `handle`; null for no doorbell. */
__device__ __forceinline__ uint64_t *signal_value(uint64_t handle) {
    return handle == 0 ? nullptr : reinterpret_cast<uint64_t *>(handle + HOSTCALL_SIGNAL_VALUE_OFFSET);
}

__device__ __forceinline__ uint64_t global_timer_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned atom_or_acquire_gpu(unsigned *p, unsigned v) {
    unsigned old;
    asm volatile("atom.acquire.gpu.global.or.b32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

__device__ __forceinline__ void red_and_release_gpu(unsigned *p, unsigned v) {
    asm volatile("red.release.gpu.global.and.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned ld_relaxed_gpu(const unsigned *p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint64_t ld_relaxed_gpu64(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_relaxed_gpu(unsigned *p, unsigned v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned ld_acquire_sys(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned ld_relaxed_sys(const unsigned *p) {
    unsigned v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint64_t ld_acquire_sys64(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint64_t ld_relaxed_sys64(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(unsigned *p, unsigned v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void st_relaxed_sys(unsigned *p, unsigned v) {
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void st_relaxed_sys64(uint64_t *p, uint64_t v) {
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void st_release_sys64(uint64_t *p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void fence_sc_sys() { asm volatile("fence.sc.sys;" ::: "memory"); }
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

/* 16-byte request store: weak (ordered by the release that follows) or relaxed at system scope. */
template <bool SYS>
__device__ __forceinline__ void st_v2(uint64_t *p, uint64_t a, uint64_t b) {
    if (SYS)
        asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
    else
        asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

__device__ __forceinline__ uint64_t shfl64(uint64_t v, unsigned src) {
    const unsigned lo = __shfl_sync(0xffffffffu, static_cast<unsigned>(v), src);
    const unsigned hi = __shfl_sync(0xffffffffu, static_cast<unsigned>(v >> 32), src);
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

/* Step 3, transposed (a full warp): store k (0..3) of lane L writes payload bytes
 * k*512 + L*16 .. +16, which are words 2q, 2q+1 (q = L % 4) of the slot of lane 8k + L/4, so
 * each store instruction covers 512 contiguous bytes (8 whole slots). In each of 4 rounds every
 * lane offers one pair of its request and keeps what it needs from lane 8k + L/4. */
template <bool SYS>
__device__ __forceinline__ void fill_transposed(uint64_t *payload, unsigned lane, const uint64_t (&request)[8]) {
    const unsigned q = lane & 3u;
#pragma unroll
    for (unsigned k = 0; k < 4; ++k) {
        const unsigned src = k * 8u + (lane >> 2);
        uint64_t x = 0, y = 0;
#pragma unroll
        for (unsigned r = 0; r < 4; ++r) {
            const uint64_t a = shfl64(request[2 * r], src);
            const uint64_t b = shfl64(request[2 * r + 1], src);
            if (q == r) {
                x = a;
                y = b;
            }
        }
        st_v2<SYS>(payload + k * 64u + lane * 2u, x, y);
    }
}

/* 16-byte reply load at system scope: ordered after the leader's acquire by __syncwarp, and
 * never served from a stale cache line (the host wrote it). */
__device__ __forceinline__ void ld_v2_sys(const uint64_t *p, uint64_t &a, uint64_t &b) {
    asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}

__device__ __forceinline__ void spin_ns(uint64_t ns) {
    const uint64_t start = global_timer_ns();
    while (global_timer_ns() - start < ns) {
    }
}

} // namespace detail

/* How a waiting warp polls host memory: spin (one PCIe read after another) for spin_ns, then
 * sleep between polls, from min_sleep_ns doubling to max_sleep_ns. Thousands of warps spinning
 * on host memory saturate the link with reads; the sleeps keep a busy GPU's polls few.
 * poll_stagger_ns: the gap between the two loads in flight of a tuning that keeps two (the
 * benchmark variant `pipelined`). */
struct wait_policy {
    unsigned spin_ns;
    unsigned min_sleep_ns;
    unsigned max_sleep_ns;
    unsigned poll_stagger_ns;
};

__host__ __device__ inline wait_policy default_wait_policy() {
    wait_policy p = {20000u, 256u, 8192u, 500u};
    return p;
}

namespace detail {
constexpr unsigned NOT_HELD = 0xffffffffu;

/* What every client (phase, line, RPC) keeps besides its buffer's addresses: where its claims
 * start looking (its global warp id by default), how it waits, and what it keeps between calls.
 * `keep` (keep_packet of phase_open and line_open, keep_port of rpc_open): a call by the whole
 * warp keeps its packet (port) claimed for the next whole-warp call, which then skips the claim
 * and the release; `held` is that index (with its claim's CLAIM_BUSY flag) or NOT_HELD, and
 * `held_state` the protocol's word for it (phase: the phase last stored; line: the last
 * sequence; RPC: the outbox bit). The warp must give it back (phase_release_held,
 * line_release_held, rpc_release_held) before it ends, or it stays claimed for good. */
struct claims {
    unsigned start;
    wait_policy wait;
    bool keep;
    unsigned held;
    unsigned held_state;
};

__device__ __forceinline__ claims fresh_claims(unsigned start, wait_policy wait, bool keep) {
    claims c = {start, wait, keep, NOT_HELD, 0};
    return c;
}
} // namespace detail

/* A warp's handle on one phase buffer: the prefix, read once (it lives in host memory, so every
 * read of it is a PCIe round trip), plus the device state's addresses. */
struct phase_client : detail::claims {
    unsigned *device_phase;               /* host memory */
    const unsigned *host_phase;           /* host memory */
    unsigned *occupied;                   /* device memory */
    unsigned *shadow;                     /* device memory: device_phase[i] as last stored */
    uint64_t *last_ring;                  /* device memory: global time of the last ring */
    hostcall_phase_header_t *headers;     /* host memory */
    hostcall_payload_t *payloads;         /* host memory */
    uint64_t *doorbell;                   /* host memory, or null */
    unsigned num_packets;
    /* keep (keep_packet): a kept packet's calls also skip the shadow (step 2); held_state is
     * its phase. */
};

/* Per-step clock64 cycles of the leader lane, summed over calls (phase_call with a timing
 * pointer). */
struct phase_timing {
    unsigned long long claim, fill, release, wait, reply, calls;
};

struct line_client;

/* The choices phase_call and line_call make at their steps: this struct is what they do. A
 * benchmark measures an alternative by passing, as their template argument, a type derived from
 * it that hides one member (std-adapter/examples/cuda/variants.cuh holds the seven measured
 * ones). Any choice changes how, never whether, the protocol's orderings are kept. */
struct tuning {
    /* Phase step 3: the request and header stores are weak st.global (false) or st.relaxed.sys. */
    static constexpr bool sys_stores = false;
    /* Step 5: whether a call rings the doorbell. */
    static constexpr bool rings = true;
    /* Phase step 3: whether a full warp stores its requests transposed, given whether its claim
     * found other packets of the bitmap word in use (`busy`, a sign of load). */
    static __device__ __forceinline__ bool phase_transposed(bool busy) { return busy; }
    /* Line steps 3 and 5: whether a full warp stores and polls transposed. */
    static constexpr bool line_transposed = true;
    /* Phase step 1, after the claim of packet `index` (its `bit` in its occupied word) succeeded:
     * whether to take it (else the hook has given the claim back and the search goes on). */
    static __device__ __forceinline__ bool phase_claim_agrees(const phase_client &, unsigned, unsigned) {
        return true;
    }
    /* Phase step 4 (leader): the release store of the flipped phase. */
    static __device__ __forceinline__ void phase_publish(unsigned *device_phase, unsigned phase);
    /* Phase step 6 (leader), before the acquire polls: a first stretch of polling of `host`, since
     * `started`; true if it saw host_phase == phase with acquire semantics (the wait is then over). */
    static __device__ __forceinline__ bool phase_wait_first(const phase_client &, const unsigned *, unsigned,
                                                            uint64_t) {
        return false;
    }
    /* Line step 5 (every lane of `mask`): polls its 3 reply words at `words + t * stride` (t < 3)
     * until all carry `seq`, then has them in `w`. */
    static __device__ __forceinline__ void line_wait(const line_client &c, unsigned mask, const uint64_t *words,
                                                     unsigned stride, unsigned seq, uint64_t (&w)[3]);
};

__device__ __forceinline__ void tuning::phase_publish(unsigned *device_phase, unsigned phase) {
    /* Release: publishes header and requests; pairs with the host's Acquire fence in
     * phase::Host::serve_packet. */
    detail::st_release_sys(device_phase, phase);
}

/* This warp's global index in a 1-D or 3-D launch, for spreading claims over the packets. */
__device__ inline unsigned global_warp_id() {
    const unsigned threads_per_block = blockDim.x * blockDim.y * blockDim.z;
    const unsigned thread_in_block = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    return block * ((threads_per_block + 31u) / 32u) + thread_in_block / 32u;
}

/* Reads the prefix of the phase buffer at `buffer` (its device address). Every lane may call it;
 * the loads of one warp coalesce. `keep_packet`: see detail::claims. */
__device__ inline phase_client phase_open(const void *buffer, wait_policy wait = default_wait_policy(),
                                          unsigned start = global_warp_id(), bool keep_packet = false) {
    const hostcall_phase_prefix_t *prefix = static_cast<const hostcall_phase_prefix_t *>(buffer);
    phase_client c;
    /* Relaxed system-scope loads: the host wrote the prefix before the launch (which orders it). */
    c.device_phase = reinterpret_cast<unsigned *>(detail::ld_relaxed_sys64(&prefix->device_phase));
    c.host_phase = reinterpret_cast<const unsigned *>(detail::ld_relaxed_sys64(&prefix->host_phase));
    const uint64_t occupied = detail::ld_relaxed_sys64(&prefix->occupied);
    c.headers = reinterpret_cast<hostcall_phase_header_t *>(detail::ld_relaxed_sys64(&prefix->headers));
    c.payloads = reinterpret_cast<hostcall_payload_t *>(detail::ld_relaxed_sys64(&prefix->payloads));
    c.doorbell = detail::signal_value(detail::ld_relaxed_sys64(&prefix->doorbell));
    c.num_packets = detail::ld_relaxed_sys(reinterpret_cast<const unsigned *>(&prefix->num_packets));
    c.occupied = reinterpret_cast<unsigned *>(occupied);
    c.shadow = reinterpret_cast<unsigned *>(occupied + HOSTCALL_CUDA_SHADOW_OFFSET(c.num_packets));
    c.last_ring = reinterpret_cast<uint64_t *>(occupied + HOSTCALL_CUDA_RING_OFFSET(c.num_packets));
    static_cast<detail::claims &>(c) = detail::fresh_claims(start, wait, keep_packet);
    return c;
}

namespace detail {

/* Set in a claimed index when other entries of its bitmap word were in use (a sign of load,
 * which picks the fill). */
constexpr unsigned CLAIM_BUSY = 1u << 31;

/* Claims an entry of the device-memory bitmap `bits` (n entries: the phase and line protocols'
 * occupied bits, the RPC client's lock bits) from `start` upwards, wrapping: an entry whose bit
 * was clear is taken when `take(index, bit)` says so (a hook that refuses has given the bit back
 * itself); when every entry is busy, sleeps (64 ns doubling to 4 us) and tries again. Returns the
 * index, with CLAIM_BUSY set when other entries of its word were in use. */
template <typename Take>
__device__ inline unsigned claim_bit(unsigned *bits, unsigned n, unsigned start, Take take) {
    unsigned index = start % n;
    unsigned sleep = 64;
    for (;;) {
        for (unsigned k = 0; k < n; ++k) {
            const unsigned bit = 1u << (index % 32u);
            /* Acquire: pairs with the release `red.and` of the entry's previous holder (its
             * release step), so its device-state stores and its reads of the packet happen before
             * our use. */
            const unsigned old = atom_or_acquire_gpu(&bits[index / 32u], bit);
            if ((old & bit) == 0 && take(index, bit))
                return old != 0 ? index | CLAIM_BUSY : index;
            index = index + 1 == n ? 0 : index + 1;
        }
        __nanosleep(sleep);
        sleep = sleep < 4096u ? sleep * 2u : sleep;
    }
}

/* Step 1 (leader): claims a packet whose occupied bit was clear (claim_bit); the tuning's hook
 * may refuse it. */
template <typename Tuning>
__device__ inline unsigned phase_claim(const phase_client &c) {
    return claim_bit(c.occupied, c.num_packets, c.start,
                     [&](unsigned index, unsigned bit) { return Tuning::phase_claim_agrees(c, index, bit); });
}

/* Step 5 (leader): rings when the last ring (`last`, read by ring_last) is older than the
 * interval. Through ring_at this costs the call one load of device memory between the phase
 * store and the first poll: the host cannot answer within that time anyway, so it only shifts
 * when the polls happen (line_call reads it before its fill instead). The ring itself (a
 * reduction and a store) waits for nothing. Warps that read the same old time may all ring:
 * harmless. */
__device__ inline void ring_after(uint64_t *doorbell, uint64_t *last_ring, uint64_t last) {
    if (doorbell == nullptr)
        return;
    const uint64_t now = global_timer_ns();
    if (now - last < HOSTCALL_CUDA_RING_INTERVAL_NS)
        return;
    /* Relaxed: a throttle, ordered with nothing. */
    asm volatile("red.relaxed.gpu.global.max.u64 [%0], %1;" ::"l"(last_ring), "l"(now) : "memory");
    /* Relaxed: the doorbell only says "look"; the packet is published by its own stores. */
    st_relaxed_sys64(doorbell, now | 1u);
}

/* The throttle's read of the last ring time, which ring_after decides with. Relaxed: a
 * throttle; a stale value only repeats a ring. Issued early (line_call: before the fill), the
 * device-memory load overlaps the work before the ring instead of delaying the ring. */
__device__ __forceinline__ uint64_t ring_last(const uint64_t *doorbell, uint64_t *last_ring) {
    return doorbell == nullptr ? 0 : ld_relaxed_gpu64(last_ring);
}

__device__ inline void ring_at(uint64_t *doorbell, uint64_t *last_ring) {
    ring_after(doorbell, last_ring, ring_last(doorbell, last_ring));
}

__device__ inline void ring(const phase_client &c) { ring_at(c.doorbell, c.last_ring); }

/* How every wait loop paces its polls of host memory (wait_policy): no pause for spin_ns after
 * `started`, then __nanosleep from min_sleep_ns doubling to max_sleep_ns. */
struct backoff {
    const wait_policy &wait;
    uint64_t started;
    unsigned sleep;

    __device__ backoff(const wait_policy &w, uint64_t since) : wait(w), started(since), sleep(w.min_sleep_ns) {}

    /* After a poll that did not find what it waits for. */
    __device__ __forceinline__ void pause() {
        if (global_timer_ns() - started > wait.spin_ns) {
            __nanosleep(sleep);
            sleep = sleep < wait.max_sleep_ns ? sleep * 2u : wait.max_sleep_ns;
        }
    }
};

/* Polls the host-written word `word` with acquire loads until `bit_of(word) == value`, paced by a
 * backoff since `started`. `bit_of` is the protocol's reading of the word (phase: its low bit;
 * rpc: non-zero). The caller's comment names the release the acquire pairs with. */
template <typename BitOf>
__device__ inline void poll_acquire_sys(const unsigned *word, unsigned value, const wait_policy &wait,
                                        uint64_t started, BitOf bit_of) {
    backoff pace(wait, started);
    while (bit_of(ld_acquire_sys(word)) != value)
        pace.pause();
}

/* Step 6 (leader): waits until host_phase[index] == phase, with acquire semantics. */
template <typename Tuning>
__device__ inline void wait_for_host(const phase_client &c, unsigned index, unsigned phase) {
    const unsigned *host = &c.host_phase[index];
    const uint64_t started = global_timer_ns();
    if (Tuning::phase_wait_first(c, host, phase, started))
        return;
    /* Acquire: pairs with the host's Release store of host_phase in phase::Host::serve_packet; the
     * replies it wrote before are visible to the loads that follow (the other lanes' through the
     * __syncwarp in phase_call). */
    poll_acquire_sys(host, phase, c.wait, started, [](unsigned w) { return w & 1u; });
}

__device__ __forceinline__ unsigned long long clock_if(bool timed) { return timed ? clock64() : 0ull; }

/* Adds one call's steps to `timing`, from the clock64 reads at its start (t0) and after its
 * claim, fill, release (line: submit), wait and reply (t5, read here). */
__device__ __forceinline__ void add_steps(phase_timing *timing, unsigned long long t0, unsigned long long t1,
                                          unsigned long long t2, unsigned long long t3, unsigned long long t4) {
    const unsigned long long t5 = clock64();
    timing->claim += t1 - t0;
    timing->fill += t2 - t1;
    timing->release += t3 - t2;
    timing->wait += t4 - t3;
    timing->reply += t5 - t4;
    timing->calls += 1;
}

/* Who is calling, as phase_call and line_call both start: the active lanes, this lane, the leader
 * (lowest active lane), whether this lane times the steps, and the first clock read. */
struct warp_call {
    unsigned mask, lane, leader;
    bool is_leader, timed;
    unsigned long long t0;
};

__device__ __forceinline__ warp_call begin_call(const void *timing) {
    warp_call w;
    w.mask = __activemask();
    w.lane = lane_id();
    w.leader = __ffs(w.mask) - 1;
    w.is_leader = w.lane == w.leader;
    w.timed = timing != nullptr && w.is_leader;
    w.t0 = clock_if(w.timed);
    return w;
}

} // namespace detail

/* One hostcall by the calling warp's active lanes: each sends its 8 request words to `service`
 * and receives 2 reply words (an error reply is {HOSTCALL_ERROR_REPLY, code}). Call it from
 * converged code; lanes that call together share one packet. `timing`, if not null, gets the
 * leader's per-step cycles added. */
template <typename Tuning = tuning>
__device__ inline void phase_call(phase_client &c, unsigned service, const uint64_t (&request)[8],
                                  uint64_t (&reply)[2], phase_timing *timing = nullptr) {
    const detail::warp_call w = detail::begin_call(timing);
    const unsigned mask = w.mask, lane = w.lane, leader = w.leader;
    const bool is_leader = w.is_leader, timed = w.timed;
    const unsigned long long t0 = w.t0;

    /* Only a whole warp may keep a packet: two divergent parts of one warp may be in phase_call
     * at once, and must not share it. */
    const bool keep = c.keep && mask == 0xffffffffu;
    const bool held = keep && c.held != detail::NOT_HELD;
    unsigned claimed = c.held;
    if (!held) {
        if (is_leader)
            claimed = detail::phase_claim<Tuning>(c);
        claimed = __shfl_sync(mask, claimed, leader);
    }
    const unsigned index = claimed & ~detail::CLAIM_BUSY;
    const bool transposed = mask == 0xffffffffu && Tuning::phase_transposed((claimed & detail::CLAIM_BUSY) != 0);
    const unsigned long long t1 = detail::clock_if(timed);

    uint64_t *slot = &c.payloads[index].slots[lane][0];
    constexpr bool sys = Tuning::sys_stores;
    unsigned phase = c.held_state;
    if (is_leader && !held)
        /* A load of device memory, issued early so it overlaps the stores. */
        phase = detail::ld_relaxed_gpu(&c.shadow[index]);
    if (transposed) {
        detail::fill_transposed<sys>(&c.payloads[index].slots[0][0], lane, request);
    } else {
        detail::st_v2<sys>(slot + 0, request[0], request[1]);
        detail::st_v2<sys>(slot + 2, request[2], request[3]);
        detail::st_v2<sys>(slot + 4, request[4], request[5]);
        detail::st_v2<sys>(slot + 6, request[6], request[7]);
    }
    if (is_leader) {
        detail::st_v2<sys>(reinterpret_cast<uint64_t *>(&c.headers[index]), (uint64_t)mask, (uint64_t)service);
        phase = (phase ^ 1u) & 1u;
    }
    /* Orders every lane's request stores before the leader's release store (barrier, then the
     * release's cumulativity). */
    __syncwarp(mask);
    const unsigned long long t2 = detail::clock_if(timed);

    unsigned long long t3 = 0, t4 = 0;
    if (is_leader) {
        Tuning::phase_publish(&c.device_phase[index], phase);
        /* Relaxed: only device code reads the shadow, after claiming the packet (acquire),
         * which our release of the occupied bit (step 8) orders after this store. A kept packet's
         * shadow is stored when it is given back. */
        if (!keep)
            detail::st_relaxed_gpu(&c.shadow[index], phase);
        t3 = detail::clock_if(timed);
        if (Tuning::rings)
            detail::ring(c);
        detail::wait_for_host<Tuning>(c, index, phase);
        t4 = detail::clock_if(timed);
    }
    /* Orders the leader's acquire before every lane's reply load. */
    __syncwarp(mask);
    uint64_t r0, r1;
    detail::ld_v2_sys(slot, r0, r1);
    reply[0] = r0;
    reply[1] = r1;
    if (keep) {
        c.held = claimed;
        c.held_state = __shfl_sync(mask, phase, leader);
    }
    /* Orders every lane's reply load before the leader's release of the packet. */
    __syncwarp(mask);
    if (is_leader) {
        if (!keep)
            /* Release: pairs with the acquire fetch_or of the next claimer (step 1). */
            detail::red_and_release_gpu(&c.occupied[index / 32u], ~(1u << (index % 32u)));
        if (timed) {
            /* The reply loads complete when their values are used (a kept packet's call returns
             * before): branch on them, so that step 7 is timed whole. */
            if ((r0 ^ r1) == 0x0123456789abcdefull)
                timing->fill += 1; /* a 2^-64 chance of one cycle too many */
            detail::add_steps(timing, t0, t1, t2, t3, t4);
        }
    }
}

/* Gives back the packet a keep_packet client holds (step 8 of its last call, with the shadow
 * store). Call it from every lane of the warp, after its last phase_call: it converges them
 * first (__syncwarp of the whole warp; parts of a warp arriving apart would each release the
 * packet, the second time perhaps while another warp holds it, as rpc_release_held did on the
 * H200 before it converged), which also orders every lane's last reply load before the release. */
__device__ inline void phase_release_held(phase_client &c) {
    __syncwarp();
    if (c.held == detail::NOT_HELD)
        return;
    const unsigned index = c.held & ~detail::CLAIM_BUSY;
    if (detail::lane_id() == 0) {
        /* Relaxed: published by the release below (see phase_call). */
        detail::st_relaxed_gpu(&c.shadow[index], c.held_state);
        /* Release: pairs with the acquire fetch_or of the next claimer (step 1). */
        detail::red_and_release_gpu(&c.occupied[index / 32u], ~(1u << (index % 32u)));
    }
    c.held = detail::NOT_HELD;
}

/* ---- THE LINE PROTOCOL (PROTOCOL.md section 9; this project's own, no platform atomics) ----
 *
 * Every 8-byte store carries the call's 7-bit sequence (bits 57..64) and 57 data bits, so the host
 * polls the request words themselves and the warp polls its reply words themselves: no fence
 * before the request's flag, no second read after the reply's. A lane's 8 request words travel
 * as 9 line words (their low 57 bits, then their top 7 bits packed), its 2 reply words as 3.
 *
 *   hostcall::line_client c = hostcall::line_open(buffer);    // once per warp
 *   hostcall::line_call(c, 100, request, reply);              // every active lane
 *
 * Memory: the request and reply blocks in pinned, mapped host memory; `occupied` and
 * `device_seq` in device memory (hostcall::backend::cuda::line_buffer puts them, and the doorbell
 * throttle, in one allocation laid out as the phase client's device state: occupied at 0,
 * device_seq where the phase shadow is, the last ring time at HOSTCALL_CUDA_RING_OFFSET).
 *
 * One call:
 *   1. claim (leader): atom.acquire.gpu.or on occupied (claim_bit, no phase check); read
 *      device_seq[i] (ld.relaxed.gpu, ordered by the acquire) = p; the sequence s = p + 1, 1
 *      after HOSTCALL_LINE_SEQ_MAX (127). A keep_packet client skips this and the release (6).
 *   2. refresh, only when s == 127, or s == 1 after a wrap: the active lanes zero the mask word,
 *      the request words and the reply words of lanes 0..31 (st.relaxed.sys; the words of lanes
 *      32..63 are never written by this code and keep the host's init zeroes), __syncwarp,
 *      fence.acq_rel.sys (the Release fence the host pairs with its Acquire fence after reading a
 *      pending head), __syncwarp. Twice per 127 calls.
 *   3. fill: each lane's 9 line words, st.relaxed.sys.u64 each (single-copy atomic; no fence:
 *      the host checks every word's sequence). A full warp stores the mask word and its 32 lanes'
 *      words transposed, 32 consecutive words (256 bytes, 4 whole lines) per store instruction
 *      (line_fill_transposed); otherwise each lane stores its own 72 bytes and the leader the
 *      mask word at step 4;
 *   4. submit (leader, after __syncwarp): the head (st.relaxed.sys: the service; a warp's 32-bit
 *      activemask leaves the head's mask bits 0), device_seq[i] = s (st.relaxed.gpu); ring the
 *      doorbell (throttled, as phase_call);
 *   5. wait: each lane polls 3 reply words (ld.relaxed.sys.u64) until all carry s (a word seen is
 *      not loaded again; __all_sync decides): its own 3, or for a full warp word 32 t + L of the
 *      block at load t (256 contiguous bytes per load instruction), then 3 shuffles hand each
 *      lane its own (line_reply_transposed); spin for wait_policy::spin_ns, then __nanosleep
 *      backoff. The data bits are the reply: no second read. (The benchmark variant lane_fill
 *      keeps a full warp on the per-lane fill and poll);
 *   6. release (leader, after __syncwarp): red.release.gpu.and clears the occupied bit.
 */
/* The layout (hostcall_line_prefix_t, hostcall_line_request_t, hostcall_line_reply_t, the word
 * macros and HOSTCALL_LINE_SEQ_MAX) is declared in hostcall.h, section 9. */
#define HOSTCALL_LINE_REQUEST_WORDS (sizeof(hostcall_line_request_t) / 8u)
#define HOSTCALL_LINE_REPLY_WORDS (sizeof(hostcall_line_reply_t) / 8u)
/* A warp's request region: the head, the mask word and 32 lanes' words (290 words), and its
 * reply region (96 words), each from the start of its block. */
#define HOSTCALL_LINE_CUDA_REQUEST_REGION (2u + 32u * HOSTCALL_LINE_REQUEST_LANE_WORDS)
#define HOSTCALL_LINE_CUDA_REPLY_REGION (32u * HOSTCALL_LINE_REPLY_LANE_WORDS)

namespace detail {

/* Where this lane's words travel in a full warp's transposed fill and reply poll. They depend on
 * the lane alone, so line_open works them out once (line_routes_of). `fill`: bits 5 k (k < 9),
 * the lane whose word k this lane stores (line_fill_transposed); bits 45..49, the rotation
 * (lane - 2) % 9 of the words it receives. `reply`: bits 5 k (k < 3), the lane that loaded this
 * lane's reply word k; bits 15 + 2 k, which of its own 3 loads this lane offers in shuffle k
 * (line_reply_transposed). */
struct line_routes {
    uint64_t fill;
    unsigned reply;
};

__device__ inline line_routes line_routes_of(unsigned lane) {
    line_routes r = {0, 0};
    for (unsigned k = 0; k < 9; ++k) {
        /* Lane j stores word k of a lane at its store t = 2 (k - j + 2) % 9 (2 = 1/5 mod 9; 9
         * instead of 0 for j < 2, whose store 0 is the header), which is word 32 t + j of the
         * block, of lane (32 t + j - 2) / 9. 38 = 2 + 36 keeps k - j + 2 positive. */
        unsigned t = (2u * ((k + 38u - lane) % 9u)) % 9u;
        if (t == 0 && lane < 2u)
            t = 9;
        r.fill |= static_cast<uint64_t>((32u * t + lane - 2u) / 9u) << (5u * k);
    }
    r.fill |= static_cast<uint64_t>((lane + 7u) % 9u) << 45;
    for (unsigned k = 0; k < 3; ++k) {
        /* Lane L's word k is word 3 L + k of the block, loaded by lane (3 L + k) % 32 at its
         * load (3 L + k) / 32; the one lane reading this lane in shuffle k is 11 (j - k) % 32
         * (11 = 1/3 mod 32). */
        const unsigned reader = (11u * (lane + 32u - k)) % 32u;
        r.reply |= ((3u * lane + k) % 32u) << (5u * k);
        r.reply |= ((3u * reader + k) / 32u) << (15u + 2u * k);
    }
    return r;
}

} // namespace detail

/* A warp's handle on one line buffer: the prefix, read once. */
struct line_client : detail::claims {
    uint64_t *requests;  /* host memory: Request[n] */
    uint64_t *replies;   /* host memory: Reply[n] */
    unsigned *device_seq; /* device memory */
    unsigned *occupied;   /* device memory */
    uint64_t *last_ring;  /* device memory */
    uint64_t *doorbell;   /* host memory, or null */
    unsigned num_packets;
    detail::line_routes routes; /* this lane's, for a full warp's calls */
    /* keep (keep_packet): held_state is the kept packet's last sequence, stored to device_seq
     * by line_release_held. */
};

__device__ inline line_client line_open(const void *buffer, wait_policy wait = default_wait_policy(),
                                        unsigned start = global_warp_id(), bool keep_packet = false) {
    const hostcall_line_prefix_t *prefix = static_cast<const hostcall_line_prefix_t *>(buffer);
    line_client c;
    /* Relaxed system-scope loads: the host wrote the prefix before the launch. */
    c.requests = reinterpret_cast<uint64_t *>(detail::ld_relaxed_sys64(&prefix->requests));
    c.replies = reinterpret_cast<uint64_t *>(detail::ld_relaxed_sys64(&prefix->replies));
    c.device_seq = reinterpret_cast<unsigned *>(detail::ld_relaxed_sys64(&prefix->device_seq));
    const uint64_t occupied = detail::ld_relaxed_sys64(&prefix->occupied);
    c.doorbell = detail::signal_value(detail::ld_relaxed_sys64(&prefix->doorbell));
    c.num_packets = detail::ld_relaxed_sys(reinterpret_cast<const unsigned *>(&prefix->num_packets));
    c.occupied = reinterpret_cast<unsigned *>(occupied);
    c.last_ring = reinterpret_cast<uint64_t *>(occupied + HOSTCALL_CUDA_RING_OFFSET(c.num_packets));
    static_cast<detail::claims &>(c) = detail::fresh_claims(start, wait, keep_packet);
    c.routes = detail::line_routes_of(detail::lane_id());
    return c;
}

namespace detail {

/* Step 1 (leader): claim_bit on the occupied bits, every clear one taken. */
__device__ inline unsigned line_claim(const line_client &c) {
    return claim_bit(c.occupied, c.num_packets, c.start, [](unsigned, unsigned) { return true; }) & ~CLAIM_BUSY;
}

/* Step 2: the wrap refresh, by the active lanes together (see the steps above). */
__device__ inline void line_refresh(uint64_t *request, uint64_t *reply, unsigned mask, unsigned lane) {
    const unsigned rank = __popc(mask & ((1u << lane) - 1u));
    const unsigned count = __popc(mask);
    constexpr unsigned request_words = HOSTCALL_LINE_CUDA_REQUEST_REGION - 1u; /* from the mask word */
    for (unsigned w = rank; w < request_words + HOSTCALL_LINE_CUDA_REPLY_REGION; w += count) {
        uint64_t *word = w < request_words ? request + 1u + w : reply + (w - request_words);
        /* Relaxed: published by the fence below. */
        st_relaxed_sys64(word, 0);
    }
    /* Every lane's zeroes happen before the fences (barrier), and each lane's fence is a Release
     * fence at system scope, cumulative over them: any head stored after it carries them. */
    __syncwarp(mask);
    fence_acq_rel_sys();
    __syncwarp(mask);
}

__device__ __forceinline__ uint64_t line_word(uint64_t data, unsigned seq) { return HOSTCALL_LINE_WORD(data, seq); }

__device__ __forceinline__ uint64_t line_data(uint64_t word) { return HOSTCALL_LINE_DATA_OF(word); }

/* A lane's 8 request words as the data of its 9 line words: word k's low 57 bits (k < 8), then
 * the top 7 bits of word k at bits 7 k of the ninth. */
__device__ __forceinline__ void line_encode(const uint64_t (&request)[8], uint64_t (&data)[9]) {
    uint64_t top = 0;
#pragma unroll
    for (unsigned k = 0; k < 8; ++k) {
        data[k] = line_data(request[k]);
        top |= (request[k] >> 57) << (7u * k);
    }
    data[8] = top;
}

/* A lane's 2 reply words from its 3 line words (the sequences already checked). */
__device__ __forceinline__ void line_decode_reply(const uint64_t (&w)[3], uint64_t (&reply)[2]) {
    const uint64_t top = line_data(w[2]);
    reply[0] = line_data(w[0]) | (top & 0x7fu) << 57;
    reply[1] = line_data(w[1]) | ((top >> 7) & 0x7fu) << 57;
}

/* v[i] = v[(i + r) % 9] for every i, with r (0..8) differing between lanes: four conditional
 * rotations by 1, 2, 4 and 8 of selects, so the array stays in registers (no local memory). Each
 * goes round its one 9-cycle (gcd(b, 9) = 1) in place, so only one old word is kept beside the
 * array (the 64-register budget of a kernel of 1,024 threads is tight). */
__device__ __forceinline__ void rotate9(uint64_t (&v)[9], unsigned r) {
#pragma unroll
    for (unsigned b = 1; b < 9; b <<= 1) {
        const bool on = (r & b) != 0;
        const uint64_t first = v[0];
        unsigned i = 0;
#pragma unroll
        for (unsigned n = 0; n < 8; ++n) {
            const unsigned next = (i + b) % 9u;
            v[i] = on ? v[next] : v[i];
            i = next;
        }
        v[i] = on ? first : v[i];
    }
}

/* Step 3, transposed (a full warp). The head, the mask word and the 32 lanes' words are 290 words
 * in a row: flattened word g is the head (0), the mask word (1), or word k = (g - 2) % 9 of lane
 * (g - 2) / 9. Store t (0..9) of lane j writes word g = 32 t + j, so each of stores 0..8 covers
 * 256 contiguous bytes (4 whole lines) and store 9 the last two words. Lane 0's store 0 is the
 * head, left to the submit (stored last); lane 1's is the mask word; lanes j >= 2 store lane
 * words at stores 0..8, lanes 0 and 1 at stores 1..9. As 32 = 5 (mod 9) and gcd(5, 9) = 1, store
 * t of lane j is word k = (5 t + j - 2) % 9 of its lane, each k once over the lane's 9 stores: in
 * shuffle k (0..8) every lane offers its word k, and lane j takes the one of the lane whose word
 * k it stores (routes, line_routes_of). A per-lane rotation by (j - 2) % 9 (rotate9) then puts
 * the word of store t in register 5 t % 9, the same in every lane: 9 shuffles and 36 selects
 * against 10 stores. */
__device__ __forceinline__ void line_fill_transposed(uint64_t *request, unsigned lane, unsigned seq,
                                                     const uint64_t (&data)[9], uint64_t mask_word,
                                                     uint64_t routes) {
    uint64_t word[9];
#pragma unroll
    for (unsigned k = 0; k < 9; ++k)
        word[k] = shfl64(data[k], static_cast<unsigned>(routes >> (5u * k)) & 31u);
    rotate9(word, static_cast<unsigned>(routes >> 45) & 15u); /* word[m] = shuffle (m + j - 2) % 9's */
#pragma unroll
    for (unsigned t = 0; t < 10; ++t) {
        uint64_t *at = request + 32u * t + lane;
        if (t == 0) {
            if (lane == 1u)
                st_relaxed_sys64(at, mask_word);
            else if (lane >= 2u)
                st_relaxed_sys64(at, line_word(word[0], seq));
        } else if (t < 9 || lane < 2u) {
            st_relaxed_sys64(at, line_word(word[(5u * t) % 9u], seq));
        }
    }
}

/* Step 5, a full warp: the lane's own 3 reply words from the words `w` the warp polled
 * transposed (lane j's load t read word 32 t + j of the block). In shuffle k lane L reads the
 * lane that loaded its word k, and each lane offers the load its one reader in that shuffle needs
 * (routes, line_routes_of): 3 shuffles. */
__device__ __forceinline__ void line_reply_transposed(uint64_t (&w)[3], unsigned routes) {
    uint64_t mine[3];
#pragma unroll
    for (unsigned k = 0; k < 3; ++k) {
        const unsigned load = (routes >> (15u + 2u * k)) & 3u;
        const uint64_t offer = load == 0 ? w[0] : load == 1 ? w[1] : w[2];
        mine[k] = shfl64(offer, (routes >> (5u * k)) & 31u);
    }
#pragma unroll
    for (unsigned k = 0; k < 3; ++k)
        w[k] = mine[k];
}

/* One look at a lane's 3 reply words (step 5): loads issued by line_look_issue stay in flight
 * until line_look_take reads their registers, so two looks can be in flight at once. The words
 * are at `words`, `words + stride`, `words + 2 stride`. */
struct line_look {
    uint64_t w[3];
};

/* Loads the words not seen yet (bit t of `seen`: word t). */
__device__ __forceinline__ void line_look_issue(line_look &look, const uint64_t *words, unsigned stride,
                                                unsigned seen) {
#pragma unroll
    for (unsigned t = 0; t < 3; ++t)
        if ((seen & (1u << t)) == 0)
            look.w[t] = ld_relaxed_sys64(words + t * stride);
}

/* Takes the words of `look` that carry `seq`, of those not seen yet (a word seen by another look
 * meanwhile is skipped: every word is checked on its own, whichever look carried it). */
__device__ __forceinline__ void line_look_take(const line_look &look, unsigned seq, unsigned &seen,
                                               uint64_t (&w)[3]) {
#pragma unroll
    for (unsigned t = 0; t < 3; ++t)
        if ((seen & (1u << t)) == 0 && HOSTCALL_LINE_SEQ_OF(look.w[t]) == seq) {
            w[t] = look.w[t];
            seen |= 1u << t;
        }
}

constexpr unsigned LINE_SEEN_ALL = 7u;

} // namespace detail

/* One look at a time: a word seen is not loaded again; __all_sync decides; paced by a backoff. */
__device__ __forceinline__ void tuning::line_wait(const line_client &c, unsigned mask, const uint64_t *words,
                                                  unsigned stride, unsigned seq, uint64_t (&w)[3]) {
    unsigned seen = 0;
    detail::backoff pace(c.wait, detail::global_timer_ns());
    detail::line_look x = {{0, 0, 0}};
    detail::line_look_issue(x, words, stride, seen);
    for (;;) {
        detail::line_look_take(x, seq, seen, w);
        if (__all_sync(mask, seen == detail::LINE_SEEN_ALL))
            break;
        pace.pause();
        detail::line_look_issue(x, words, stride, seen);
    }
}

/* One hostcall by the calling warp's active lanes on a line buffer (as phase_call). */
template <typename Tuning = tuning>
__device__ inline void line_call(line_client &c, unsigned service, const uint64_t (&request)[8],
                                 uint64_t (&reply)[2], phase_timing *timing = nullptr) {
    const detail::warp_call w = detail::begin_call(timing);
    const unsigned mask = w.mask, lane = w.lane, leader = w.leader;
    const bool is_leader = w.is_leader, timed = w.timed;
    const unsigned long long t0 = w.t0;

    const bool keep = c.keep && mask == 0xffffffffu;
    const bool held = keep && c.held != detail::NOT_HELD;
    unsigned index = c.held, previous = c.held_state;
    if (!held) {
        if (is_leader) {
            index = detail::line_claim(c);
            /* Relaxed: device-only word, ordered by the claim's acquire. */
            previous = detail::ld_relaxed_gpu(&c.device_seq[index]);
        }
        index = __shfl_sync(mask, index, leader);
        previous = __shfl_sync(mask, previous, leader);
    }
    /* The doorbell throttle's device-memory read, issued now so that it overlaps the fill. */
    const uint64_t last_ring =
        is_leader && Tuning::rings ? detail::ring_last(c.doorbell, c.last_ring) : 0;
    const unsigned seq = previous < HOSTCALL_LINE_SEQ_MAX ? previous + 1u : 1u;
    uint64_t *req = c.requests + static_cast<size_t>(index) * HOSTCALL_LINE_REQUEST_WORDS;
    uint64_t *rep = c.replies + static_cast<size_t>(index) * HOSTCALL_LINE_REPLY_WORDS;
    const unsigned long long t1 = detail::clock_if(timed);

    if (seq == HOSTCALL_LINE_SEQ_MAX || (seq == 1u && previous != 0u))
        detail::line_refresh(req, rep, mask, lane);

    /* Step 3. Relaxed: each word carries its sequence; the host checks every one. */
    uint64_t data[9];
    detail::line_encode(request, data);
    const uint64_t mask_word = detail::line_word(mask, seq);
    const bool transposed = mask == 0xffffffffu && Tuning::line_transposed;
    if (transposed) {
        detail::line_fill_transposed(req, lane, seq, data, mask_word, c.routes.fill);
    } else {
        uint64_t *slot = req + 2u + lane * HOSTCALL_LINE_REQUEST_LANE_WORDS;
#pragma unroll
        for (unsigned k = 0; k < 9; ++k)
            detail::st_relaxed_sys64(slot + k, detail::line_word(data[k], seq));
    }
    /* Not needed for correctness (the host checks every word): makes the lanes' stores issue
     * before the head, so the host usually finds the request whole at its first look. */
    __syncwarp(mask);
    const unsigned long long t2 = detail::clock_if(timed);
    if (is_leader) {
        /* Step 4. Relaxed, as the lanes' words. */
        if (!transposed)
            detail::st_relaxed_sys64(req + 1, mask_word);
        detail::st_relaxed_sys64(req + 0, detail::line_word(service, seq));
        if (!keep)
            /* Relaxed: published to the next claimer by the release of step 6. */
            detail::st_relaxed_gpu(&c.device_seq[index], seq);
        if (Tuning::rings)
            detail::ring_after(c.doorbell, c.last_ring, last_ring);
    }
    const unsigned long long t3 = detail::clock_if(timed);

    /* Step 5: the reply is in the words polled. */
    uint64_t words[3] = {0, 0, 0};
    if (transposed)
        Tuning::line_wait(c, mask, rep + lane, 32u, seq, words);
    else
        Tuning::line_wait(c, mask, rep + lane * HOSTCALL_LINE_REPLY_LANE_WORDS, 1u, seq, words);
    const unsigned long long t4 = detail::clock_if(timed);
    if (transposed)
        detail::line_reply_transposed(words, c.routes.reply);
    detail::line_decode_reply(words, reply);
    if (keep) {
        c.held = index;
        c.held_state = seq;
    } else {
        /* Orders every lane's reply loads before the release of the packet. */
        __syncwarp(mask);
        if (is_leader)
            /* Release: pairs with the acquire fetch_or of the next claimer (step 1). */
            detail::red_and_release_gpu(&c.occupied[index / 32u], ~(1u << (index % 32u)));
    }
    if (timed)
        /* release: the submit (mask word, head, device_seq, ring) */
        detail::add_steps(timing, t0, t1, t2, t3, t4);
}

/* Gives back the packet a keep_packet line client holds. Call it from every lane of the warp:
 * it converges them first, as phase_release_held. */
__device__ inline void line_release_held(line_client &c) {
    __syncwarp();
    if (c.held == detail::NOT_HELD)
        return;
    const unsigned index = c.held;
    if (detail::lane_id() == 0) {
        /* Relaxed: published by the release below. */
        detail::st_relaxed_gpu(&c.device_seq[index], c.held_state);
        /* Release: pairs with the acquire fetch_or of the next claimer (step 1). */
        detail::red_and_release_gpu(&c.occupied[index / 32u], ~(1u << (index % 32u)));
    }
    c.held = detail::NOT_HELD;
}

/* ---- Message streams (PROTOCOL.md section 4) ---- */

/* One hostcall of `service` by the calling lanes, on any client of these headers: the message
 * streams and printf below are written once over it (this overload for the phase protocol; the
 * RPC client's is in hostcall_cuda_rpc.cuh, found by argument-dependent lookup). */
template <typename Tuning = tuning>
__device__ inline void service_call(phase_client &c, unsigned service, const uint64_t (&request)[8],
                                    uint64_t (&reply)[2]) {
    phase_call<Tuning>(c, service, request, reply);
}

/* Sends `count` words as one message to `service` (each active lane its own message, of its own
 * length; lanes whose message ended drop out of later calls). `reply` gets the answer to the END
 * chunk, or the host's error reply if the stream was refused on the way. */
template <typename Tuning = tuning, typename Client>
__device__ inline void send_message(Client &c, unsigned service, const uint64_t *words, unsigned count,
                                    uint64_t (&reply)[2]) {
    uint64_t id = 0;
    unsigned sent = 0;
    bool begin = true;
    for (;;) {
        const unsigned left = count - sent;
        const unsigned len = left < HOSTCALL_MSG_MAX_WORDS ? left : HOSTCALL_MSG_MAX_WORDS;
        const bool end = len == left;
        uint64_t request[8];
        request[0] = HOSTCALL_MSG_DESCRIPTOR(begin, end, len, id);
#pragma unroll
        for (unsigned k = 0; k < HOSTCALL_MSG_MAX_WORDS; ++k)
            request[k + 1] = k < len ? words[sent + k] : 0;
        uint64_t answer[2];
        service_call<Tuning>(c, service, request, answer);
        if (end || answer[0] == HOSTCALL_ERROR_REPLY) {
            reply[0] = answer[0];
            reply[1] = answer[1];
            return;
        }
        if (begin)
            id = HOSTCALL_MSG_ID(answer[0]);
        begin = false;
        sent += len;
    }
}

#ifndef HOSTCALL_CUDA_PRINTF_MAX_WORDS
#define HOSTCALL_CUDA_PRINTF_MAX_WORDS 64
#endif

/* A PRINTF message under construction (PROTOCOL.md section 4): word 0 control, then the format
 * string NUL-terminated and padded to 8 bytes, then one word per argument (strings inline). */
struct printf_message {
    uint64_t words[HOSTCALL_CUDA_PRINTF_MAX_WORDS];
    unsigned count;
    bool overflow;

    __device__ void push(uint64_t w) {
        if (count < HOSTCALL_CUDA_PRINTF_MAX_WORDS)
            words[count++] = w;
        else
            overflow = true;
    }
    __device__ void push_string(const char *s) {
        if (s == nullptr) {
            push(0);
            return;
        }
        for (;;) {
            uint64_t w = 0;
            for (unsigned b = 0; b < 8; ++b) {
                const unsigned char ch = static_cast<unsigned char>(*s);
                w |= static_cast<uint64_t>(ch) << (8 * b);
                if (ch == 0) {
                    push(w);
                    return;
                }
                ++s;
            }
            push(w);
        }
    }
    __device__ void arg(const char *s) { push_string(s); }
    __device__ void arg(char *s) { push_string(s); }
    __device__ void arg(double d) { push(static_cast<uint64_t>(__double_as_longlong(d))); }
    __device__ void arg(float f) { arg(static_cast<double>(f)); }
    __device__ void arg(int v) { push(static_cast<uint64_t>(static_cast<int64_t>(v))); }
    __device__ void arg(long v) { push(static_cast<uint64_t>(static_cast<int64_t>(v))); }
    __device__ void arg(long long v) { push(static_cast<uint64_t>(v)); }
    __device__ void arg(unsigned v) { push(v); }
    __device__ void arg(unsigned long v) { push(v); }
    __device__ void arg(unsigned long long v) { push(v); }
    __device__ void arg(char v) { push(static_cast<uint64_t>(static_cast<unsigned char>(v))); }
    template <typename T> __device__ void arg(T *p) { push(reinterpret_cast<uint64_t>(p)); }
};

/* printf through the PRINTF service (id 2) of the host, on any client (service_call): returns
 * the number of characters the host printed, or -1 (the message did not fit
 * HOSTCALL_CUDA_PRINTF_MAX_WORDS words, or the host refused it). `to_stderr`: the control word's
 * bit 0. */
template <typename Client, typename... Args>
__device__ int printf_to(Client &c, bool to_stderr, const char *format, Args... args) {
    printf_message m;
    m.count = 0;
    m.overflow = false;
    m.push(to_stderr ? 1u : 0u);
    m.push_string(format);
    (m.arg(args), ...);
    if (m.overflow)
        return -1;
    uint64_t reply[2];
    send_message(c, HOSTCALL_SERVICE_PRINTF, m.words, m.count, reply);
    if (reply[0] == HOSTCALL_ERROR_REPLY)
        return -1;
    return static_cast<int>(static_cast<int64_t>(reply[0]));
}

template <typename... Args> __device__ int phase_printf(phase_client &c, const char *format, Args... args) {
    return printf_to(c, false, format, args...);
}

/* ---- The stack protocol: REQUIRES PLATFORM ATOMICS (see the top of this file) ---- */
namespace stack {

__device__ __forceinline__ uint64_t cas_sys(uint64_t *p, uint64_t expected, uint64_t desired) {
    uint64_t old;
    asm volatile("atom.acq_rel.sys.global.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(expected), "l"(desired)
                 : "memory");
    return old;
}

/* One hostcall on a stack-protocol buffer. Only where cudaDevAttrHostNativeAtomicSupported is 1:
 * the CASes on free_stack and ready_stack must be atomic with the host's swap of ready_stack. */
__device__ inline void stack_call(const void *buffer, unsigned service, const uint64_t (&request)[8],
                                  uint64_t (&reply)[2]) {
    hostcall_buffer_prefix_t *prefix = const_cast<hostcall_buffer_prefix_t *>(
        static_cast<const hostcall_buffer_prefix_t *>(buffer));
    const unsigned mask = __activemask();
    const unsigned lane = detail::lane_id();
    const unsigned leader = __ffs(mask) - 1;
    hostcall_packet_header_t *headers =
        reinterpret_cast<hostcall_packet_header_t *>(detail::ld_relaxed_sys64(&prefix->headers));
    hostcall_payload_t *payloads = reinterpret_cast<hostcall_payload_t *>(detail::ld_relaxed_sys64(&prefix->payloads));
    const uint64_t index_mask = detail::ld_relaxed_sys64(&prefix->index_mask);
    uint64_t packet = 0;
    if (lane == leader) {
        /* 1. pop free: acquire pairs with the release push that returned the packet. */
        uint64_t top = detail::ld_acquire_sys64(&prefix->free_stack);
        for (;;) {
            if (top == 0) { /* a correct runtime has a packet per wave: wait for one */
                __nanosleep(1000);
                top = detail::ld_acquire_sys64(&prefix->free_stack);
                continue;
            }
            const uint64_t next = detail::ld_relaxed_sys64(&headers[top & index_mask].next);
            const uint64_t seen = cas_sys(&prefix->free_stack, top, next);
            if (seen == top)
                break;
            top = seen;
        }
        packet = top;
    }
    packet = __shfl_sync(mask, packet, leader);
    hostcall_packet_header_t *header = &headers[packet & index_mask];
    uint64_t *slot = &payloads[packet & index_mask].slots[lane][0];
    for (unsigned k = 0; k < 8; k += 2)
        detail::st_v2<true>(slot + k, request[k], request[k + 1]);
    __syncwarp(mask);
    if (lane == leader) {
        detail::st_relaxed_sys64(&header->activemask, mask);
        detail::st_relaxed_sys(&header->service, service);
        detail::st_relaxed_sys(&header->control, HOSTCALL_CONTROL_READY);
        /* 3. push ready: the acq_rel CAS publishes the packet to the host's acquire swap. */
        uint64_t top = detail::ld_relaxed_sys64(&prefix->ready_stack);
        for (;;) {
            detail::st_relaxed_sys64(&header->next, top);
            const uint64_t seen = cas_sys(&prefix->ready_stack, top, packet);
            if (seen == top)
                break;
            top = seen;
        }
        uint64_t *doorbell = detail::signal_value(detail::ld_relaxed_sys64(&prefix->doorbell));
        if (doorbell != nullptr)
            detail::st_relaxed_sys64(doorbell, detail::global_timer_ns() | 1u);
        /* 4. wait: acquire pairs with the host's release store of control. */
        unsigned sleep = 64;
        while (detail::ld_acquire_sys(&header->control) & HOSTCALL_CONTROL_READY) {
            __nanosleep(sleep);
            sleep = sleep < 4096u ? sleep * 2u : sleep;
        }
    }
    __syncwarp(mask);
    detail::ld_v2_sys(slot, reply[0], reply[1]);
    __syncwarp(mask);
    if (lane == leader) {
        /* 5. return with the tag advanced (0 is null: skip it). */
        uint64_t returned = packet + (index_mask + 1);
        if (returned == 0)
            returned = index_mask + 1;
        uint64_t top = detail::ld_relaxed_sys64(&prefix->free_stack);
        for (;;) {
            detail::st_relaxed_sys64(&header->next, top);
            const uint64_t seen = cas_sys(&prefix->free_stack, top, returned);
            if (seen == top)
                break;
            top = seen;
        }
    }
}

} // namespace stack
} // namespace hostcall

#endif /* __CUDACC__ */
#endif /* HOSTCALL_CUDA_CUH_INCLUDED */
