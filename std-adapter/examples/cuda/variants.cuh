/*
 * variants.cuh: the seven benchmark variants of the CUDA device side, beside the kernels that
 * measure them (kernels.cu). Each is a hostcall::tuning (include/hostcall_cuda.cuh) with one
 * choice changed, passed to phase_call or line_call as their template argument:
 *
 *   hostcall::phase_call<variants::fence_sc>(c, service, request, reply);
 *
 * Every variant changes how, never whether, the protocol's orderings are kept; each comment says
 * what it measures. Not for kernels that only make hostcalls: the default tuning is what the
 * figures in docs/gpu.md chose.
 */
#ifndef HOSTCALL_CUDA_VARIANTS_CUH_INCLUDED
#define HOSTCALL_CUDA_VARIANTS_CUH_INCLUDED

#include "hostcall_cuda.cuh"

namespace variants {

/* Phase: the request and header stores as st.relaxed.sys instead of weak st.global. */
struct store_sys : hostcall::tuning {
    static constexpr bool sys_stores = true;
};

/* Phase: the release of the flipped phase as fence.sc.sys, then st.relaxed.sys. */
struct fence_sc : hostcall::tuning {
    static __device__ __forceinline__ void phase_publish(unsigned *device_phase, unsigned phase) {
        /* The SC fence orders the header and request stores before the phase store (as the
         * release store would); pairs with the host's Acquire fence in phase::Host::serve_packet. */
        hostcall::detail::fence_sc_sys();
        hostcall::detail::st_relaxed_sys(device_phase, phase);
    }
};

/* Two relaxed polls in flight, issued wait_policy::poll_stagger_ns apart: a change is seen about
 * half a round trip sooner than by back-to-back loads. Phase: a fence after the observing load
 * makes it an acquire. Line: no fence needed (the data is in the words polled). */
struct pipelined : hostcall::tuning {
    static __device__ __forceinline__ bool phase_wait_first(const hostcall::phase_client &c, const unsigned *host,
                                                            unsigned phase, uint64_t started) {
        using namespace hostcall::detail;
        unsigned a = ld_relaxed_sys(host);
        spin_ns(c.wait.poll_stagger_ns);
        bool seen = false;
        while (global_timer_ns() - started < c.wait.spin_ns) {
            const unsigned b = ld_relaxed_sys(host);
            if ((a & 1u) == phase) {
                seen = true;
                break;
            }
            a = ld_relaxed_sys(host);
            if ((b & 1u) == phase) {
                seen = true;
                break;
            }
        }
        if (seen)
            /* Makes the observing relaxed load an acquire: pairs with the host's release store
             * of host_phase. */
            fence_acq_rel_sys();
        return seen;
    }

    static __device__ __forceinline__ void line_wait(const hostcall::line_client &c, unsigned mask,
                                                     const uint64_t *words, unsigned stride, unsigned seq,
                                                     uint64_t (&w)[3]) {
        using namespace hostcall::detail;
        unsigned seen = 0;
        backoff pace(c.wait, global_timer_ns());
        line_look x = {{0, 0, 0}}, y = {{0, 0, 0}};
        line_look_issue(x, words, stride, seen);
        spin_ns(c.wait.poll_stagger_ns);
        line_look_issue(y, words, stride, seen);
        for (;;) {
            line_look_take(x, seq, seen, w);
            if (__all_sync(mask, seen == LINE_SEEN_ALL))
                break;
            pace.pause();
            line_look_issue(x, words, stride, seen);
            line_look_take(y, seq, seen, w);
            if (__all_sync(mask, seen == LINE_SEEN_ALL))
                break;
            line_look_issue(y, words, stride, seen);
        }
    }
};

/* No doorbell ring (the listener must spin, or find the packet on its timeout). */
struct no_ring : hostcall::tuning {
    static constexpr bool rings = false;
};

/* Phase: the claim reads host_phase (a PCIe round trip) and requires it to agree with the shadow,
 * as ROCm's device code checks; a packet whose phases differ is unanswered (abandoned) and is
 * given back. */
struct check_claim : hostcall::tuning {
    static __device__ __forceinline__ bool phase_claim_agrees(const hostcall::phase_client &c, unsigned index,
                                                              unsigned bit) {
        using namespace hostcall::detail;
        /* Acquire: pairs with the host's release store of host_phase. */
        const unsigned host = ld_acquire_sys(&c.host_phase[index]);
        if (((host ^ ld_relaxed_gpu(&c.shadow[index])) & 1u) == 0)
            return true;
        /* Unclaim, relaxed: we touched nothing of the packet. */
        asm volatile("red.relaxed.gpu.global.and.b32 [%0], %1;" ::"l"(&c.occupied[index / 32u]), "r"(~bit)
                     : "memory");
        return false;
    }
};

/* Each lane always stores its own slot (and, in the line protocol, polls its own reply). */
struct lane_fill : hostcall::tuning {
    static __device__ __forceinline__ bool phase_transposed(bool) { return false; }
    static constexpr bool line_transposed = false;
};

/* Phase: a full warp always stores transposed, busy or not. */
struct transposed_fill : hostcall::tuning {
    static __device__ __forceinline__ bool phase_transposed(bool) { return true; }
};

} // namespace variants

#endif /* HOSTCALL_CUDA_VARIANTS_CUH_INCLUDED */
