//! xorshift64*: reproducible random numbers without a dependency, for the tests that play a
//! hostile device.

/// A xorshift64* generator; seed it with anything but 0.
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (not 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
