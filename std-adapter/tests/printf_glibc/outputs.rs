//! The three formatters a piece goes through: the C library's `snprintf`, this crate's `format`
//! from the message's words, and LLVM libc's GPU RPC printf served by `RpcHost`.

use super::*;

extern "C" {
    fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
}

/// `snprintf` of one piece: its output bytes (NULs from `%c` included) and return value.
pub(crate) fn c_output(piece: &Piece) -> (Vec<u8>, c_int) {
    let fmt = CString::new(piece.c_format.as_str()).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut count_target = 0i64;
    let (b, n, f) = (buf.as_mut_ptr().cast::<c_char>(), buf.len(), fmt.as_ptr());
    macro_rules! call {
        ($($star:expr),*) => {
            // SAFETY: the buffer is valid for `n` bytes, the format is NUL-terminated, and each
            // argument has the C type its conversion and length modifier read (the generator
            // guarantees it); `%n` writes at most 8 bytes into `count_target`.
            unsafe {
                match &piece.value {
                    None => snprintf(b, n, f $(, $star)*),
                    Some(CArg::Int(v)) => snprintf(b, n, f $(, $star)*, *v),
                    Some(CArg::LongLong(v)) => snprintf(b, n, f $(, $star)*, *v),
                    Some(CArg::Double(v)) => snprintf(b, n, f $(, $star)*, *v),
                    Some(CArg::Str(s)) => snprintf(b, n, f $(, $star)*, s.as_ptr()),
                    Some(CArg::NullStr) => snprintf(b, n, f $(, $star)*, std::ptr::null::<c_char>()),
                    Some(CArg::Ptr(p)) => snprintf(b, n, f $(, $star)*, *p as usize as *const c_void),
                    Some(CArg::CountPtr) => snprintf(b, n, f $(, $star)*, &mut count_target as *mut i64),
                }
            }
        };
    }
    let r = match piece.stars[..] {
        [] => call!(),
        [w] => call!(w),
        [w, p] => call!(w, p),
        _ => unreachable!("at most a width and a precision star"),
    };
    assert!(r >= 0 && (r as usize) < n, "snprintf failed on {:?}: {r}", piece.c_format);
    buf.truncate(r as usize);
    (buf, r)
}

/// Whether the C library prints C23's `%b` (glibc 2.35 and later; before, it stops there).
pub(crate) fn c_prints_binary() -> bool {
    let mut buf = [0u8; 8];
    // SAFETY: the buffer is valid for its length, the format NUL-terminated, and `%b` (where
    // known) reads one `unsigned int`.
    let r = unsafe { snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%b".as_ptr(), 5 as c_int) };
    r == 3 && &buf[..3] == b"101"
}

/// Our output for a message made of `pieces`, from its words.
pub(crate) fn our_output(
    pieces: &[Piece],
) -> Result<(Vec<u8>, usize), hostcall::services::printf::PrintfError> {
    let fmt: String = pieces.iter().map(|p| p.our_format.as_str()).collect();
    let mut words: Vec<u64> = PackedWords::c_string(fmt.as_bytes()).collect();
    for p in pieces {
        words.extend_from_slice(&p.words);
    }
    let mut out = Vec::new();
    let n = format(&words, &mut out)?;
    Ok((out, n))
}

/// One port of one lane, its client's lock and its host: the RPC path, driven on one thread (the
/// client's waits take the host's turns).
pub(crate) struct RpcPath {
    mailboxes: [AtomicU32; 2],
    lock: [AtomicU32; 1],
    header: [Header; 1],
    lane: [LaneBuffer; 1],
    host: RpcHost,
    out: Streams<Vec<u8>, Vec<u8>>,
}

impl RpcPath {
    pub(crate) fn new() -> Self {
        let limits = RpcLimits::default().with_stream_bytes(1 << 20);
        Self {
            mailboxes: [AtomicU32::new(0), AtomicU32::new(0)],
            lock: [AtomicU32::new(0)],
            header: [Header::default()],
            lane: [LaneBuffer::default()],
            host: RpcHost::new(1, RpcPolicy::default(), limits),
            out: Streams { stdout: Vec::new(), stderr: Vec::new() },
        }
    }

    /// The output and result of one printf of `pieces` through the RPC opcodes.
    pub(crate) fn output(&mut self, pieces: &[Piece], packed: bool) -> (Vec<u8>, i32) {
        let format: String = pieces.iter().map(|p| p.our_format.as_str()).collect();
        let args: Vec<RpcArg<'_>> = pieces
            .iter()
            .flat_map(|p| {
                let value = p.value.as_ref().map(|v| match v {
                    CArg::Int(v) => RpcArg::Int(*v),
                    CArg::LongLong(v) => RpcArg::Long(*v),
                    CArg::Double(v) => RpcArg::Double(*v),
                    CArg::Str(s) => RpcArg::Str(Some(s.as_bytes())),
                    CArg::NullStr => RpcArg::Str(None),
                    CArg::Ptr(v) => RpcArg::Ptr(*v),
                    CArg::CountPtr => RpcArg::Ptr(0),
                });
                p.stars.iter().map(|&s| RpcArg::Int(s)).chain(value)
            })
            .collect();
        let (a, b) = self.mailboxes.split_at(1);
        let parts = Parts {
            lanes: 1,
            host_mailbox: a,
            device_mailbox: b,
            headers: &self.header,
            buffers: &self.lane,
        };
        let view = View::from_parts(parts).unwrap();
        let client = Client::new(view, &self.lock).unwrap();
        let (host, out, services) = (&mut self.host, &mut self.out, ServiceTable::<1>::new());
        let mut take_the_hosts_turn = |polls: u32| {
            host.drain(&view, out, &services);
            polls < 1000
        };
        let opcode = printf_opcode(0, packed);
        let call = |_| (format.as_bytes(), &args[..]);
        let result = rpc_printf(&client, 0, opcode, 1, None, &call, &mut take_the_hosts_turn).unwrap();
        (std::mem::take(&mut self.out.stdout), result[0])
    }
}
