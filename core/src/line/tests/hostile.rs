//! Hostile bytes: whatever the device writes, a scan serves only consistent requests, in both of
//! the scan's copies.

use super::{echo, Buffer};
use crate::host::{Host as _, PacketRequest};
use crate::line::{seq_of, word};
use crate::sync::Ordering;
use proptest::prelude::*;

extern crate std;
use std::vec::Vec;

proptest! {

    #![proptest_config(crate::test_support::proptest_config())]
    /// Whatever the device writes into the request blocks, a scan stays bounded, serves a packet
    /// at most once, and every packet it serves had every active word tagged with the head's
    /// sequence.
    #[test]
    fn hostile_bytes_are_served_only_when_consistent(
        heads in proptest::collection::vec(any::<u64>(), 2),
        masks in proptest::collection::vec(any::<u64>(), 2),
        fill in proptest::collection::vec(any::<u64>(), 64),
        agree in any::<bool>(),
    ) {
        hostile_bytes_case(&heads, &masks, &fill, agree)?;
        if super::VECTOR_SCAN_BUILT {
            crate::line::host::with_portable_scan(|| hostile_bytes_case(&heads, &masks, &fill, agree))?;
        }
    }
}

/// One case of `hostile_bytes_are_served_only_when_consistent`, in this thread's scan.
fn hostile_bytes_case(heads: &[u64], masks: &[u64], fill: &[u64], agree: bool) -> Result<(), TestCaseError> {
    let b = Buffer::new(2);
    let view = b.view();
    for index in 0..2 {
        let r = view.request(index);
        r.head.store(heads[index], Ordering::Relaxed);
        let seq = seq_of(heads[index]);
        let m = masks[index];
        r.mask.store(if agree { word(m, seq) } else { m }, Ordering::Relaxed);
        for (w, line_word) in r.lanes.iter().flatten().enumerate() {
            let v = fill[w % fill.len()];
            line_word.store(if agree { word(v, seq) } else { v }, Ordering::Relaxed);
        }
    }
    let mut seen = Vec::new();
    let report = view.host().drain(&mut |p: &mut PacketRequest<'_>| {
        seen.push(p.index());
        echo(p);
    });
    prop_assert_eq!(report.packets as usize, seen.len());
    seen.dedup();
    prop_assert_eq!(report.packets as usize, seen.len());
    for &index in &seen {
        let seq = seq_of(heads[index as usize]);
        prop_assert!(seq != 0);
        prop_assert_eq!(view.served(index as usize).load(Ordering::Relaxed), seq);
    }
    prop_assert_eq!(view.host().drain(&mut echo).packets, 0, "nothing served twice");
    Ok(())
}
