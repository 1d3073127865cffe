//! The stand-in itself: its C self-test, and its types and constants against `hsa-sys` and, where
//! ROCm is installed, ROCm's own headers.

use super::*;

#[test]
fn the_c_self_test_passes() {
    let flags = ["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread", "selftest.c"];
    let binary = standin::compile("hsa-standin-selftest", "", &flags);
    let mut child = std::process::Command::new(&binary).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let status = common::watchdog::exits_within(&mut child, "the C self-test", Duration::from_secs(60));
    assert!(status.success(), "the C self-test failed ({status}); its message is on stderr above");
}

/// Whether `word` occurs in `text` as a whole C identifier.
fn has_identifier(text: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word)
        .any(|(at, _)| !text[..at].ends_with(is_ident) && !text[at + word.len()..].starts_with(is_ident))
}

#[test]
fn the_stand_in_agrees_with_hsa_sys() {
    // hsa-sys's generated checks of every constant and layout, kept where the stand-in defines
    // all the names a check uses, compiled against the stand-in instead of ROCm's headers.
    let defined = standin::SOURCES[..2].concat();
    let mut kept = Vec::new();
    let mut source = format!("#include \"{}/hsa_standin.c\"\n", standin::SOURCE_DIR);
    for line in hsa_sys::c_check_source().lines().filter(|line| line.starts_with("_Static_assert")) {
        let names = line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|token| {
            token.starts_with("HSA_") || (token.starts_with("hsa_") && token.ends_with("_t"))
        });
        if names.clone().all(|name| has_identifier(&defined, name)) {
            source.push_str(line);
            source.push('\n');
            kept.push(line.to_owned());
        }
    }
    for needed in
        ["HSA_STATUS_ERROR_OUT_OF_RESOURCES ==", "atomic_support_64bit) == 17", "HSA_WAIT_STATE_BLOCKED =="]
    {
        assert!(kept.iter().any(|line| line.contains(needed)), "the check of {needed:?} was dropped");
    }
    let file = standin::scratch_dir().join(format!("agrees-{}.c", std::process::id()));
    std::fs::write(&file, source).unwrap();
    let result = standin::cc(&["-std=c11", "-fsyntax-only", "-Werror", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert!(
        result.status.success(),
        "the stand-in disagrees with hsa-sys:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    println!("{} constants and layouts of hsa-sys checked against the stand-in", kept.len());
}

#[test]
#[cfg_attr(
    not(hostcall_rocm_headers),
    ignore = "ROCm's headers are not installed (/usr/include/hsa/hsa.h; .ci/install-deps)"
)]
fn the_stand_in_agrees_with_the_rocm_headers() {
    let result = standin::cc(&[
        "-std=c11",
        "-fsyntax-only",
        "-Werror",
        "-DHSA_STANDIN_SYSTEM_HEADERS",
        "hsa_standin.c",
    ]);
    assert!(
        result.status.success(),
        "the stand-in disagrees with ROCm:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
}
