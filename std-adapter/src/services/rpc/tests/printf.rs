//! LLVM libc's GPU printf opcodes through the RPC host: output as `snprintf`'s, each lane's own
//! format and strings, the streams and the refusals.

use super::*;
use crate::services::rpc::client::{printf, printf_opcode, CArg};
use std::ffi::{c_char, c_int, CString};

/// One call of the lanes of `mask` through the RPC path; (stdout, stderr, results).
fn print<'a>(
    opcode: u32,
    mask: u64,
    file: Option<&(dyn Fn(u32) -> u64 + Sync)>,
    call: &(dyn Fn(u32) -> (&'a [u8], &'a [CArg<'a>]) + Sync),
) -> (Vec<u8>, Vec<u8>, Vec<i32>, RpcCounters) {
    let buffer = Buffer::new(2, 4);
    let mut host = RpcHost::new(2, RpcPolicy::default(), RpcLimits::default());
    let mut out = sink();
    let services = ServiceTable::<1>::new();
    let results = run(&buffer, &mut host, &mut out, &services, |client| {
        let file = file.map(|f| move |lane| f(lane));
        let file_ref = file.as_ref().map(|f| f as &dyn Fn(u32) -> u64);
        printf(&client, 0, opcode, mask, file_ref, &|lane| call(lane), &mut patience()).unwrap()
    });
    (out.stdout, out.stderr, results[..4].to_vec(), host.counters())
}

extern "C" {
    fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
}

/// What the C library prints for a format of one conversion and its one C argument.
fn c_printf(format: &str, arg: CArg<'_>) -> Vec<u8> {
    let fmt = CString::new(format).unwrap();
    let mut buf = vec![0u8; 512];
    let (p, n) = (buf.as_mut_ptr().cast::<c_char>(), buf.len());
    // SAFETY: `buf` is `n` bytes; each format takes exactly the one argument passed, of the
    // C type its conversion reads.
    let len = unsafe {
        match arg {
            CArg::Int(v) => snprintf(p, n, fmt.as_ptr(), v),
            CArg::Uint(v) => snprintf(p, n, fmt.as_ptr(), v),
            CArg::Long(v) => snprintf(p, n, fmt.as_ptr(), v),
            CArg::Double(v) => snprintf(p, n, fmt.as_ptr(), v),
            CArg::Ptr(v) => snprintf(p, n, fmt.as_ptr(), v as *const u8),
            CArg::Str(Some(s)) => {
                let s = CString::new(s).unwrap();
                snprintf(p, n, fmt.as_ptr(), s.as_ptr())
            }
            CArg::Str(None) => snprintf(p, n, fmt.as_ptr(), std::ptr::null::<c_char>()),
        }
    };
    buf.truncate(len as usize);
    buf
}

/// The same cases the other protocols' printf passes, one conversion each, through the RPC
/// path aligned and packed: output and return value identical to `snprintf`.
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[cfg_attr(miri, ignore = "calls the C library's snprintf (FFI), which Miri cannot run")]
fn output_is_snprintf_s() {
    let cases: &[(&str, CArg<'_>)] = &[
        ("[%d]", CArg::Int(-42)),
        ("[%+08.3d]", CArg::Int(17)),
        ("[%x]", CArg::Uint(0xbeef)),
        ("[%#X]", CArg::Uint(0xbeef)),
        ("[%-6u]", CArg::Uint(u32::MAX)),
        ("[%ld]", CArg::Long(i64::MIN)),
        ("[%llx]", CArg::Long(-1)),
        ("[%hhd]", CArg::Int(300)),
        ("[%c]", CArg::Int(b'Z' as i32)),
        ("[%.3f]", CArg::Double(1234.56789)),
        ("[%12.4e]", CArg::Double(-6.02e23)),
        ("[%g]", CArg::Double(1e-5)),
        ("[%a]", CArg::Double(1.0)),
        ("[%s]", CArg::Str(Some(b"a string"))),
        ("[%-12.3s]", CArg::Str(Some(b"truncated"))),
        ("[%p]", CArg::Ptr(0x1234_5678)),
        ("[100%%]", CArg::Int(0)),
        // C23's binary (glibc 2.35 and later).
        ("[%b]", CArg::Uint(0b1011)),
        ("[%#B]", CArg::Uint(6)),
        ("[%#012.4lb]", CArg::Long(-3)),
        ("x=%b y", CArg::Int(3)),
        // A null `%s`: glibc's `(null)`, padded, or nothing under a precision below 6.
        ("[%s]", CArg::Str(None)),
        ("[%10s]", CArg::Str(None)),
        ("[%-8.6s]", CArg::Str(None)),
        ("[%5.3s]", CArg::Str(None)),
    ];
    for packed in [false, true] {
        for &(format, arg) in cases {
            let (stdout, _, results, _) = print(printf_opcode(0, packed), 1, None, &|_| {
                (format.as_bytes(), std::slice::from_ref(&arg))
            });
            let expected = c_printf(format, arg);
            assert_eq!(String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&expected), "{format}");
            assert_eq!(results[0] as usize, expected.len(), "{format}");
        }
    }
}

/// Lanes print different formats in one call, with `*` widths, several strings each (fetched
/// one round per string) and a null `%s`; a packed block reads the same.
#[test]
fn lanes_print_their_own_formats_and_strings() {
    let args0 = [CArg::Int(5), CArg::Str(Some(b"ab")), CArg::Double(0.5), CArg::Str(Some(b"cd"))];
    let args1 = [CArg::Long(7), CArg::Str(None)];
    let args2 = [CArg::Str(Some(&[b'x'; 150]))];
    let call = |lane: u32| -> (&[u8], &[CArg<'_>]) {
        match lane {
            0 => (b"<%*s|%.1f|%s>\n", &args0),
            1 => (b"<%ld %s>\n", &args1),
            _ => (b"<%.3s>\n", &args2),
        }
    };
    for packed in [false, true] {
        let (stdout, stderr, results, counters) = print(printf_opcode(1, packed), 0b111, None, &call);
        assert!(stdout.is_empty());
        assert_eq!(String::from_utf8(stderr).unwrap(), "<   ab|0.5|cd>\n<7 (null)>\n<xxx>\n");
        assert_eq!(&results[..3], &[15, 11, 6]);
        assert_eq!((counters.calls_done, counters.unhandled, counters.refused_lanes), (1, 0, 0));
    }
}

/// `PRINTF_TO_STREAM` takes each lane's `FILE` first: stdout and stderr by their tags; a
/// host file handle is refused (-1) while the Files group is off; printf off refuses all.
#[test]
fn streams_and_refusals() {
    let args = [CArg::Int(1)];
    let call = |_| -> (&[u8], &[CArg<'_>]) { (b"n=%d;", &args) };
    let files = |lane: u32| [2u64, 3, 0x5550][lane as usize];
    let (stdout, stderr, results, counters) = print(printf_opcode(2, false), 0b111, Some(&files), &call);
    assert_eq!((stdout.as_slice(), stderr.as_slice()), (&b"n=1;"[..], &b"n=1;"[..]));
    assert_eq!(&results[..3], &[4, 4, -1]);
    assert_eq!(counters.refused_lanes, 1);
}

/// A width or precision past `PrintfLimits::max_field`, or a conversion the engine does not
/// know, stops the lane's output there with the marker the other protocols' PRINTF prints; the
/// lane is answered the count before it, and the other lanes print whole.
#[test]
fn a_conversion_that_cannot_print_stops_with_the_marker() {
    let args = [CArg::Int(1), CArg::Int(2)];
    let call = |lane: u32| -> (&[u8], &[CArg<'_>]) {
        match lane {
            0 => (b"x=%5000d y=%d\n", &args),
            1 => (b"x=%.9999f\n", &args),
            2 => (b"x=%d %y\n", &args),
            _ => (b"x=%d y=%d\n", &args),
        }
    };
    let (stdout, _, results, _) = print(printf_opcode(0, false), 0b1111, None, &call);
    let marker = "<hostcall: width or precision above 4096>";
    assert_eq!(
        String::from_utf8(stdout).unwrap(),
        format!("x={marker}x={marker}x=1 <hostcall: bad conversion %y>x=1 y=2\n")
    );
    assert_eq!(results, [2, 2, 4, 8]);
}
