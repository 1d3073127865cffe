//! DEVMEM (id 3, PROTOCOL.md section 3): device memory the host allocates and frees on a device's
//! request, laid out as ROCm's device allocator needs it and within [`DevMemLimits`].
//!
//! # Alignment
//!
//! Two device allocators ask for blocks here, and each tells its blocks apart by address alone,
//! so each gets the alignment its own host runtime gives:
//!
//! - ROCm's (ockl `dm.cl`, DEVMEM requests from device code): it asks for 2 MiB slabs and for
//!   large blocks, and when it frees an address, `(addr & 0xfff) == 0` is a large block, handed
//!   back to the host; anything else a piece of the slab at `addr & !0x1f_ffff`. So, as ROCm's
//!   host runtime does, every block is aligned to [`BLOCK_ALIGN`] (4 KiB) and a block of exactly
//!   [`SLAB_BYTES`] (2 MiB) to 2 MiB; other sizes, multiples of 2 MiB included, get 4 KiB
//!   ([`block_alignment`]).
//! - LLVM libc's (`MALLOC` over LLVM's GPU RPC, which the RPC host hands to DEVMEM marked with
//!   [`LLVM_RULE`] in word 2 of the request): it asks for a 2 MiB slab, or for a request of
//!   1 MiB or more rounded up to a multiple of 2 MiB, and takes any pointer that is not 2 MiB
//!   aligned for a chunk of the slab whose header is at `ptr & !(2 MiB - 1)`. So, as LLVM's
//!   servers do (their allocators align such blocks to 2 MiB), a request of [`LLVM_LARGE_BYTES`]
//!   (1 MiB) or more is aligned to 2 MiB, anything smaller to 4 KiB ([`llvm_block_alignment`]).
//!
//! Sizes are rounded up to whole 4 KiB pages. This holds on every backend: where a backend
//! cannot align that much itself (HSA pools and CUDA's pinned memory align to their granule,
//! 4 KiB; CUDA's stream-ordered pool to 256 bytes), DEVMEM first takes a block of the size asked
//! for and keeps it if it happens to be aligned (large blocks of these backends usually are),
//! else allocates the block plus the alignment and hands out the aligned address inside. The
//! word 2 mark changes nothing but the alignment (and so the padding charged to the budget): a
//! device that sets it in a DEVMEM request of its own only gets its blocks more aligned.
//!
//! # Serving threads
//!
//! DEVMEM allocates and frees on the listener's thread while the device that asked waits, so its
//! memory must never wait for a device: give it memory whose frees run elsewhere. On CUDA that is
//! `backend::cuda::CudaDeviceMemory::for_services` (stream-ordered device memory, its frees on a
//! side thread), not the pinned `CudaMemory`, whose `cuMemFreeHost` waits for every kernel and so
//! deadlocks a free while another kernel waits for the listener; any other memory can be wrapped
//! the same way ([`DeferredFree`](crate::backend::DeferredFree)).
//!
//! # Budget
//!
//! | bound | default | when exceeded |
//! | --- | --- | --- |
//! | one allocation ([`DevMemLimits::max_allocation`]) | 256 MiB | `[0, Refused]` |
//! | bytes live of one buffer's device, overhead included ([`DevMemLimits::max_total_per_buffer`]) | 512 MiB | `[0, Refused]` |
//! | allocations live of one buffer's device ([`DevMemLimits::max_allocations_per_buffer`]) | 32,768 | `[0, Refused]` |
//! | bytes live, overhead included ([`DevMemLimits::max_total`]) | 1 GiB | `[0, Refused]` |
//! | allocations live ([`DevMemLimits::max_allocations`]) | 65,536 | `[0, Refused]` |
//!
//! An allocation costs what it takes from the backend (its size rounded up to 4 KiB pages, plus
//! the alignment where the backend could not align) and [`ALLOCATION_OVERHEAD`] bytes of
//! bookkeeping (about a hundred): a one-byte allocation costs 4 KiB and that, so the default
//! budget holds fewer than 2^18 of them, and the count bound 65,536 allocations of any size.
//! One buffer's device (the buffer the request came in, [`PacketRequest::buffer`]) may take at
//! most half of the registry's bytes and blocks by default, so a device that allocates without
//! end leaves the other half for the others.
//!
//! # Ownership
//!
//! Each block belongs to the buffer whose request allocated it. A free of it from any other
//! buffer is refused exactly as a free of an address DEVMEM never handed out (`[0, BadRequest]`,
//! counted as [`Reason::BadFree`], logged): the block stays live for its owner, and the reply
//! does not tell a device that probes addresses whether another device's block lives there.
//! When no listener serves the buffer any more ([`PacketService::forget_buffer`]), its blocks
//! stay live (a kernel may still use them) but belong to no buffer: a buffer registered later at
//! the same address cannot free them; they count against the registry's budget until the
//! service is dropped.
//!
//! # Replies
//!
//! An allocation is answered `[address, 0]`; a free `[0, 0]`. Every failure is answered with a
//! null address, `[0, code]`: ROCm's device code checks the address for null and takes any other
//! value as memory it may use. That holds for a refusal ([`ErrorCode::Refused`]: a size of 0 or
//! over a bound, the backend out of memory), a free of an address DEVMEM did not hand out
//! ([`ErrorCode::BadRequest`]), and a backend that panics ([`ErrorCode::ServicePanicked`]); the
//! registry answers DEVMEM the same way when it is not registered
//! ([`error_reply`](crate::dispatch::registry::error_reply)). Refusals are logged, rate-limited.
//!
//! ```
//! use hostcall::services::devmem::{block_alignment, llvm_block_alignment, BLOCK_ALIGN, SLAB_BYTES};
//! assert_eq!(block_alignment(1), BLOCK_ALIGN);
//! assert_eq!(block_alignment(SLAB_BYTES), SLAB_BYTES);
//! assert_eq!(block_alignment(2 * SLAB_BYTES), BLOCK_ALIGN); // ROCm's rule
//! assert_eq!(llvm_block_alignment(3 * SLAB_BYTES), SLAB_BYTES); // LLVM's
//! assert_eq!(llvm_block_alignment(SLAB_BYTES / 2), SLAB_BYTES);
//! assert_eq!(llvm_block_alignment(SLAB_BYTES / 2 - 1), BLOCK_ALIGN);
//! ```

use crate::dispatch::panics::catch_service_panic;
use crate::dispatch::registry::PacketService;
use crate::memory::{DeviceAllocation, DeviceMemory, MemoryError};
use crate::observe::Reason;
use crate::rate_limit::{error_limited, warn_limited};
use hostcall_core::{ErrorCode, PacketRequest};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The alignment (and page size) of every block: ROCm's device allocator takes a 4 KiB-aligned
/// address for a large block.
pub const BLOCK_ALIGN: u64 = 4 << 10;
/// The size of the slabs ROCm's device allocator asks for, each aligned to its size.
pub const SLAB_BYTES: u64 = 2 << 20;
/// Bytes of bookkeeping charged to [`DevMemLimits::max_total`] per allocation: an upper estimate
/// of its entry in the table of live blocks (the entry, and as much again for the table's slack).
pub const ALLOCATION_OVERHEAD: u64 = 2 * std::mem::size_of::<(u64, Block)>() as u64;

/// The smallest request LLVM libc's GPU allocator sends for a block of its own (anything smaller
/// goes into its slabs): 1 MiB. Under [`llvm_block_alignment`] such blocks are 2 MiB aligned.
pub const LLVM_LARGE_BYTES: u64 = SLAB_BYTES / 2;
/// Word 2 of a DEVMEM allocation request that asks for LLVM's rule ([`llvm_block_alignment`])
/// rather than ROCm's ([`block_alignment`]): what the RPC host writes for `MALLOC`.
pub const LLVM_RULE: u64 = u64::from_le_bytes(*b"llvm-rul");

/// ROCm's rule: the alignment of a block of `size` bytes: 2 MiB for a 2 MiB slab, 4 KiB for
/// anything else.
pub fn block_alignment(size: u64) -> u64 {
    if size == SLAB_BYTES {
        SLAB_BYTES
    } else {
        BLOCK_ALIGN
    }
}

/// LLVM's rule: 2 MiB for a block of [`LLVM_LARGE_BYTES`] (1 MiB) or more, 4 KiB for anything
/// smaller.
pub fn llvm_block_alignment(size: u64) -> u64 {
    if size >= LLVM_LARGE_BYTES {
        SLAB_BYTES
    } else {
        BLOCK_ALIGN
    }
}

/// What DEVMEM will hand out. See the [module docs](self#budget).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DevMemLimits {
    /// The largest single allocation, in bytes asked for.
    pub max_allocation: u64,
    /// The most bytes live at once, counting what each allocation costs (pages, alignment
    /// padding, [`ALLOCATION_OVERHEAD`]).
    pub max_total: u64,
    /// The most allocations live at once.
    pub max_allocations: usize,
    /// The most bytes the blocks of one buffer's device hold at once, counted as for `max_total`.
    pub max_total_per_buffer: u64,
    /// The most allocations of one buffer's device live at once.
    pub max_allocations_per_buffer: usize,
}

setters!(DevMemLimits {
    with_max_allocation: max_allocation: u64,
    with_max_total: max_total: u64,
    with_max_allocations: max_allocations: usize,
    with_max_total_per_buffer: max_total_per_buffer: u64,
    with_max_allocations_per_buffer: max_allocations_per_buffer: usize,
});

impl Default for DevMemLimits {
    fn default() -> Self {
        Self {
            max_allocation: 256 << 20,
            max_total: 1 << 30,
            max_allocations: 1 << 16,
            max_total_per_buffer: 512 << 20,
            max_allocations_per_buffer: 1 << 15,
        }
    }
}

/// One live block: the backend's allocation (the device's block starts at the aligned address
/// inside it), its cost and its owner.
#[derive(Debug)]
struct Block {
    /// Freed when the block is dropped.
    _allocation: DeviceAllocation,
    /// Bytes charged to the budgets.
    cost: u64,
    /// The buffer whose request allocated it ([`PacketRequest::buffer`]): only it may free it.
    /// `None` once that buffer is no longer served (`Live::orphan`): then no buffer may.
    owner: Option<usize>,
}

/// What one buffer's device holds.
#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    bytes: u64,
    blocks: usize,
}

#[derive(Default)]
struct Live {
    /// By the device address handed out.
    blocks: HashMap<u64, Block>,
    bytes: u64,
    /// Per owner (only buffers holding a block are present).
    by_buffer: HashMap<usize, Usage>,
}

impl Live {
    fn usage(&self, buffer: usize) -> Usage {
        self.by_buffer.get(&buffer).copied().unwrap_or_default()
    }

    /// Records `block`, live at `address`.
    fn insert(&mut self, address: u64, block: Block) {
        self.bytes += block.cost;
        let owner = block.owner.expect("a block is inserted with its owner");
        let usage = self.by_buffer.entry(owner).or_default();
        usage.bytes += block.cost;
        usage.blocks += 1;
        self.blocks.insert(address, block);
    }

    /// Takes the block at `address` if `buffer` owns it.
    fn remove(&mut self, address: u64, buffer: usize) -> Result<Block, FreeRefused> {
        match self.blocks.get(&address) {
            None => return Err(FreeRefused::NotAllocated),
            Some(block) if block.owner != Some(buffer) => {
                return Err(FreeRefused::Foreign { owner: block.owner })
            }
            Some(_) => {}
        }
        let block = self.blocks.remove(&address).expect("found above");
        self.bytes -= block.cost;
        let usage = self.by_buffer.get_mut(&buffer).expect("an owner holding a block is present");
        usage.bytes -= block.cost;
        usage.blocks -= 1;
        if usage.blocks == 0 {
            self.by_buffer.remove(&buffer);
        }
        Ok(block)
    }
}

impl Live {
    /// `buffer` is served no more: its blocks are kept (a kernel may still use them) but owned by
    /// no buffer, so no buffer registered later (at the same address or another) can free them;
    /// they count against the registry's budget until the service is dropped.
    fn orphan(&mut self, buffer: usize) {
        if self.by_buffer.remove(&buffer).is_none() {
            return;
        }
        for block in self.blocks.values_mut().filter(|b| b.owner == Some(buffer)) {
            block.owner = None;
        }
    }
}

/// Why a free is refused (the device is answered the same either way).
enum FreeRefused {
    NotAllocated,
    Foreign { owner: Option<usize> },
}

/// The DEVMEM packet service: the live blocks and their budget.
pub(crate) struct DevMem {
    memory: Arc<dyn DeviceMemory>,
    limits: DevMemLimits,
    live: Mutex<Live>,
}

impl DevMem {
    /// The DEVMEM service: blocks of `memory` within `limits`, none live yet.
    pub(crate) fn new(memory: Arc<dyn DeviceMemory>, limits: DevMemLimits) -> Self {
        Self { memory, limits, live: Mutex::default() }
    }

    fn allocate(&self, live: &mut Live, buffer: usize, size: u64, align: u64) -> Result<u64, ErrorCode> {
        let limits = &self.limits;
        let usage = live.usage(buffer);
        let refuse = |reason: Reason, why: &str| {
            crate::observe::count(reason);
            warn_limited!(
                "devmem: buffer {buffer:#x}: refused an allocation of {size} bytes ({why}; {} bytes in {} \
                 blocks live, {} bytes in {} blocks of this buffer)",
                live.bytes,
                live.blocks.len(),
                usage.bytes,
                usage.blocks
            );
            ErrorCode::Refused
        };
        if size == 0 || size > limits.max_allocation {
            return Err(refuse(Reason::DevmemSize, "size 0 or above the largest allocation"));
        }
        if live.blocks.len() >= limits.max_allocations {
            return Err(refuse(Reason::DevmemCount, "as many allocations live as allowed"));
        }
        if usage.blocks >= limits.max_allocations_per_buffer {
            return Err(refuse(Reason::DevmemCount, "as many allocations of this buffer live as allowed"));
        }
        let pages = size.div_ceil(BLOCK_ALIGN) * BLOCK_ALIGN;
        let over = |cost: u64| {
            if live.bytes + cost > limits.max_total {
                Some("over the byte budget")
            } else if usage.bytes + cost > limits.max_total_per_buffer {
                Some("over this buffer's byte budget")
            } else {
                None
            }
        };
        if let Some(why) = over(pages + ALLOCATION_OVERHEAD) {
            return Err(refuse(Reason::DevmemBytes, why));
        }
        let (allocation, address) = aligned_block(&self.memory, pages, align).map_err(|e| {
            crate::observe::count(Reason::AllocationFailure);
            warn_limited!("devmem: allocation of {size} bytes failed: {e}");
            ErrorCode::Refused
        })?;
        let cost = allocation.len() as u64 + ALLOCATION_OVERHEAD;
        if let Some(why) = over(cost) {
            return Err(refuse(Reason::DevmemBytes, why));
        }
        live.insert(address, Block { _allocation: allocation, cost, owner: Some(buffer) });
        Ok(address)
    }

    fn free(&self, live: &mut Live, buffer: usize, address: u64) -> Result<(), ErrorCode> {
        match live.remove(address, buffer) {
            Ok(_block) => Ok(()), // freed as it drops
            Err(why) => {
                crate::observe::count(Reason::BadFree);
                match why {
                    FreeRefused::NotAllocated => warn_limited!(
                        "devmem: buffer {buffer:#x}: free of {address:#x}, which devmem did not allocate (refused)"
                    ),
                    FreeRefused::Foreign { owner: Some(owner) } => warn_limited!(
                        "devmem: buffer {buffer:#x}: free of {address:#x}, a block of buffer {owner:#x} \
                         (refused; the block stays live)"
                    ),
                    FreeRefused::Foreign { owner: None } => warn_limited!(
                        "devmem: buffer {buffer:#x}: free of {address:#x}, a block of a buffer no longer served \
                         (refused; the block stays live)"
                    ),
                }
                Err(ErrorCode::BadRequest)
            }
        }
    }

    /// One lane of `buffer`'s device: allocate or free.
    fn serve_lane(&self, live: &mut Live, buffer: usize, request: [u64; 8]) -> Result<[u64; 2], ErrorCode> {
        match request[0] {
            0 => {
                let size = request[1];
                let align =
                    if request[2] == LLVM_RULE { llvm_block_alignment(size) } else { block_alignment(size) };
                self.allocate(live, buffer, size, align).map(|address| [address, 0])
            }
            address => self.free(live, buffer, address).map(|()| [0, 0]),
        }
    }
}

/// `pages` bytes of `memory` whose device address is aligned to `align`: the backend's own
/// alignment if it gives it; else a block of `pages` bytes if it happens to be aligned; else
/// `pages + align` bytes with the aligned address inside.
fn aligned_block(
    memory: &Arc<dyn DeviceMemory>,
    pages: u64,
    align: u64,
) -> Result<(DeviceAllocation, u64), MemoryError> {
    let too_large = MemoryError::OutOfMemory { size: usize::MAX };
    let size = usize::try_from(pages).map_err(|_| too_large.clone())?;
    let align_usize = usize::try_from(align).map_err(|_| too_large.clone())?;
    match DeviceAllocation::new(memory.clone(), size, align_usize) {
        Ok(allocation) if allocation.device_address() % align == 0 => {
            let address = allocation.device_address();
            return Ok((allocation, address));
        }
        Ok(_) => {} // the backend did not align it after all
        Err(MemoryError::BadRequest { .. }) => {
            // The backend cannot align this much: its block may be aligned all the same.
            let allocation = DeviceAllocation::new(memory.clone(), size, 8)?;
            let address = allocation.device_address();
            if address % align == 0 {
                return Ok((allocation, address));
            }
        }
        Err(e) => return Err(e),
    }
    let padded = size.checked_add(align_usize).ok_or(too_large.clone())?;
    let allocation = DeviceAllocation::new(memory.clone(), padded, 8)?;
    let address = allocation.device_address().checked_next_multiple_of(align).ok_or(too_large)?;
    Ok((allocation, address))
}

impl PacketService for DevMem {
    fn forget_buffer(&self, buffer: usize) {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).orphan(buffer);
    }

    fn serve(&self, packet: &mut PacketRequest<'_>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let buffer = packet.buffer();
        for lane in packet.lanes() {
            let request = packet.request(lane);
            // A backend that panics fails this lane alone, with a null address like any failure.
            let outcome =
                catch_service_panic(|| self.serve_lane(&mut live, buffer, request)).unwrap_or_else(|panic| {
                    crate::observe::count(Reason::HandlerPanic);
                    error_limited!("devmem: buffer {buffer:#x} lane {lane}: the backend panicked ({panic})");
                    Err(ErrorCode::ServicePanicked)
                });
            match outcome {
                Ok(reply) => packet.reply(lane, reply),
                Err(code) => packet.reply_with_error(lane, [0, code as u64]),
            }
        }
    }
}
