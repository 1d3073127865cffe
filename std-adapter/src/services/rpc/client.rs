//! The device's side of the opcodes served here, for emulated waves and tests: what LLVM libc's
//! GPU code sends, over the core's [`Client`], with host memory standing in for device memory
//! (a `%s` argument's "device address" is the address of its bytes).

use hostcall_core::rpc::opcode::libc;
use hostcall_core::rpc::{Client, ClientPort, Stalled};
use hostcall_core::LANES;

/// A C argument of a printf call as the device's `va_list` holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CArg<'a> {
    /// An `int` (also `char`, `short` after promotion, `*` widths).
    Int(i32),
    /// An `unsigned int`.
    Uint(u32),
    /// A `long` or `long long`.
    Long(i64),
    /// A `double`.
    Double(f64),
    /// A pointer printed by `%p` or ignored by `%n`.
    Ptr(u64),
    /// A `%s` string (its bytes, no NUL needed), or a null pointer.
    Str(Option<&'a [u8]>),
}

impl CArg<'_> {
    fn size(&self) -> usize {
        match self {
            Self::Int(_) | Self::Uint(_) => 4,
            _ => 8,
        }
    }

    fn bytes(&self) -> [u8; 8] {
        match *self {
            Self::Int(v) => (v as u32 as u64).to_le_bytes(),
            Self::Uint(v) => u64::from(v).to_le_bytes(),
            Self::Long(v) => v.to_le_bytes(),
            Self::Double(v) => v.to_bits().to_le_bytes(),
            Self::Ptr(v) => v.to_le_bytes(),
            Self::Str(s) => s.map_or(0, |s| s.as_ptr() as u64).to_le_bytes(),
        }
    }
}

/// The `va_list` bytes of `args`: each aligned to its size (NVPTX, x86) or packed (AMDGPU).
pub fn va_list(args: &[CArg<'_>], packed: bool) -> Vec<u8> {
    let mut block = Vec::new();
    for arg in args {
        if !packed {
            block.resize(block.len().div_ceil(arg.size()) * arg.size(), 0);
        }
        block.extend_from_slice(&arg.bytes()[..arg.size()]);
    }
    block
}

/// The printf opcode for a stream (0: stdout, 1: stderr, 2: a `FILE` sent first), packed or not.
pub fn printf_opcode(stream: u32, packed: bool) -> u32 {
    let base = if packed { libc::PRINTF_TO_STDOUT_PACKED } else { libc::PRINTF_TO_STDOUT };
    base + stream.min(2)
}

/// One printf call by the lanes of `mask` as LLVM libc's GPU printf makes it, on the first free
/// port from `start` (a GPU warp starts from its warp id): `call(lane)` is the lane's format and
/// arguments, `file` each lane's `FILE` for the `_STREAM` opcodes. Returns each lane's result
/// (the characters printed, or -1).
pub fn printf<'a>(
    client: &Client<'_>,
    start: u32,
    opcode: u32,
    mask: u64,
    file: Option<&dyn Fn(u32) -> u64>,
    call: &dyn Fn(u32) -> (&'a [u8], &'a [CArg<'a>]),
    keep_waiting: &mut impl FnMut(u32) -> bool,
) -> Result<[i32; LANES], Stalled> {
    let mut port = open(client, opcode, mask, start, keep_waiting)?;
    let result = exchange(&mut port, opcode, file, call, keep_waiting);
    port.close();
    result
}

fn open<'c>(
    client: &Client<'c>,
    opcode: u32,
    mask: u64,
    start: u32,
    keep_waiting: &mut impl FnMut(u32) -> bool,
) -> Result<ClientPort<'c>, Stalled> {
    let mut polls = 0;
    loop {
        if let Some(port) = client.try_open(opcode, mask, start) {
            return Ok(port);
        }
        polls += 1;
        if !keep_waiting(polls) {
            return Err(Stalled);
        }
        std::hint::spin_loop();
    }
}

fn exchange<'a>(
    port: &mut ClientPort<'_>,
    opcode: u32,
    file: Option<&dyn Fn(u32) -> u64>,
    call: &dyn Fn(u32) -> (&'a [u8], &'a [CArg<'a>]),
    keep_waiting: &mut impl FnMut(u32) -> bool,
) -> Result<[i32; LANES], Stalled> {
    let packed = opcode >= libc::PRINTF_TO_STDOUT_PACKED;
    if let Some(file) = file {
        port.send(|lane| [file(lane), 0, 0, 0, 0, 0, 0, 0], keep_waiting)?;
    }
    let formats: Vec<Vec<u8>> = (0..LANES as u32).map(|lane| nul_terminated(call(lane).0)).collect();
    port.send_n(|lane| &formats[lane as usize], keep_waiting)?;
    let mut sizes = [0usize; LANES];
    port.recv(|lane, words| sizes[lane as usize] = words[0] as usize, keep_waiting)?;
    let blocks: Vec<Vec<u8>> = (0..LANES as u32)
        .map(|lane| {
            let mut block = va_list(call(lane).1, packed);
            block.resize(sizes[lane as usize], 0); // exactly what the host asked for
            block
        })
        .collect();
    port.send_n(|lane| &blocks[lane as usize], keep_waiting)?;
    let mut results = [0i32; LANES];
    loop {
        let mut asked = [0u64; LANES];
        port.recv(
            |lane, words| {
                results[lane as usize] = words[0] as u32 as i32;
                asked[lane as usize] = words[1];
            },
            keep_waiting,
        )?;
        if asked.iter().all(|&address| address == 0) {
            return Ok(results);
        }
        let strings: Vec<Vec<u8>> = (0..LANES as u32)
            .map(|lane| {
                let address = asked[lane as usize];
                call(lane)
                    .1
                    .iter()
                    .find_map(|arg| match arg {
                        CArg::Str(Some(s)) if address != 0 && s.as_ptr() as u64 == address => {
                            Some(nul_terminated(s))
                        }
                        _ => None,
                    })
                    .unwrap_or_default()
            })
            .collect();
        port.send_n(|lane| &strings[lane as usize], keep_waiting)?;
    }
}

fn nul_terminated(bytes: &[u8]) -> Vec<u8> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let mut out = bytes[..end].to_vec();
    out.push(0);
    out
}

/// One lane's calls of the opcodes beyond printf and the console, as LLVM libc's GPU code makes
/// them (lane 0, from the first free port): what the tests and emulated waves send.
/// One lane's calls of the opcodes beyond printf and the console, as LLVM libc's GPU code makes
/// them (lane 0, on the first free port from `start`): what the tests and emulated waves send.
pub mod one_lane {
    use super::{nul_terminated, open, Stalled};
    use hostcall_core::rpc::opcode::libc;
    use hostcall_core::rpc::{packet_bytes, write_chunk, Client};

    type Patience<'p> = &'p mut dyn FnMut(u32) -> bool;

    /// `fopen(path, mode)`: the `FILE` value (0: null).
    pub fn fopen(
        client: &Client<'_>,
        start: u32,
        path: &[u8],
        mode: &[u8],
        mut wait: Patience<'_>,
    ) -> Result<u64, Stalled> {
        let mut port = open(client, libc::OPEN_FILE, 1, start, &mut wait)?;
        let path = nul_terminated(path);
        port.send_n(|_| &path, &mut wait)?;
        let mut words = [0u64; 8];
        write_chunk(&mut words, 0, &nul_terminated(mode)[..mode.len().min(63) + 1]);
        port.send(|_| words, &mut wait)?;
        let mut file = 0;
        port.recv(|_, w| file = w[0], &mut wait)?;
        port.close();
        Ok(file)
    }

    /// A one-packet call (`CLOSE_FILE`, `FEOF` .. `UNGETC`): sends `words`, returns word 0 of
    /// the answer (`CLEARERR`'s is the request's own word 0).
    pub fn one_packet(
        client: &Client<'_>,
        start: u32,
        opcode: u32,
        words: [u64; 8],
        mut wait: Patience<'_>,
    ) -> Result<u64, Stalled> {
        let mut port = open(client, opcode, 1, start, &mut wait)?;
        port.send(|_| words, &mut wait)?;
        let mut answer = 0;
        port.recv(|_, w| answer = w[0], &mut wait)?;
        port.close();
        Ok(answer)
    }

    /// `fread` (`READ_FROM_STREAM`: the bytes and the count) or `fgets` (`READ_FGETS`: the line
    /// with its NUL, or nothing; no count) of up to `size` bytes from `file`.
    pub fn read(
        client: &Client<'_>,
        start: u32,
        opcode: u32,
        size: u64,
        file: u64,
        mut wait: Patience<'_>,
    ) -> Result<(Vec<u8>, Option<u64>), Stalled> {
        let mut port = open(client, opcode, 1, start, &mut wait)?;
        port.send(|_| [size, file, 0, 0, 0, 0, 0, 0], &mut wait)?;
        let mut data = Vec::new();
        port.recv_n(|_, _, _, chunk| data.extend_from_slice(chunk), &mut wait)?;
        let mut count = None;
        if opcode == libc::READ_FROM_STREAM {
            port.recv(|_, w| count = Some(w[0]), &mut wait)?;
        }
        port.close();
        Ok((data, count))
    }

    /// `REMOVE`, `RENAME`, `SYSTEM` (each string sent as a stream with its NUL) or `HOST_CALL`
    /// (`strings[0]` the argument block as is, then `function`): word 0 of the answer.
    pub fn strings(
        client: &Client<'_>,
        start: u32,
        opcode: u32,
        strings: &[&[u8]],
        function: u64,
        mut wait: Patience<'_>,
    ) -> Result<u64, Stalled> {
        let mut port = open(client, opcode, 1, start, &mut wait)?;
        for string in strings {
            let bytes = if opcode == libc::HOST_CALL { string.to_vec() } else { nul_terminated(string) };
            port.send_n(|_| &bytes, &mut wait)?;
        }
        if opcode == libc::HOST_CALL {
            port.send(|_| [function, 0, 0, 0, 0, 0, 0, 0], &mut wait)?;
        }
        let mut answer = 0;
        port.recv(|_, w| answer = w[0], &mut wait)?;
        port.close();
        Ok(answer)
    }

    /// `exit(status)` (`EXIT`) or `abort()` (`ABORT`): the empty round trip, then the status.
    pub fn exit(
        client: &Client<'_>,
        start: u32,
        opcode: u32,
        status: i32,
        mut wait: Patience<'_>,
    ) -> Result<(), Stalled> {
        let mut port = open(client, opcode, 1, start, &mut wait)?;
        port.send(|_| [0; 8], &mut wait)?;
        port.recv(|_, _| {}, &mut wait)?;
        port.send(|_| [status as u32 as u64, 0, 0, 0, 0, 0, 0, 0], &mut wait)?;
        port.close();
        Ok(())
    }

    /// The bytes of a packet (for a mode or an argument block read back).
    pub fn bytes(words: &[u64; 8]) -> [u8; 64] {
        packet_bytes(words)
    }
}
