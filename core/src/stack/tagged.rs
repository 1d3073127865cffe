//! Tagged pointers: a packet index in the low bits, an ABA tag in the high bits.
//!
//! A Treiber stack's pop reads `top`, then `top.next`, then CASes `top` from the first value to
//! the second. Without a tag this interleaving corrupts the stack (the ABA problem):
//!
//! | wave A (pop) | wave B |
//! | --- | --- |
//! | reads top = P, P.next = Q | |
//! | | pops P, pops Q, pushes P back (top = P, P.next = R) |
//! | CAS(top, P -> Q) succeeds: Q, which B holds, is on the free-list again | |
//!
//! Every time a wave returns a packet to the free-list it adds the tag step (`index_mask + 1`),
//! so the value B pushes back differs from the P that A read and A's CAS fails. The tag wraps
//! after `2^64 / step` returns of one packet; the rule for index 0 keeps a wrapped pointer from
//! becoming the null pointer 0 (it takes tag 1 instead).

use crate::view::{packet_count, GeometryError, MAX_PACKETS};

/// The shape of one buffer's index space, held privately by whoever views the buffer.
///
/// The host never reads `index_mask` back from shared memory: it derives its own copy here from
/// the packet count it was given, so a device that scribbles over the shared word cannot make the
/// host index out of bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    num_packets: u32,
    index_mask: u64,
}

impl Geometry {
    /// The largest packet count accepted: [`MAX_PACKETS`](crate::MAX_PACKETS), the same for
    /// every protocol.
    pub const MAX_PACKETS: u32 = MAX_PACKETS;

    /// The geometry of a buffer of `num_packets` packets.
    ///
    /// ```
    /// use hostcall_core::stack::Geometry;
    /// let g = Geometry::new(5).unwrap();
    /// assert_eq!(g.index_mask(), 7);
    /// assert_eq!(g.tag_step(), 8);
    /// assert!(Geometry::new(1).is_err());
    /// ```
    pub fn new(num_packets: u32) -> Result<Self, GeometryError> {
        let num_packets = packet_count(u64::from(num_packets))?;
        Ok(Self { num_packets, index_mask: u64::from(num_packets).next_power_of_two() - 1 })
    }

    /// Number of packets.
    pub fn num_packets(self) -> u32 {
        self.num_packets
    }

    /// `next_power_of_two(num_packets) - 1`.
    pub fn index_mask(self) -> u64 {
        self.index_mask
    }

    /// The amount one return of a packet adds to its pointer: `index_mask + 1`.
    pub fn tag_step(self) -> u64 {
        self.index_mask + 1
    }

    /// Splits a tagged pointer read from shared memory. `Err` carries the out-of-range index;
    /// `Ok(None)` is the null pointer.
    pub fn decode(self, raw: u64) -> Result<Option<TaggedPtr>, u64> {
        if raw == 0 {
            return Ok(None);
        }
        let index = raw & self.index_mask;
        if index >= u64::from(self.num_packets) {
            return Err(index);
        }
        Ok(Some(TaggedPtr { raw, index: index as u32 }))
    }

    /// The pointer a packet gets when it goes back on the free-list: the tag advanced by one step,
    /// and the wrap rule applied (a result of 0 would be null, so it becomes index 0 with tag 1).
    pub fn advance_tag(self, ptr: TaggedPtr) -> TaggedPtr {
        ptr.advanced(self.tag_step())
    }

    /// The tag (high bits) of a pointer, counted in steps.
    pub fn tag(self, ptr: TaggedPtr) -> u64 {
        ptr.raw >> self.tag_step().trailing_zeros()
    }
}

/// A non-null tagged pointer whose index is known to be in range for its [`Geometry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaggedPtr {
    raw: u64,
    index: u32,
}

impl TaggedPtr {
    /// [`Geometry::advance_tag`] for a geometry whose tag step is `tag_step` (a producer's handle
    /// keeps only the step).
    #[inline(always)]
    pub(super) fn advanced(self, tag_step: u64) -> Self {
        let raw = match self.raw.wrapping_add(tag_step) {
            0 => tag_step,
            next => next,
        };
        Self { raw, index: self.index }
    }

    /// The word as stored in shared memory.
    pub fn raw(self) -> u64 {
        self.raw
    }

    /// The packet index.
    pub fn index(self) -> usize {
        self.index as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mask_is_next_power_of_two_minus_one() {
        for (n, mask) in [(2, 1), (3, 3), (4, 3), (5, 7), (64, 63), (65, 127)] {
            assert_eq!(Geometry::new(n).unwrap().index_mask(), mask);
        }
        assert_eq!(Geometry::new(0), Err(GeometryError::TooFewPackets(0)));
        assert!(Geometry::new(Geometry::MAX_PACKETS + 1).is_err());
    }

    #[test]
    fn null_and_out_of_range_decode() {
        let g = Geometry::new(3).unwrap(); // mask 3: index 3 exists in the mask, not in the buffer
        assert_eq!(g.decode(0), Ok(None));
        assert_eq!(g.decode(3), Err(3));
        assert_eq!(g.decode(4 + 3), Err(3));
        assert_eq!(g.decode(4).unwrap().unwrap().index(), 0);
    }

    #[test]
    fn wrap_of_index_zero_skips_null() {
        let g = Geometry::new(2).unwrap(); // step 2
        let top = g.decode(u64::MAX - 1).unwrap().unwrap(); // index 0, the last tag
        let wrapped = g.advance_tag(top);
        assert_eq!(wrapped.raw(), 2, "index 0 with tag 1, not null");
        assert_eq!(wrapped.index(), 0);
        let one = g.decode(u64::MAX).unwrap().unwrap(); // index 1, last tag
        assert_eq!(g.advance_tag(one).raw(), 1, "index 1 with tag 0 is not null");
    }

    proptest! {

        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn advance_keeps_index_and_never_yields_null(n in 2u32..5000, raw in any::<u64>()) {
            let g = Geometry::new(n).unwrap();
            if let Ok(Some(p)) = g.decode(raw) {
                let q = g.advance_tag(p);
                prop_assert_eq!(q.index(), p.index());
                prop_assert_ne!(q.raw(), 0);
                prop_assert_ne!(q.raw(), p.raw());
                prop_assert_eq!(g.decode(q.raw()), Ok(Some(q)));
            }
        }
    }
}
