//! Formatter behaviour that the glibc corpus does not reach: argument layout, errors, limits.

use super::*;
use hostcall_core::ErrorCode;

/// Formats `format` with raw argument words.
fn run(format_str: &[u8], args: &[u64]) -> Result<(String, usize), PrintfError> {
    run_with(format_str, args, &PrintfLimits::default())
}

fn run_with(format_str: &[u8], args: &[u64], limits: &PrintfLimits) -> Result<(String, usize), PrintfError> {
    let mut words = PrintfMessage::new(format_str).into_words();
    words.extend_from_slice(args);
    let mut out = Vec::new();
    let n = format_with(&words[1..], limits, &mut out)?;
    assert_eq!(n, out.len());
    Ok((String::from_utf8_lossy(&out).into_owned(), n))
}

fn ok(format_str: &str, args: &[u64]) -> String {
    run(format_str.as_bytes(), args).unwrap().0
}

fn cstr(s: &[u8]) -> Vec<u64> {
    hostcall_core::message::PackedWords::c_string(s).collect()
}

#[test]
fn string_precision_advances_by_stored_size() {
    // "truncate me please" is 18 bytes + NUL = 3 words; `%.3s` prints 3 bytes but the next
    // argument is still the word after the third.
    let mut args = cstr(b"truncate me please");
    args.push(42);
    assert_eq!(ok("[%.3s] %d", &args), "[tru] 42");
    // An 8-byte string takes two words (its NUL spills over).
    let mut args = cstr(b"12345678");
    args.push(7);
    assert_eq!(ok("%s %d", &args), "12345678 7");
}

#[test]
fn null_string_is_one_zero_word() {
    let message = PrintfMessage::new(b"[%s][%d]").arg(PrintfArg::Str(None)).int(5).into_words();
    let mut out = Vec::new();
    format(&message[1..], &mut out).unwrap();
    assert_eq!(out, b"[][5]");
}

#[test]
fn a_null_string_a_transport_knows_of_prints_as_glibc_does() {
    // The second `%s` is a null pointer: `(null)` unless a precision below its 6 bytes is given
    // (then nothing), padded by the width either way; the first is a real "".
    let cases = [
        ("[%s|%s]", "[|(null)]"),
        ("[%s|%10s]", "[|    (null)]"),
        ("[%s|%-8s]", "[|(null)  ]"),
        ("[%s|%.5s]", "[|]"),
        ("[%s|%.6s]", "[|(null)]"),
        ("[%s|%8.3s]", "[|        ]"),
        ("[%s|%*.*s]", "[|(null)]"), // a negative `*` precision is none
    ];
    for (format_str, expected) in cases {
        let mut message = PrintfMessage::new(format_str.as_bytes()).string(b"");
        if format_str.contains('*') {
            message = message.int(3).int(-1);
        }
        let words = message.arg(PrintfArg::Str(None)).into_words();
        let mut out = Vec::new();
        let (printed, stopped) =
            format_partial_nulls(&words[1..], &[false, true], &PrintfLimits::default(), &mut out);
        assert_eq!(
            (String::from_utf8_lossy(&out), printed, stopped),
            (expected.into(), expected.len(), None)
        );
    }
}

#[test]
fn binary_is_glibc_s_c23_b() {
    // Outputs of Debian 12's glibc 2.36 `snprintf` (the corpus in tests/printf_glibc.rs checks
    // many more against the C library itself).
    let cases: [(&str, u64, &str); 14] = [
        ("%b", 5, "101"),
        ("%B", 0, "0"),
        ("%#b", 5, "0b101"),
        ("%#B", 255, "0B11111111"),
        ("%#b", 0, "0"),
        ("%10b", 5, "       101"),
        ("%-6b|", 5, "101   |"),
        ("%#010b", 5, "0b00000101"),
        ("%#.8b", 5, "0b00000101"),
        ("%#.0b", 0, ""),
        ("%+ b", 5, "101"),
        ("%hhb", 0x1ff, "11111111"),
        ("%b", u64::MAX, "11111111111111111111111111111111"),
        ("%llb", 1 << 40 | 1, "10000000000000000000000000000000000000001"),
    ];
    for (format_str, arg, expected) in cases {
        assert_eq!(ok(format_str, &[arg]), expected, "{format_str}");
    }
    assert_eq!(ok("x=%b y", &[3]), "x=11 y");
}

#[test]
fn star_width_and_precision() {
    assert_eq!(ok("[%*d]", &[5, 42]), "[   42]");
    // A negative width means `-`; only the low 32 bits count.
    assert_eq!(ok("[%*d]", &[0xdead_beef_ffff_fffb, 42]), "[42   ]");
    // A negative precision means none.
    assert_eq!(ok("[%.*f]", &[(-3i64) as u64, 1.5f64.to_bits()]), "[1.500000]");
    assert_eq!(ok("[%*.*s]", &[6, 2, u64::from_le_bytes(*b"abcdefg\0"), 0]), "[    ab]");
    // i32::MIN as a width cannot be negated into a sane width.
    assert_eq!(
        run(b"%*d", &[i32::MIN as u32 as u64, 1]),
        Err(PrintfError::FieldTooLarge { offset: 0, limit: 4096 })
    );
}

#[test]
fn length_modifiers_convert_like_c() {
    assert_eq!(ok("%hhd %hd %d %ld", &[0x1ff, 0x1_8000, 0x1_ffff_ffff, u64::MAX]), "-1 -32768 -1 -1");
    assert_eq!(
        ok("%hhu %hu %u %lu", &[0x1ff, 0x1_8000, 0x1_ffff_ffff, u64::MAX]),
        "255 32768 4294967295 18446744073709551615"
    );
    assert_eq!(
        ok("%lld %jd %zd %td %Ld %qd", &[i64::MIN as u64; 6]),
        vec![i64::MIN.to_string(); 6].join(" ")
    );
    assert_eq!(ok("%Lf", &[2.5f64.to_bits()]), "2.500000");
}

#[test]
fn count_consumes_a_word_and_prints_nothing() {
    assert_eq!(ok("a%nb%hhn%d", &[0, 0, 9]), "ab9");
}

#[test]
fn glibc_specific_forms() {
    assert_eq!(ok("%p|%10p|%+p|%#p", &[0, 0, 0x10, 0x10]), "(nil)|     (nil)|+0x10|0x10");
    assert_eq!(ok("%-5%|%%", &[]), "%|%");
    assert_eq!(
        ok("%f %e %a", &[(-f64::NAN).to_bits(), f64::INFINITY.to_bits(), f64::from_bits(1).to_bits()]),
        "-nan inf 0x0.0000000000001p-1022"
    );
    assert_eq!(ok("%05f|%-6F|", &[f64::INFINITY.to_bits(), f64::NAN.to_bits()]), "  inf|NAN   |");
    assert_eq!(
        ok("%.0a %.1a %A", &[1.5f64.to_bits(), 1.96875f64.to_bits(), (-0.0f64).to_bits()]),
        "0x2p+0 0x2.0p+0 -0X0P+0"
    );
    assert_eq!(ok("%#.2g", &[99.5f64.to_bits()]), "1.e+02");
    assert_eq!(ok("%lc", &[u64::from(b'A')]), "A");
}

#[test]
fn huge_precision_is_exact() {
    let s = ok("%.1074f", &[f64::from_bits(1).to_bits()]);
    assert_eq!(s.len(), 1076);
    assert!(s.ends_with("4940656458412465441765687928682213723650598026143247644255856825006755072702087518652998363616359923797965646954457177309266567103559397963987747960107818781263007131903114045278458171678489821036887186360569987307230500063874091535649843873124733972731696151400317153853980741262385655911710266585566867681870395603106249319452715914924553293054565444011274801297099995419319894090804165633245247571478690147267801593552386115501348035264934720193790268107107491703332226844753335720832431936092382893458368060106011506169809753078342277318329247904982524730776375927247874656084778203734469699533647017972677717585125660551199131504891101451037862738167250955837389733598993664809941164205702637090279242767544565229087538682506419718265533447265625"));
}

#[test]
fn malformed_input_is_a_typed_error() {
    let cases: [(&[u8], &[u64], PrintfError); 12] = [
        (b"%", &[], PrintfError::IncompleteSpec { offset: 0 }),
        (b"ab%-08.", &[], PrintfError::IncompleteSpec { offset: 2 }),
        (b"%ll", &[], PrintfError::IncompleteSpec { offset: 0 }),
        (b"x%y", &[], PrintfError::BadConversion { offset: 1, byte: b'y' }),
        (b"%1$d", &[1], PrintfError::BadConversion { offset: 0, byte: b'$' }),
        (b"%m", &[], PrintfError::BadConversion { offset: 0, byte: b'm' }),
        (b"%d %d", &[1], PrintfError::MissingArgument { offset: 3 }),
        (b"%*d", &[1], PrintfError::MissingArgument { offset: 0 }),
        (b"%s", &[u64::MAX], PrintfError::UnterminatedString { offset: 0 }),
        (b"%99999d", &[1], PrintfError::FieldTooLarge { offset: 0, limit: 4096 }),
        (b"%ls", &[0], PrintfError::WideCharacter { offset: 0 }),
        (b"%lc", &[0xe9], PrintfError::WideCharacter { offset: 0 }),
    ];
    for (fmt, args, error) in cases {
        assert_eq!(run(fmt, args), Err(error), "{:?}", String::from_utf8_lossy(fmt));
    }
    // No NUL in the whole message.
    assert_eq!(format(&[u64::MAX, u64::MAX], &mut Vec::new()), Err(PrintfError::UnterminatedFormat));
    assert_eq!(format(&[], &mut Vec::new()), Err(PrintfError::UnterminatedFormat));
}

#[test]
fn an_error_appends_nothing() {
    let mut out = b"kept".to_vec();
    let words = PrintfMessage::new(b"printed %d then %d").int(1).into_words();
    assert!(format(&words[1..], &mut out).is_err());
    assert_eq!(out, b"kept");
}

#[test]
fn limits_bound_fields() {
    let limits = PrintfLimits { max_field: 10, ..PrintfLimits::default() };
    assert_eq!(run_with(b"%10d", &[1], &limits).map(|r| r.1), Ok(10));
    assert_eq!(run_with(b"%11d", &[1], &limits), Err(PrintfError::FieldTooLarge { offset: 0, limit: 10 }));
    assert_eq!(
        run_with(b"%.*f", &[11, 0], &limits),
        Err(PrintfError::FieldTooLarge { offset: 0, limit: 10 })
    );
}

#[test]
fn output_past_the_bound_is_cut_and_counted() {
    let limits = PrintfLimits { max_output: 20, ..PrintfLimits::default() };
    let cut = |format: &[u8], args: &[u64]| run_with(format, args, &limits).unwrap();
    assert_eq!(cut(b"%10d%10d%d", &[1, 2, 3]), (format!("{:>10}{:>10}", 1, 2), 20));
    assert_eq!(cut(b"%10d%15d|%d", &[1, 2, 3]), (format!("{:>10}{:>10}", 1, ""), 20));
    assert_eq!(cut(&[b'x'; 21], &[]), ("x".repeat(20), 20));
    // Exactly the bound is not cut; later errors are still found within it.
    assert_eq!(cut(b"%10d%10d", &[1, 2]).1, 20);
    assert_eq!(run_with(b"%10d%d", &[1], &limits), Err(PrintfError::MissingArgument { offset: 4 }));
}

#[test]
fn conversion_work_past_the_bound_stops_printing_before_that_conversion() {
    let limits = PrintfLimits { max_work: 30, ..PrintfLimits::default() };
    // 1 + 10 + 0, then 1 + 0 + 12: 24 units; the third (1 + 0 + 6 = 7) would pass 30.
    let printed = run_with(b"[%10d][%.12f][%.6f] tail", &[1, 0, 0], &limits).unwrap();
    assert_eq!(printed.0, format!("[{:>10}][{:.12}][", 1, 0.0));
    assert_eq!(printed.1, printed.0.len());
    // `%.4096g` prints little but asks for 4096 digits: the default budget allows 15 of them.
    let mut words = PrintfMessage::new("%.4096g".repeat(40).as_bytes()).into_words();
    words.extend(std::iter::repeat(1.0f64.to_bits()).take(40));
    let mut out = Vec::new();
    assert_eq!(format(&words[1..], &mut out), Ok(15));
    assert_eq!(out, b"111111111111111");
}

#[test]
fn the_default_bounds_keep_a_hostile_message_cheap() {
    // 4,000 `%.4096g` conversions (the audit's message): cut after 15.
    let mut words = PrintfMessage::new("%.4096g".repeat(4000).as_bytes()).into_words();
    words.extend(std::iter::repeat(std::f64::consts::PI.to_bits()).take(4000));
    let mut out = Vec::new();
    let printed = format(&words[1..], &mut out).unwrap();
    let one = ok("%.4096g", &[std::f64::consts::PI.to_bits()]);
    assert!(one.starts_with("3.14159265358979311599796346854"));
    assert_eq!(out, one.repeat(15).as_bytes());
    assert_eq!(printed, out.len());
}

/// A deterministic stream of hostile messages: formats full of `%` and spec characters, random
/// argument words. None may panic; output never exceeds the limit.
#[test]
fn random_words_never_panic() {
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const ALPHABET: &[u8] = b"%%%%-+ #0123456789.*hlLqjzZtdiuoxXcspfFeEgGaAn$ab";
    let limits = PrintfLimits { max_field: 300, max_output: 2000, max_work: 3000 };
    // Fewer rounds under Miri, which interprets every step.
    let rounds = if cfg!(miri) { 100 } else { 5000 };
    for _ in 0..rounds {
        let len = (next() % 24) as usize;
        let fmt: Vec<u8> = (0..len).map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize]).collect();
        let mut words: Vec<u64> = cstr(&fmt);
        for _ in 0..next() % 8 {
            words.push(if next() % 3 == 0 { next() % 400 } else { next() });
        }
        let mut out = Vec::new();
        if let Ok(n) = format_with(&words, &limits, &mut out) {
            assert!(n <= limits.max_output && n == out.len());
        }
        // Raw garbage as a whole message, too.
        let garbage: Vec<u64> = (0..next() % 6).map(|_| next()).collect();
        let _ = format_with(&garbage, &limits, &mut Vec::new());
    }
}

#[test]
fn control_word_selects_the_stream() {
    let limits = PrintfLimits::default();
    let out = printf_message(&PrintfMessage::new(b"o").into_words(), &limits).unwrap();
    assert_eq!(out, (Stream::Stdout, b"o".to_vec()));
    let err = printf_message(&PrintfMessage::new(b"e").to_stderr().into_words(), &limits).unwrap();
    assert_eq!(err, (Stream::Stderr, b"e".to_vec()));
    for control in [2, 3, 1 << 63] {
        let message = PrintfMessage::new(b"x").control(control).into_words();
        assert_eq!(printf_message(&message, &limits), Err(PrintfError::ControlBits { control }));
    }
    assert_eq!(printf_message(&[], &limits), Err(PrintfError::EmptyMessage));
}

#[test]
fn reply_is_the_byte_count_or_minus_one() {
    let mut sink = Streams { stdout: Vec::new(), stderr: Vec::new() };
    let message = PrintfMessage::new(b"%d-%s\n").int(12).string(b"ab").into_words();
    assert_eq!(printf_reply(&message, &mut sink), [6, 0]);
    assert_eq!(sink.stdout, b"12-ab\n");
    assert!(sink.stderr.is_empty());

    let bad = PrintfMessage::new(b"%d").control(4).int(1).into_words();
    assert_eq!(printf_reply(&bad, &mut sink), ErrorCode::BadRequest.reply());
    assert_eq!(printf_reply(&bad, &mut sink)[0] as i64, -1);
    assert_eq!(sink.stdout, b"12-ab\n", "nothing printed on error");

    struct Broken;
    impl std::io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut broken = Streams { stdout: Broken, stderr: Broken };
    assert_eq!(printf_reply(&message, &mut broken), ErrorCode::Refused.reply());
}

#[test]
fn bad_input_prints_up_to_the_problem_then_a_marker() {
    let limits = PrintfLimits::default();
    let cases: [(&[u8], Vec<u64>, &str, usize); 6] = [
        (b"a%", vec![], "a<hostcall: incomplete conversion>", 1),
        (b"a%99999db", vec![1], "a<hostcall: width or precision above 4096>", 1),
        (b"a%lcb", vec![0x263a], "a<hostcall: wide characters not supported>", 1),
        (b"ab%lsc", vec![0], "ab<hostcall: wide characters not supported>", 2),
        (b"%d-%d-%d", vec![1, 2], "1-2-<hostcall: missing argument>", 4),
        (b"x%y", vec![], "x<hostcall: bad conversion %y>", 1),
    ];
    for (format, args, printed, count) in cases {
        let mut message = PrintfMessage::new(format);
        for arg in &args {
            message = message.uint(*arg);
        }
        let result = printf_partial(&message.into_words(), &limits).unwrap();
        assert_eq!(String::from_utf8_lossy(&result.bytes), printed, "{:?}", String::from_utf8_lossy(format));
        assert_eq!(result.printed, count);
        assert!(result.stopped.is_some());
    }
    // A string argument without a NUL: the string's bytes are not printed.
    let mut words = PrintfMessage::new(b"s=%s").into_words();
    words.push(u64::from_le_bytes(*b"abcdefgh"));
    let result = printf_partial(&words, &limits).unwrap();
    assert_eq!(result.bytes, b"s=<hostcall: unterminated %s argument>");
    // No format string at all: an error, nothing printed.
    assert_eq!(printf_partial(&[0, u64::MAX], &limits), Err(PrintfError::UnterminatedFormat));
}
