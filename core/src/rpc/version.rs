//! Everything about LLVM libc's RPC that changes between upstream versions, in one place.
//!
//! The wire format has no version field, magic or negotiation: device code and this host must be
//! built against the same `rpc.h`. What this module pins was read from llvm-project's
//! `libc/shared/rpc.h` at commit `039da685` and `libc/shared/rpc_opcodes.h` at `2f40cb4c` /
//! `845d195c` (the `'c' << 24 | n` opcodes, names `RPC_*` then `LIBC_*`, same values); the
//! layout figures were checked against that header compiled for x86-64 and nvptx64. Older libc
//! versions differ and are **not** served: 16-bit opcodes numbered from 0 and renumbered as
//! opcodes were added, a client *pointer* symbol `__llvm_libc_rpc_client` instead of the client
//! object, and a port limit of 64 in the first C server API. ROCm clr's `devrpc` adds a doorbell
//! after the buffer and up to 16,384 ports, which this `rpc.h` has not: a runtime keys its choice
//! on the device image (and checks the client symbol's size with
//! [`check_client_symbol`](super::check_client_symbol)), never assumes it.

/// Which upstream sources the layout, the client object and the opcodes follow.
pub const UPSTREAM: &str = "llvm-project libc/shared/rpc.h @039da685, rpc_opcodes.h @2f40cb4c";

/// The most ports a buffer may have (`rpc::MAX_PORT_COUNT`): it sizes the lock array inside the
/// client object, so it fixes [`CLIENT_OBJECT_SIZE`].
pub const MAX_PORT_COUNT: u32 = 4096;

/// `u32` words of lock bits in the client object: one bit per port of [`MAX_PORT_COUNT`].
pub const LOCK_WORDS: usize = MAX_PORT_COUNT as usize / 32;

/// The device symbol that holds the client object (`rpc::Client`), which the host fills.
pub const CLIENT_SYMBOL: &str = "__llvm_rpc_client";

/// Bytes of the client object (`sizeof(rpc::Client)`, the same on x86-64, nvptx64 and amdgcn):
/// `port_count: u32`, 4 bytes of padding, four pointers (inbox, outbox, header, packet) and
/// [`LOCK_WORDS`] lock words.
pub const CLIENT_OBJECT_SIZE: usize = 8 + 4 * 8 + 4 * LOCK_WORDS;

const _: () = assert!(CLIENT_OBJECT_SIZE == 552);
