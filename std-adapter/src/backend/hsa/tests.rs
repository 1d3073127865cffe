//! Unit tests of the HSA backend that need no GPU.

use super::signal::timeout_ticks;
use super::*;
use hsa_sys::{AmdLinkInfoType, AmdMemoryPoolLinkInfo, HsaStatus};
use std::time::Duration;

fn link(atomic_64: bool, link_type: AmdLinkInfoType) -> AmdMemoryPoolLinkInfo {
    AmdMemoryPoolLinkInfo { atomic_support_64bit: atomic_64, link_type, ..Default::default() }
}

fn link32(atomic_32: bool, atomic_64: bool, link_type: AmdLinkInfoType) -> AmdMemoryPoolLinkInfo {
    AmdMemoryPoolLinkInfo { atomic_support_32bit: atomic_32, ..link(atomic_64, link_type) }
}

#[test]
fn atomics_are_judged_on_hop_0_as_rocclr_does() {
    // Hop 0 without 32- or 64-bit atomics: missing, whatever the later hops say.
    let verdict = PlatformAtomics::from_links(
        "gfx90a",
        &[link32(false, false, AmdLinkInfoType::PCIE), link32(true, true, AmdLinkInfoType::HYPERTRANSPORT)],
    );
    assert_eq!(
        verdict,
        PlatformAtomics::Missing { gpu: "gfx90a".into(), hop: 0, link: AmdLinkInfoType::PCIE }
    );
    // 32-bit atomics alone count (ROCclr: "if either of the atomic is supported").
    assert_eq!(
        PlatformAtomics::from_links("gfx90a", &[link32(true, false, AmdLinkInfoType::PCIE)]),
        PlatformAtomics::Supported
    );
    // A later hop without atomics is not looked at.
    assert_eq!(
        PlatformAtomics::from_links(
            "gfx90a",
            &[link(true, AmdLinkInfoType::XGMI), link32(false, false, AmdLinkInfoType::PCIE)]
        ),
        PlatformAtomics::Supported
    );
    // No hop: the pool is on the GPU's own chip.
    assert_eq!(PlatformAtomics::from_links("gfx90a", &[]), PlatformAtomics::Supported);
}

#[test]
fn the_atomics_error_names_the_phase_protocol() {
    let error = HsaError::NoPlatformAtomics { gpu: "gfx90a".into(), hop: 0, link: AmdLinkInfoType::PCIE };
    let text = error.to_string();
    assert!(text.contains("phase protocol"), "{text}");
    assert!(text.contains("HSA_AMD_LINK_INFO_TYPE_PCIE"), "{text}");
}

#[test]
fn timeouts_convert_to_ticks_and_saturate() {
    assert_eq!(timeout_ticks(Duration::from_millis(3), 1_000_000_000), 3_000_000);
    assert_eq!(timeout_ticks(Duration::from_secs(2), 100_000_000), 200_000_000);
    assert_eq!(timeout_ticks(Duration::MAX, 1_000_000_000), u64::MAX);
    assert_eq!(timeout_ticks(Duration::ZERO, 1_000_000_000), 0);
}

#[test]
fn status_errors_show_code_name_and_text() {
    let error = HsaError::Status {
        call: "hsa_init",
        status: HsaStatus::ERROR_OUT_OF_RESOURCES,
        text: "out of resources".into(),
    };
    assert_eq!(
        error.to_string(),
        "hsa_init failed with HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008): out of resources"
    );
    assert_eq!(error.status(), Some(HsaStatus(0x1008)));
}
