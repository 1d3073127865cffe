//! The corpus: messages of a few pieces (literal text, then one conversion with its C argument and
//! our words), from a grid of special values and a fixed-seed PRNG.

use super::*;

/// splitmix64: small, deterministic, good enough to spread cases.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub(crate) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// A C argument, typed as the length modifier implies.
#[derive(Clone, Debug)]
pub(crate) enum CArg {
    Int(c_int),
    LongLong(i64),
    Double(f64),
    Str(CString),
    /// A null `char *` (LLVM's RPC carries it; the PRINTF words cannot tell it from `""`).
    NullStr,
    Ptr(u64),
    CountPtr,
}

/// Literal text, one conversion, its C arguments and our words.
#[derive(Clone, Debug)]
pub(crate) struct Piece {
    /// What `snprintf` gets.
    pub(crate) c_format: String,
    /// What the device sends (differs from `c_format` only for `%L` floats).
    pub(crate) our_format: String,
    /// The `*` width and precision arguments, in order.
    pub(crate) stars: Vec<c_int>,
    /// The conversion's argument (`None` for `%%`, which takes none).
    pub(crate) value: Option<CArg>,
    /// Our words for the stars and the argument.
    pub(crate) words: Vec<u64>,
}

pub(crate) const FLOAT_CONVS: [&str; 8] = ["f", "F", "e", "E", "g", "G", "a", "A"];

pub(crate) const INT_CONVS: [&str; 6] = ["d", "i", "u", "o", "x", "X"];

/// The integer conversions compared: [`INT_CONVS`] and C23's `b`/`B` where the C library prints
/// them (glibc 2.35 and later).
pub(crate) fn int_convs() -> &'static [&'static str] {
    static CONVS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    CONVS.get_or_init(|| {
        let mut convs = INT_CONVS.to_vec();
        if c_prints_binary() {
            convs.extend(["b", "B"]);
        } else {
            eprintln!("the C library does not print %b (glibc before 2.35): %b and %B not compared");
        }
        convs
    })
}

pub(crate) fn special_floats() -> Vec<f64> {
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

pub(crate) fn special_ints() -> Vec<u64> {
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

pub(crate) fn random_float(rng: &mut Rng, specials: &[f64]) -> f64 {
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

pub(crate) fn random_int(rng: &mut Rng, specials: &[u64]) -> u64 {
    match rng.below(5) {
        0 | 1 => rng.pick(specials),
        2 => rng.next(),
        3 => rng.range(-1000, 1000) as u64,
        // An int with garbage in the high half: `%d` must look at the low 32 bits only.
        _ => rng.next() << 32 | u64::from(rng.next() as u32),
    }
}

pub(crate) fn literal(rng: &mut Rng) -> String {
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

pub(crate) fn random_string(rng: &mut Rng) -> Vec<u8> {
    let len = if rng.chance(10) { rng.below(200) } else { rng.below(30) };
    (0..len)
        .map(|_| if rng.chance(80) { rng.range(32, 126) as u8 } else { rng.range(1, 255) as u8 })
        .collect()
}

/// A star argument: our word carries garbage above the C `int`.
pub(crate) fn star(rng: &mut Rng, value: i32, stars: &mut Vec<c_int>, words: &mut Vec<u64>) -> String {
    stars.push(value);
    words.push(rng.next() << 32 | u64::from(value as u32));
    "*".into()
}

pub(crate) fn random_piece(rng: &mut Rng, floats: &[f64], ints: &[u64]) -> Piece {
    let lit = literal(rng);
    let conv = match rng.below(20) {
        0..=8 => rng.pick(&FLOAT_CONVS),
        9..=13 => rng.pick(int_convs()),
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
        "d" | "i" | "u" | "o" | "x" | "X" | "b" | "B" => {
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
