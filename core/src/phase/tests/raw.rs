//! The buffer in raw memory: `from_raw`'s checks, a round trip, the prefix pointing at the arrays.

use super::*;

/// A raw, line-aligned allocation.
#[repr(C, align(64))]
struct Line([u64; 8]);

fn raw(size: usize) -> Vec<Line> {
    (0..size.div_ceil(64) + 1).map(|_| Line([0; 8])).collect()
}

#[test]
fn from_raw_checks_address_size_and_count() {
    let n = 5;
    let size = buffer_size(n).unwrap();
    let mut mem = raw(size);
    let base = mem.as_mut_ptr() as *mut u8;
    // SAFETY (all calls): `mem` outlives the views and is only accessed through them.
    unsafe {
        assert!(View::from_raw(base, size, n).is_ok());
        assert!(View::from_raw(base.add(8), size, n).is_ok(), "8-aligned is enough");
        assert_eq!(
            View::from_raw(base, size - 1, n).err(),
            Some(LayoutError::TooSmall { needed: size, given: size - 1 })
        );
        assert!(matches!(View::from_raw(base.add(4), size, n), Err(LayoutError::Misaligned { .. })));
        assert!(matches!(View::from_raw(base, size, 1), Err(LayoutError::Geometry(_))));
        assert!(matches!(View::from_raw(base, size, u32::MAX), Err(LayoutError::Geometry(_))));
        assert_eq!(View::from_raw(core::ptr::null_mut(), size, 2).err(), Some(LayoutError::Null));
    }
}

#[test]
fn a_raw_buffer_round_trips_and_the_prefix_points_at_its_arrays() {
    let n = 4;
    let size = buffer_size(n).unwrap();
    let mut mem = raw(size);
    let base = mem.as_mut_ptr() as *mut u8;
    // SAFETY: `mem` outlives the view and is only accessed through it.
    let v = unsafe { View::from_raw(base, size, n) }.unwrap();
    v.init(base as u64, 0);
    let device_phase = v.prefix().device_phase.load(Ordering::Relaxed) as usize;
    assert_eq!(device_phase, v.device_phase(0) as *const AtomicU32 as usize);
    assert_eq!(v.prefix().host_phase.load(Ordering::Relaxed) as usize, v.host_phase(0) as *const _ as usize);
    assert_eq!(v.prefix().headers.load(Ordering::Relaxed) as usize, v.header(0) as *const _ as usize);
    assert_eq!(v.prefix().payloads.load(Ordering::Relaxed) as usize, v.payload(0) as *const _ as usize);
    assert_eq!(v.prefix().occupied.load(Ordering::Relaxed) as usize, v.occupied_word(0) as *const _ as usize);
    assert_eq!(v.payload(n as usize - 1) as *const Payload as usize + 4096, base as usize + size);
    let mut c = v.claim(3).unwrap();
    c.write_lane(2, &request(41));
    let s = c.submit(8, 1 << 2);
    // The device's view of the wire: the raw u32 at device_phase[3] is 1.
    // SAFETY: in bounds of `mem` (the layout), aligned, read while no one writes.
    assert_eq!(unsafe { *base.add(device_phase - base as usize).cast::<u32>().add(3) }, 1);
    assert_eq!(v.host().drain(&mut echo).packets, 1);
    assert_eq!(s.wait(|| {}).reply(2), [42, 8]);
}
