//! The printf formatter against the C library's own `snprintf`, over a large generated corpus.
//!
//! Every case is a message of a few pieces (literal text, then one conversion). The C side formats
//! each piece with `snprintf`, passing the argument with the C type its length modifier implies
//! (`int` for `%d` and `%hhd`, `long long` for `%lld`, `double` for floats, `char *` for `%s`),
//! and the expectation is the concatenation; our side formats the whole message from its words,
//! so argument advancing (`*` words, inline strings) is checked too. Two deliberate differences:
//! `%Lf` is compared with C's `%f` of the same double (the device sends an f64, not a long
//! double), and `%s` never passes NULL (the protocol's null pointer is the empty string).
//!
//! Each message also goes through LLVM libc's GPU RPC printf (`PRINTF_TO_STDOUT`, and its
//! `_PACKED` twin every other message): a one-lane client sends the format and a `va_list` of the
//! same C arguments, this crate's `RpcHost` formats it; its output and the count the client gets
//! must be `snprintf`'s too.
//!
//! The corpus is deterministic (a fixed-seed PRNG): a grid of flags x width x precision over
//! special values, then random messages. `HOSTCALL_PRINTF_CASES=n` sets the number of random
//! messages (default 6000) and `HOSTCALL_PRINTF_SEED` the seed.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use hostcall::services::printf::{format, Streams};
use hostcall::services::rpc::client::{printf as rpc_printf, printf_opcode, CArg as RpcArg};
use hostcall::services::rpc::{RpcHost, RpcLimits, RpcPolicy};
use hostcall_core::message::PackedWords;
use hostcall_core::rpc::{Client, Header, LaneBuffer, Parts, View};
use hostcall_core::sync::AtomicU32;
use hostcall_core::ServiceTable;
use std::ffi::{c_char, c_int, c_void, CString};

extern "C" {
    fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
}

/// splitmix64: small, deterministic, good enough to spread cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// A C argument, typed as the length modifier implies.
#[derive(Clone, Debug)]
enum CArg {
    Int(c_int),
    LongLong(i64),
    Double(f64),
    Str(CString),
    Ptr(u64),
    CountPtr,
}

/// Literal text, one conversion, its C arguments and our words.
#[derive(Clone, Debug)]
struct Piece {
    /// What `snprintf` gets.
    c_format: String,
    /// What the device sends (differs from `c_format` only for `%L` floats).
    our_format: String,
    stars: Vec<c_int>,
    value: Option<CArg>,
    words: Vec<u64>,
}

const FLOAT_CONVS: [&str; 8] = ["f", "F", "e", "E", "g", "G", "a", "A"];
const INT_CONVS: [&str; 6] = ["d", "i", "u", "o", "x", "X"];

fn special_floats() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        f64::from_bits(0xfff8_0000_0000_0001),
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        f64::from_bits(1),
        f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::from_bits(0x0008_0000_0000_0000),
        f64::EPSILON,
        1.0,
        -1.0,
        0.5,
        1.5,
        2.5,
        -2.5,
        0.125,
        0.375,
        1e-5,
        1e-4,
        9.5,
        99.5,
        0.05,
        0.15,
        0.25,
        123456789.0,
        1e15,
        1e16,
        1e21,
        1e22,
        1e23,
        1e100,
        1e-100,
        1e300,
        1e-300,
        0.1,
        0.3,
        2.0 / 3.0,
        9.9999995,
        999999.5,
        9999995.0,
        0.00001234,
        1.0 + f64::EPSILON,
        1.96875,
        1.03125,
        1.09375,
        std::f64::consts::PI,
        -std::f64::consts::E,
        4503599627370496.5,
        9007199254740993.0,
        0.000099999,
        0.0001,
        100000.0,
        999999.0,
        9.9999e-5,
    ];
    v.extend((0..20).map(|k| 10f64.powi(k) - 0.5));
    v
}

fn special_ints() -> Vec<u64> {
    vec![
        0,
        1,
        u64::MAX,
        i32::MIN as i64 as u64,
        i32::MAX as u64,
        i64::MIN as u64,
        i64::MAX as u64,
        u32::MAX as u64,
        0x80,
        0x7f,
        0xff,
        0x100,
        0x7fff,
        0x8000,
        0xffff,
        1 << 31,
        1 << 32,
        (-128i64) as u64,
        (-129i64) as u64,
        (-32768i64) as u64,
        8,
        7,
        0o777,
        1234567890123456789,
    ]
}

fn random_float(rng: &mut Rng, specials: &[f64]) -> f64 {
    match rng.below(7) {
        0 | 1 => rng.pick(specials),
        2 => f64::from_bits(rng.next()),
        // Decimal-looking values.
        3 => (rng.range(-2_000_000, 2_000_000) as f64) / 10f64.powi(rng.range(0, 9) as i32),
        // Exact binary fractions: many decimal ties.
        4 => (rng.range(-100_000, 100_000) as f64) / (1u64 << rng.below(20)) as f64,
        // Any exponent, random mantissa (subnormals included).
        5 => f64::from_bits(rng.next() & 0x800f_ffff_ffff_ffff | rng.below(2047) << 52),
        _ => (rng.next() >> 11) as f64 * 2f64.powi(rng.range(-80, 80) as i32),
    }
}

fn random_int(rng: &mut Rng, specials: &[u64]) -> u64 {
    match rng.below(5) {
        0 | 1 => rng.pick(specials),
        2 => rng.next(),
        3 => rng.range(-1000, 1000) as u64,
        // An int with garbage in the high half: `%d` must look at the low 32 bits only.
        _ => rng.next() << 32 | u64::from(rng.next() as u32),
    }
}

fn literal(rng: &mut Rng) -> String {
    const CHARS: &[u8] = b"abcXYZ -=.:[]\n\t|";
    let mut s = String::new();
    for _ in 0..rng.below(4) {
        if rng.chance(5) {
            s.push_str("%%");
        } else {
            s.push(char::from(rng.pick(CHARS)));
        }
    }
    s
}

fn random_string(rng: &mut Rng) -> Vec<u8> {
    let len = if rng.chance(10) { rng.below(200) } else { rng.below(30) };
    (0..len)
        .map(|_| if rng.chance(80) { rng.range(32, 126) as u8 } else { rng.range(1, 255) as u8 })
        .collect()
}

/// A star argument: our word carries garbage above the C `int`.
fn star(rng: &mut Rng, value: i32, stars: &mut Vec<c_int>, words: &mut Vec<u64>) -> String {
    stars.push(value);
    words.push(rng.next() << 32 | u64::from(value as u32));
    "*".into()
}

fn random_piece(rng: &mut Rng, floats: &[f64], ints: &[u64]) -> Piece {
    let lit = literal(rng);
    let conv = match rng.below(20) {
        0..=8 => rng.pick(&FLOAT_CONVS),
        9..=13 => rng.pick(&INT_CONVS),
        14 => "c",
        15 | 16 => "s",
        17 => "p",
        18 => "n",
        _ => "%",
    };
    if conv == "%" {
        let spec = if rng.chance(70) {
            "%%".to_string()
        } else {
            format!("%{}{}%", rng.pick(&["", "-", "0"]), rng.below(6))
        };
        let f = format!("{lit}{spec}");
        return Piece { c_format: f.clone(), our_format: f, stars: vec![], value: None, words: vec![] };
    }
    let is_float = FLOAT_CONVS.contains(&conv);
    let mut stars = Vec::new();
    let mut words = Vec::new();
    let mut spec = String::from("%");
    for _ in 0..rng.below(4) {
        spec.push(rng.pick(&['-', '+', ' ', '#', '0']));
    }
    match rng.below(20) {
        0..=9 => {}
        10..=15 => spec.push_str(&rng.range(1, 40).to_string()),
        16 => spec.push_str(&rng.range(1, 300).to_string()),
        _ => {
            let w = rng.range(-40, 40) as i32;
            spec.push_str(&star(rng, w, &mut stars, &mut words));
        }
    }
    match rng.below(20) {
        0..=8 => {}
        9 => spec.push('.'),
        10..=14 => spec.push_str(&format!(".{}", rng.range(0, 20))),
        15 | 16 => {
            let big = if is_float { rng.range(0, 1100) } else { rng.range(0, 70) };
            spec.push_str(&format!(".{big}"));
        }
        _ => {
            let p = rng.range(-8, 40) as i32;
            spec.push('.');
            spec.push_str(&star(rng, p, &mut stars, &mut words));
        }
    }
    let length = match conv {
        "d" | "i" | "u" | "o" | "x" | "X" => {
            rng.pick(&["", "", "", "hh", "h", "l", "ll", "j", "z", "t", "L", "q"])
        }
        "n" => rng.pick(&["", "hh", "h", "l", "ll", "j", "z", "t"]),
        _ if is_float => rng.pick(&["", "", "l", "L"]),
        _ => "",
    };
    let c_length = if is_float && length == "L" { "" } else { length };
    let value = match conv {
        _ if is_float => {
            let x = random_float(rng, floats);
            words.push(x.to_bits());
            CArg::Double(x)
        }
        "c" => {
            let w = if rng.chance(50) { rng.below(256) } else { rng.next() };
            words.push(w);
            CArg::Int(w as c_int)
        }
        "s" => {
            let s = random_string(rng);
            words.extend(PackedWords::c_string(&s));
            CArg::Str(CString::new(s).unwrap())
        }
        "p" => {
            let w = match rng.below(4) {
                0 => 0,
                1 => rng.below(1 << 20),
                _ => rng.next() >> rng.below(64),
            };
            words.push(w);
            CArg::Ptr(w)
        }
        "n" => {
            words.push(rng.next());
            CArg::CountPtr
        }
        _ => {
            let w = random_int(rng, ints);
            words.push(w);
            if matches!(length, "" | "hh" | "h") {
                CArg::Int(w as c_int)
            } else {
                CArg::LongLong(w as i64)
            }
        }
    };
    Piece {
        c_format: format!("{lit}{spec}{c_length}{conv}"),
        our_format: format!("{lit}{spec}{length}{conv}"),
        stars,
        value: Some(value),
        words,
    }
}

/// `snprintf` of one piece: its output bytes (NULs from `%c` included) and return value.
fn c_output(piece: &Piece) -> (Vec<u8>, c_int) {
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

/// Our output for a message made of `pieces`, from its words.
fn our_output(pieces: &[Piece]) -> Result<(Vec<u8>, usize), hostcall::services::printf::PrintfError> {
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
struct RpcPath {
    mailboxes: [AtomicU32; 2],
    lock: [AtomicU32; 1],
    header: [Header; 1],
    lane: [LaneBuffer; 1],
    host: RpcHost,
    out: Streams<Vec<u8>, Vec<u8>>,
}

impl RpcPath {
    fn new() -> Self {
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
    fn output(&mut self, pieces: &[Piece], packed: bool) -> (Vec<u8>, i32) {
        let format: String = pieces.iter().map(|p| p.our_format.as_str()).collect();
        let args: Vec<RpcArg<'_>> = pieces
            .iter()
            .flat_map(|p| {
                let value = p.value.as_ref().map(|v| match v {
                    CArg::Int(v) => RpcArg::Int(*v),
                    CArg::LongLong(v) => RpcArg::Long(*v),
                    CArg::Double(v) => RpcArg::Double(*v),
                    CArg::Str(s) => RpcArg::Str(Some(s.as_bytes())),
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

struct Tally {
    messages: usize,
    conversions: usize,
    mismatches: Vec<String>,
    rpc: RpcPath,
}

impl Tally {
    fn check(&mut self, pieces: &[Piece]) {
        self.messages += 1;
        self.conversions += pieces.len();
        let mut expected = Vec::new();
        let mut expected_count = 0usize;
        for p in pieces {
            let (bytes, r) = c_output(p);
            expected.extend_from_slice(&bytes);
            expected_count += r as usize;
        }
        let ours = our_output(pieces);
        let packed = self.messages % 2 == 0;
        let rpc = self.rpc.output(pieces, packed);
        let rpc_matches = rpc == (expected.clone(), expected_count as i32);
        if ours.as_ref().ok() == Some(&(expected.clone(), expected_count)) && rpc_matches {
            return;
        }
        if !rpc_matches && self.mismatches.len() < env_or("HOSTCALL_PRINTF_SHOW", 25) as usize {
            let format: String = pieces.iter().map(|p| p.our_format.as_str()).collect();
            self.mismatches.push(format!(
                "RPC printf (packed {packed}) of {format:?}:\n  C:   {:?} ({expected_count})\n  RPC: {:?} ({})",
                String::from_utf8_lossy(&expected),
                String::from_utf8_lossy(&rpc.0),
                rpc.1
            ));
            return;
        }
        if self.mismatches.len() < env_or("HOSTCALL_PRINTF_SHOW", 25) as usize {
            // Find the piece that differs, for a readable report.
            let culprit = pieces
                .iter()
                .find(|p| our_output(std::slice::from_ref(p)).ok().map(|o| o.0) != Some(c_output(p).0))
                .unwrap_or(&pieces[0]);
            self.mismatches.push(format!(
                "C format {:?} (ours {:?}) args {:?} words {:x?}\n  C:    {:?}\n  ours: {:?}",
                culprit.c_format,
                culprit.our_format,
                culprit.value,
                culprit.words,
                String::from_utf8_lossy(&c_output(culprit).0),
                our_output(std::slice::from_ref(culprit))
                    .map(|(o, n)| format!("{} ({n})", String::from_utf8_lossy(&o))),
            ));
        } else {
            self.mismatches.push(String::new());
        }
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Every float conversion x a set of flags x widths x precisions x the special values.
fn float_grid(tally: &mut Tally) {
    let flags = ["", " ", "+", "#", "0", "-", "+0", "#0", "- #"];
    let widths = ["", "12", "30"];
    let precisions = ["", ".0", ".1", ".2", ".6", ".17", ".40"];
    for x in special_floats() {
        for conv in FLOAT_CONVS {
            for f in flags {
                for w in widths {
                    for p in precisions {
                        let spec = format!("%{f}{w}{p}{conv}");
                        tally.check(&[Piece {
                            c_format: spec.clone(),
                            our_format: spec,
                            stars: vec![],
                            value: Some(CArg::Double(x)),
                            words: vec![x.to_bits()],
                        }]);
                    }
                }
            }
        }
    }
}

/// Every integer conversion x lengths x flags x precisions over the special integers.
fn int_grid(tally: &mut Tally) {
    let lengths = ["", "hh", "h", "l", "ll", "z"];
    let flags = ["", "+", " ", "#", "0", "-", "#0"];
    let specs = ["", "5", ".0", ".3", "12.5", "025"];
    for w in special_ints() {
        for conv in INT_CONVS {
            for length in lengths {
                for f in flags {
                    for s in specs {
                        let spec = format!("%{f}{s}{length}{conv}");
                        let value = if matches!(length, "" | "hh" | "h") {
                            CArg::Int(w as c_int)
                        } else {
                            CArg::LongLong(w as i64)
                        };
                        tally.check(&[Piece {
                            c_format: spec.clone(),
                            our_format: spec,
                            stars: vec![],
                            value: Some(value),
                            words: vec![w],
                        }]);
                    }
                }
            }
        }
    }
}

#[test]
fn printf_matches_glibc_snprintf() {
    let mut tally = Tally { messages: 0, conversions: 0, mismatches: Vec::new(), rpc: RpcPath::new() };
    float_grid(&mut tally);
    int_grid(&mut tally);
    let grid = tally.conversions;

    let mut rng = Rng(env_or("HOSTCALL_PRINTF_SEED", 0x5eed_f9e7));
    let (floats, ints) = (special_floats(), special_ints());
    for _ in 0..env_or("HOSTCALL_PRINTF_CASES", 6000) {
        let pieces: Vec<Piece> =
            (0..rng.range(1, 6)).map(|_| random_piece(&mut rng, &floats, &ints)).collect();
        tally.check(&pieces);
    }
    let shown: Vec<&String> = tally.mismatches.iter().filter(|m| !m.is_empty()).collect();
    eprintln!(
        "printf corpus: {} messages, {} conversions ({} in the grid), {} mismatching messages",
        tally.messages,
        tally.conversions,
        grid,
        tally.mismatches.len()
    );
    assert!(
        tally.mismatches.is_empty(),
        "{} of {} messages differ from glibc; first ones:\n{}",
        tally.mismatches.len(),
        tally.messages,
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn byte_count_is_snprintf_return_value() {
    // NUL bytes from %c count, and a truncating precision counts the printed bytes only.
    let cases: [(&str, Vec<u64>, i32); 3] = [
        ("a%cb", vec![0], 3),
        ("%.2s|%d", PackedWords::c_string(b"hello").chain([7]).collect(), 4),
        ("%10.3f%n%%", vec![1.5f64.to_bits(), 0], 11),
    ];
    for (fmt, args, expected) in cases {
        let mut words: Vec<u64> = PackedWords::c_string(fmt.as_bytes()).collect();
        words.extend(args);
        let mut out = Vec::new();
        let n = format(&words, &mut out).unwrap();
        assert_eq!((n, out.len()), (expected as usize, expected as usize), "{fmt}");
    }
}
