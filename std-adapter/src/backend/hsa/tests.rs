//! Unit tests of the HSA backend that need no GPU.

use super::signal::timeout_ticks;
use super::*;
use hsa_sys::{AmdLinkInfoType, AmdMemoryPoolLinkInfo, HsaStatus};
use std::time::Duration;

fn link(atomic_64: bool, link_type: AmdLinkInfoType) -> AmdMemoryPoolLinkInfo {
    AmdMemoryPoolLinkInfo { atomic_support_64bit: atomic_64, link_type, ..Default::default() }
}

#[test]
fn a_link_without_64_bit_atomics_is_missing() {
    let verdict = PlatformAtomics::from_links(
        "gfx90a",
        &[link(true, AmdLinkInfoType::XGMI), link(false, AmdLinkInfoType::PCIE)],
    );
    assert_eq!(
        verdict,
        PlatformAtomics::Missing { gpu: "gfx90a".into(), hop: 1, link: AmdLinkInfoType::PCIE }
    );
    assert_eq!(
        PlatformAtomics::from_links("gfx90a", &[link(true, AmdLinkInfoType::PCIE)]),
        PlatformAtomics::Supported
    );
    assert!(matches!(PlatformAtomics::from_links("gfx90a", &[]), PlatformAtomics::Unknown(_)));
}

#[test]
fn combine_prefers_missing_then_unknown() {
    let missing = PlatformAtomics::Missing { gpu: "b".into(), hop: 0, link: AmdLinkInfoType::PCIE };
    let unknown = PlatformAtomics::Unknown("a".into());
    assert_eq!(
        PlatformAtomics::combine([PlatformAtomics::Supported, unknown.clone(), missing.clone()]),
        missing
    );
    assert_eq!(PlatformAtomics::combine([PlatformAtomics::Supported, unknown.clone()]), unknown);
    assert_eq!(PlatformAtomics::combine([]), PlatformAtomics::Supported);
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
