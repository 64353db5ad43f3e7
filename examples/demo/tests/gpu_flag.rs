//! `demo --gpu` runs on a GPU or fails: it never falls back to the emulator, so a GPU check
//! that runs it cannot pass without a GPU. Without a driver (CI) it must fail with a message
//! that says so; with a GPU it must pass on it.

use std::process::Command;

#[test]
fn gpu_flag_never_falls_back_to_the_emulator() {
    let out = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--gpu", "--n", "4099", "--seed", "1"])
        .output()
        .expect("starting demo");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("EMULATOR"), "{text}");
    if lookahead::Gpu::new(0).is_ok() {
        assert!(out.status.success(), "{text}");
        assert!(text.contains("  GPU: "), "{text}");
    } else {
        assert!(!out.status.success(), "no GPU, yet --gpu passed:\n{text}");
        assert!(
            text.contains("error: --gpu asks for a CUDA GPU, and there is none here"),
            "{text}"
        );
    }
}

/// A size whose vectors cannot fit in host memory is refused with the flag named and exit
/// status 2, before anything is allocated (not "memory allocation failed" or "capacity
/// overflow").
#[test]
fn a_size_too_large_is_refused_before_allocating() {
    for n in ["100000000000", "18446744073709551615"] {
        let out = Command::new(env!("CARGO_BIN_EXE_demo"))
            .args(["--emulator", "--n", n])
            .output()
            .expect("starting demo");
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(
            text.contains(&format!("--n {n}: needs")) && text.contains("use a smaller --n"),
            "{text}"
        );
    }
}
