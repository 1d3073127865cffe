//! DEVMEM (id 3, PROTOCOL.md section 3): device memory the host allocates and frees on a device's
//! request, within [`DevMemLimits`].

use crate::error::Error;
use crate::memory::{DeviceAllocation, DeviceMemory};
use crate::serve::registry::{PacketService, Services};
use hostcall_core::dispatch::DEVMEM;
use hostcall_core::{ErrorCode, PacketRequest};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

impl Services {
    /// Registers DEVMEM (id 3): `slot[0] = 0` allocates `slot[1]` bytes of `memory` and answers the
    /// device address in reply word 0 (0 on failure); `slot[0] != 0` frees that address (reply
    /// `[0, 0]`). Refused (null address, error code in word 1): sizes of 0 or above
    /// `limits.max_allocation`, more than `limits.max_total` bytes live, and frees of addresses
    /// this service did not hand out (logged).
    pub fn enable_devmem(&self, memory: Arc<dyn DeviceMemory>, limits: DevMemLimits) -> Result<(), Error> {
        self.register_packet(DEVMEM, "devmem", DevMem { memory, limits, live: Mutex::default() })
    }
}

/// What DEVMEM will hand out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevMemLimits {
    /// The largest single allocation, in bytes.
    pub max_allocation: u64,
    /// The most bytes live at once.
    pub max_total: u64,
    /// Alignment of every allocation.
    pub align: usize,
}

impl Default for DevMemLimits {
    fn default() -> Self {
        Self { max_allocation: 256 << 20, max_total: 1 << 30, align: 64 }
    }
}

#[derive(Default)]
struct Live {
    by_address: HashMap<u64, DeviceAllocation>,
    bytes: u64,
}

struct DevMem {
    memory: Arc<dyn DeviceMemory>,
    limits: DevMemLimits,
    live: Mutex<Live>,
}

impl DevMem {
    fn allocate(&self, live: &mut Live, size: u64) -> Result<u64, ErrorCode> {
        if size == 0 || size > self.limits.max_allocation || live.bytes + size > self.limits.max_total {
            log::warn!("devmem: refused an allocation of {size} bytes ({} live)", live.bytes);
            return Err(ErrorCode::Refused);
        }
        let allocation = DeviceAllocation::new(self.memory.clone(), size as usize, self.limits.align)
            .map_err(|e| {
                log::warn!("devmem: {e}");
                ErrorCode::Refused
            })?;
        let address = allocation.device_address();
        live.bytes += size;
        live.by_address.insert(address, allocation);
        Ok(address)
    }

    fn free(&self, live: &mut Live, address: u64) -> Result<(), ErrorCode> {
        let allocation = live.by_address.remove(&address).ok_or_else(|| {
            log::warn!("devmem: free of {address:#x}, which devmem did not allocate (refused)");
            ErrorCode::BadRequest
        })?;
        live.bytes -= allocation.len() as u64;
        Ok(())
    }
}

impl PacketService for DevMem {
    fn serve(&self, packet: &mut PacketRequest<'_>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        for lane in packet.lanes() {
            let request = packet.request(lane);
            let outcome = match request[0] {
                0 => self.allocate(&mut live, request[1]).map(|address| [address, 0]),
                address => self.free(&mut live, address).map(|()| [0, 0]),
            };
            match outcome {
                Ok(reply) => packet.reply(lane, reply),
                Err(code) => packet.reply_with_error(lane, [0, code as u64]),
            }
        }
    }
}
