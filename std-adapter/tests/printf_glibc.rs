//! The printf formatter against the C library's own `snprintf`, over a large generated corpus.
//!
//! Every case is a message of a few pieces (literal text, then one conversion). The C side formats
//! each piece with `snprintf`, passing the argument with the C type its length modifier implies
//! (`int` for `%d` and `%hhd`, `long long` for `%lld`, `double` for floats, `char *` for `%s`),
//! and the expectation is the concatenation; our side formats the whole message from its words,
//! so argument advancing (`*` words, inline strings) is checked too. Two deliberate differences:
//! `%Lf` is compared with C's `%f` of the same double (the device sends an f64, not a long
//! double), and `%s` never passes NULL there (the PRINTF message's null pointer is the empty
//! string); LLVM's RPC, whose wire carries the pointer, is compared with glibc on NULL too.
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

// The corpus and the formatters, beside this file (a test crate's root finds its modules through
// `path`).
#[path = "printf_glibc/corpus.rs"]
mod corpus;
#[path = "printf_glibc/outputs.rs"]
mod outputs;

use corpus::*;
use outputs::*;

use hostcall::services::printf::{format, Streams};
use hostcall::services::rpc::client::{printf as rpc_printf, printf_opcode, CArg as RpcArg};
use hostcall::services::rpc::{RpcHost, RpcLimits, RpcPolicy};
use hostcall_core::message::PackedWords;
use hostcall_core::rpc::{Client, Header, LaneBuffer, Parts, View};
use hostcall_core::sync::AtomicU32;
use hostcall_core::ServiceTable;
use std::ffi::{c_char, c_int, c_void, CString};

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
        for &conv in int_convs() {
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

/// A null `%s` through LLVM's RPC printf (whose wire carries the pointer) prints what glibc
/// prints (`(null)`, or nothing under a precision below its length, padded by the width), with
/// the later arguments read right, for every flag, width and precision.
#[test]
fn rpc_null_strings_match_glibc() {
    let mut rpc = RpcPath::new();
    let mut mismatches = Vec::new();
    let widths = ["", "1", "6", "7", "12", "*"];
    let precisions = ["", ".", ".0", ".3", ".5", ".6", ".7", ".20", ".*"];
    let mut cases = 0;
    for flags in ["", "-", "0", "#", " ", "+"] {
        for width in widths {
            for precision in precisions {
                for star in [-7, 0, 5, 9] {
                    let spec = format!("[%{flags}{width}{precision}s]");
                    let stars = vec![star; spec.matches('*').count()];
                    let words = stars.iter().map(|&s| s as u32 as u64).chain([0]).collect();
                    let null = Piece {
                        c_format: spec.clone(),
                        our_format: spec,
                        stars,
                        value: Some(CArg::NullStr),
                        words,
                    };
                    let after = Piece {
                        c_format: "%d".into(),
                        our_format: "%d".into(),
                        stars: vec![],
                        value: Some(CArg::Int(-17)),
                        words: vec![-17i64 as u64],
                    };
                    let pieces = [null, after];
                    let (mut expected, mut count) = (Vec::new(), 0);
                    for piece in &pieces {
                        let (bytes, n) = c_output(piece);
                        expected.extend(bytes);
                        count += n;
                    }
                    cases += 1;
                    let got = rpc.output(&pieces, cases % 2 == 0);
                    if got != (expected.clone(), count) {
                        mismatches.push(format!(
                            "{:?}: C {:?} ({count}), RPC {:?} ({})",
                            pieces[0].c_format,
                            String::from_utf8_lossy(&expected),
                            String::from_utf8_lossy(&got.0),
                            got.1
                        ));
                    }
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{} of {cases} differ:\n{}", mismatches.len(), mismatches.join("\n"));
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
