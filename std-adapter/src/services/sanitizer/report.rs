//! One SANITIZER packet, decoded ([`SanitizerReport`]), and this project's own text for it
//! ([`SanitizerReport::text`]), printed where the process has no AddressSanitizer runtime.

use std::fmt::Write as _;

use hostcall_core::PacketRequest;

use crate::backend::hsa::LoadedCodeObject;

/// Request words of a SANITIZER lane (PROTOCOL.md section 3.6; ROCm's `asanrtl` device code).
pub mod slot {
    /// The faulting address.
    pub const ADDRESS: usize = 0;
    /// The pc (the reporting call's return address).
    pub const PC: usize = 1;
    /// Workgroup id x (y and z follow).
    pub const WORKGROUP_X: usize = 2;
    /// The work-item's local linear id.
    pub const LOCAL_ID: usize = 5;
    /// Access info: bit 0 set for a write; the high 32 bits set for a "no abort" report.
    pub const ACCESS_INFO: usize = 6;
    /// The access size in bytes.
    pub const SIZE: usize = 7;
}

/// One faulting lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultingLane {
    /// The lane (its bit in `activemask`).
    pub lane: usize,
    /// The work-item's local linear id (word 5).
    pub local_id: u64,
    /// The faulting address (word 0).
    pub address: u64,
}

/// A SANITIZER packet as ROCm's host reads it: once per packet; every active lane's address and
/// local id, lowest lane first; pc, workgroup, access info and size from the first active lane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SanitizerReport {
    /// The device ordinal of the buffer ([`PacketRequest::device`]).
    pub device: u32,
    /// The pc of the faulting access (word 1 of the first lane).
    pub pc: u64,
    /// Workgroup id x, y, z (words 2..=4 of the first lane).
    pub workgroup: [u64; 3],
    /// Access info (word 6 of the first lane).
    pub access_info: u64,
    /// Access size in bytes (word 7 of the first lane).
    pub size: u64,
    /// The faulting lanes, lowest first (at least one).
    pub lanes: Vec<FaultingLane>,
}

impl SanitizerReport {
    /// Decodes `packet`; `None` when it has no active lane.
    pub fn from_packet(packet: &PacketRequest<'_>) -> Option<Self> {
        let mut lanes = packet.lanes().map(|lane| (lane, packet.request(lane))).peekable();
        let &(_, first) = lanes.peek()?;
        let x = slot::WORKGROUP_X;
        Some(Self {
            device: packet.device(),
            pc: first[slot::PC],
            workgroup: [first[x], first[x + 1], first[x + 2]],
            access_info: first[slot::ACCESS_INFO],
            size: first[slot::SIZE],
            lanes: lanes
                .map(|(lane, words)| FaultingLane {
                    lane,
                    local_id: words[slot::LOCAL_ID],
                    address: words[slot::ADDRESS],
                })
                .collect(),
        })
    }

    /// Bit 0 of the access info.
    pub fn is_write(&self) -> bool {
        self.access_info & 1 != 0
    }

    /// Whether the device asks the host to stop the process: none of the access info's high 32
    /// bits is set. (The device sets all of them for a "no abort" report; ROCm's host tests any.)
    pub fn is_abort(&self) -> bool {
        self.access_info >> 32 == 0
    }

    /// The faulting addresses, lowest lane first (`__asan_report_nonself_error`'s `addrs`).
    pub fn addresses(&self) -> Vec<u64> {
        self.lanes.iter().map(|lane| lane.address).collect()
    }

    /// `[device, wg x, wg y, wg z, local id per lane]` (`__asan_report_nonself_error`'s ids).
    pub fn ids(&self) -> Vec<u64> {
        let [x, y, z] = self.workgroup;
        let mut ids = vec![u64::from(self.device), x, y, z];
        ids.extend(self.lanes.iter().map(|lane| lane.local_id));
        ids
    }

    /// This project's report, one line per `\n`:
    ///
    /// ```text
    /// ==hostcall== AddressSanitizer: WRITE of size 4 on amdgpu device 0 by 3 lanes
    /// ==hostcall==   pc 0x7f00001234 in file:///opt/app/kernels.co#offset=4096&size=8192 at offset 0x1234
    /// ==hostcall==   workgroup (1, 2, 3)
    /// ==hostcall==   lane 0: local id 64, address 0x7f0000100000
    /// ```
    ///
    /// `code_object` is the loaded code object holding the pc, if known (the offset is
    /// `pc - load_delta`); otherwise the pc line says `(code object unknown)`. A "no abort" report
    /// ends with a line saying so.
    pub fn text(&self, code_object: Option<&LoadedCodeObject>) -> String {
        let mut out = String::new();
        let access = if self.is_write() { "WRITE" } else { "READ" };
        let lanes = self.lanes.len();
        let plural = if lanes == 1 { "" } else { "s" };
        let _ = writeln!(
            out,
            "==hostcall== AddressSanitizer: {access} of size {} on amdgpu device {} by {lanes} lane{plural}",
            self.size, self.device
        );
        match code_object {
            Some(object) => {
                let offset = self.pc.wrapping_sub(object.load_delta as u64);
                let _ =
                    writeln!(out, "==hostcall==   pc {:#x} in {} at offset {offset:#x}", self.pc, object.uri);
            }
            None => {
                let _ = writeln!(out, "==hostcall==   pc {:#x} (code object unknown)", self.pc);
            }
        }
        let [x, y, z] = self.workgroup;
        let _ = writeln!(out, "==hostcall==   workgroup ({x}, {y}, {z})");
        for lane in &self.lanes {
            let _ = writeln!(
                out,
                "==hostcall==   lane {}: local id {}, address {:#x}",
                lane.lane, lane.local_id, lane.address
            );
        }
        if !self.is_abort() {
            let _ = writeln!(out, "==hostcall==   (a no-abort report: the program goes on)");
        }
        out
    }
}
