// Kernels of LLVM libc's GPU allocator's calls to the host (included by kernels.cu, after the
// client object): MALLOC and FREE over LLVM's GPU RPC, as libc/src/__support/GPU/allocator.cpp
// sends them (its rpc_allocate and rpc_free), for tests/cuda.rs. The host serves them through
// DEVMEM from hostcall::backend::cuda::CudaDeviceMemory (device memory).

#define LIBC_MALLOC ((static_cast<unsigned>('c') << 24) | 10u)
#define LIBC_FREE ((static_cast<unsigned>('c') << 24) | 11u)
#define SLAB_BYTES (2ull << 20)

// rpc_allocate: the calling lanes send their sizes with MALLOC in one packet and receive their
// addresses (word 0 of the answer; 0 when refused).
__device__ inline uint64_t rpc_allocate(hostcall::rpc_client &c, uint64_t size) {
    const uint64_t request[8] = {size, 0, 0, 0, 0, 0, 0, 0};
    hostcall::rpc_port p = hostcall::rpc_open_port(c, LIBC_MALLOC);
    hostcall::rpc_send(c, p, request);
    uint64_t answer[8];
    hostcall::rpc_recv(c, p, answer);
    hostcall::rpc_close(c, p);
    return answer[0];
}

// rpc_free: the calling lanes send their addresses with FREE; send only, no answer.
__device__ inline void rpc_free(hostcall::rpc_client &c, uint64_t address) {
    const uint64_t request[8] = {address, 0, 0, 0, 0, 0, 0, 0};
    hostcall::rpc_port p = hostcall::rpc_open_port(c, LIBC_FREE);
    hostcall::rpc_send(c, p, request);
    hostcall::rpc_close(c, p);
}

// The allocator's request for malloc(size) of 1 MiB or more: round_up<SLAB_SIZE>, which adds a
// whole slab before masking (malloc(2 MiB) asks for 4 MiB).
__device__ __forceinline__ uint64_t llvm_large_request(uint64_t size) {
    return (size + SLAB_BYTES) & ~(SLAB_BYTES - 1);
}

// Stores a pattern at the first and last word of `size` bytes at `address` and reads it back:
// the number of words that did not read back (0 or 2).
__device__ inline unsigned long long touch(uint64_t address, uint64_t size, uint64_t pattern) {
    volatile uint64_t *first = reinterpret_cast<volatile uint64_t *>(address);
    volatile uint64_t *last = reinterpret_cast<volatile uint64_t *>(address + size - 8);
    *first = pattern;
    *last = ~pattern;
    return (*first != pattern) + (*last != ~pattern);
}

// One thread: out[0] = rpc_allocate(size); out[1] = the words of the block that did not read back.
extern "C" __global__ void hc_rpc_malloc(void *port_state, unsigned long long size, unsigned long long *out) {
    hostcall::rpc_client c = hostcall::rpc_open(__llvm_rpc_client, static_cast<uint32_t *>(port_state));
    const uint64_t address = rpc_allocate(c, size);
    out[0] = address;
    out[1] = address == 0 ? 2 : touch(address, size, 0x5a5a0000ull + size);
}

// One thread: rpc_free(address).
extern "C" __global__ void hc_rpc_free(void *port_state, unsigned long long address) {
    hostcall::rpc_client c = hostcall::rpc_open(__llvm_rpc_client, static_cast<uint32_t *>(port_state));
    rpc_free(c, address);
}

// Every warp, `rounds` times: lanes 0-3 together ask for a slab (2 MiB) and for malloc(1, 2 and
// 4 MiB) as the allocator asks for them (2, 4 and 6 MiB), the sizes rotating over the lanes by
// warp and round; each lane checks its block (not null, 2 MiB aligned, its first and last words
// read back), then the four free them together. counters[0] += errors, counters[1] += blocks
// checked.
extern "C" __global__ void hc_rpc_alloc_loop(void *port_state, unsigned rounds, unsigned long long *counters) {
    const unsigned warp = hostcall::global_warp_id();
    const unsigned lane = hostcall::detail::lane_id();
    hostcall::rpc_client c = hostcall::rpc_open(__llvm_rpc_client, static_cast<uint32_t *>(port_state));
    const uint64_t sizes[4] = {SLAB_BYTES, llvm_large_request(1ull << 20), llvm_large_request(2ull << 20),
                               llvm_large_request(4ull << 20)};
    unsigned long long errors = 0, checked = 0;
    if (lane < 4) {
        for (unsigned round = 0; round < rounds; ++round) {
            const uint64_t size = sizes[(lane + warp + round) % 4];
            const uint64_t address = rpc_allocate(c, size);
            if (address == 0 || address % SLAB_BYTES != 0) {
                errors += 1;
            } else {
                errors += touch(address, size, (static_cast<uint64_t>(warp) << 32) | (round << 8) | lane);
            }
            checked += 1;
            if (address != 0)
                rpc_free(c, address);
        }
    }
    add_counts(counters, errors, checked);
}
