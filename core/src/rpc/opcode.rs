//! Opcode values on the wire (`libc/shared/rpc_opcodes.h`; see [`super::UPSTREAM`]): the top byte
//! names a namespace, the low 24 bits the call.

/// The namespace byte of an opcode.
#[inline]
pub const fn namespace(opcode: u32) -> u8 {
    (opcode >> 24) as u8
}

/// `namespace << 24 | n`.
pub const fn opcode(namespace: u8, n: u32) -> u32 {
    (namespace as u32) << 24 | n
}

/// LLVM libc's namespace (`'c'`).
pub const LIBC: u8 = b'c';
/// The offload runtime's namespace (`'o'`).
pub const OFFLOAD: u8 = b'o';
/// ROCm clr's namespace (`'r'`): ROCm's hostcall services carried over this transport.
pub const ROCM: u8 = b'r';
/// This project's own namespace (`'h'`): hostcall service id `n` (below 2^24) as one packet each
/// way, for clients of this project's (emulated waves, the CUDA client) that call services other
/// than ROCm's four. No upstream client sends it.
pub const HOSTCALL: u8 = b'h';

/// The libc opcodes (`'c' << 24 | n`).
pub mod libc {
    use super::{opcode, LIBC};
    /// One packet, no reply.
    pub const NOOP: u32 = opcode(LIBC, 0);
    /// Exit the host process with a status.
    pub const EXIT: u32 = opcode(LIBC, 1);
    /// Bytes to the host's stdout.
    pub const WRITE_TO_STDOUT: u32 = opcode(LIBC, 2);
    /// Bytes to the host's stderr.
    pub const WRITE_TO_STDERR: u32 = opcode(LIBC, 3);
    /// Bytes to a stream the device names.
    pub const WRITE_TO_STREAM: u32 = opcode(LIBC, 4);
    /// Bytes to stdout and a newline (`puts`).
    pub const WRITE_TO_STDOUT_NEWLINE: u32 = opcode(LIBC, 5);
    /// `fread`.
    pub const READ_FROM_STREAM: u32 = opcode(LIBC, 6);
    /// `fgets`.
    pub const READ_FGETS: u32 = opcode(LIBC, 7);
    /// `fopen`.
    pub const OPEN_FILE: u32 = opcode(LIBC, 8);
    /// `fclose`.
    pub const CLOSE_FILE: u32 = opcode(LIBC, 9);
    /// Device memory allocation (served by the runtime, not libc's handler).
    pub const MALLOC: u32 = opcode(LIBC, 10);
    /// Device memory release (one packet, no reply).
    pub const FREE: u32 = opcode(LIBC, 11);
    /// Call a host function pointer.
    pub const HOST_CALL: u32 = opcode(LIBC, 12);
    /// Abort the host process.
    pub const ABORT: u32 = opcode(LIBC, 13);
    /// `feof`.
    pub const FEOF: u32 = opcode(LIBC, 14);
    /// `ferror`.
    pub const FERROR: u32 = opcode(LIBC, 15);
    /// `clearerr`.
    pub const CLEARERR: u32 = opcode(LIBC, 16);
    /// `fseek`.
    pub const FSEEK: u32 = opcode(LIBC, 17);
    /// `ftell`.
    pub const FTELL: u32 = opcode(LIBC, 18);
    /// `fflush`.
    pub const FFLUSH: u32 = opcode(LIBC, 19);
    /// `ungetc`.
    pub const UNGETC: u32 = opcode(LIBC, 20);
    /// `printf` to stdout.
    pub const PRINTF_TO_STDOUT: u32 = opcode(LIBC, 21);
    /// `printf` to stderr.
    pub const PRINTF_TO_STDERR: u32 = opcode(LIBC, 22);
    /// `fprintf` to a stream.
    pub const PRINTF_TO_STREAM: u32 = opcode(LIBC, 23);
    /// `printf` to stdout, arguments packed without alignment (AMDGPU).
    pub const PRINTF_TO_STDOUT_PACKED: u32 = opcode(LIBC, 24);
    /// `printf` to stderr, packed.
    pub const PRINTF_TO_STDERR_PACKED: u32 = opcode(LIBC, 25);
    /// `fprintf` to a stream, packed.
    pub const PRINTF_TO_STREAM_PACKED: u32 = opcode(LIBC, 26);
    /// `remove`.
    pub const REMOVE: u32 = opcode(LIBC, 27);
    /// `rename`.
    pub const RENAME: u32 = opcode(LIBC, 28);
    /// `system`.
    pub const SYSTEM: u32 = opcode(LIBC, 29);
}

/// ROCm clr's opcodes (`'r' << 24 | n`): ROCm's hostcall services, one packet each way.
pub mod rocm {
    use super::{opcode, ROCM};
    /// A host function call (the hostcall FUNCTION_CALL service).
    pub const FUNCTION: u32 = opcode(ROCM, 0);
    /// Device memory (the hostcall DEVMEM service).
    pub const DEVMEM: u32 = opcode(ROCM, 1);
    /// An address-sanitizer report (the hostcall SANITIZER service).
    pub const SANITIZER: u32 = opcode(ROCM, 2);
    /// Hostcall printf message streams (the hostcall PRINTF service).
    pub const PRINTF: u32 = opcode(ROCM, 3);
}

/// The status codes of `rpc.h` (`rpc::Status`).
pub mod status {
    /// Success.
    pub const SUCCESS: u32 = 0;
    /// A generic error.
    pub const ERROR: u32 = 0x1000;
    /// The server has no handler for the opcode.
    pub const UNHANDLED_OPCODE: u32 = 0x1001;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_the_header() {
        assert_eq!(libc::NOOP, 0x6300_0000);
        assert_eq!(libc::SYSTEM, 0x6300_001d);
        assert_eq!(libc::PRINTF_TO_STREAM_PACKED, 0x6300_001a);
        assert_eq!(rocm::PRINTF, 0x7200_0003);
        assert_eq!(namespace(rocm::DEVMEM), ROCM);
        assert_eq!(namespace(opcode(OFFLOAD, 0)), b'o');
    }
}
