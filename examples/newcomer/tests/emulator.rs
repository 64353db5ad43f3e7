//! Runs the newcomer program on the CPU emulator (no GPU needed): both kernels, checked
//! against the CPU reference on random inputs, must pass; `--gpu` must not fall back to it.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lookahead-newcomer"))
        .args(args)
        .output()
        .expect("starting lookahead-newcomer");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn passes_on_the_emulator() {
    for seed in ["1", "2"] {
        let (ok, text) = run(&["--emulator", "--n", "30001", "--seed", seed]);
        assert!(ok, "{text}");
        assert!(text.contains("device: CPU emulator"), "{text}");
        assert_eq!(text.matches("PASS").count(), 3, "{text}");
        assert!(text.contains("all checks passed"), "{text}");
    }
}

/// `--gpu` runs on a GPU or fails, never on the emulator: without a GPU (CI) it must fail
/// and say why; with one it must pass there.
#[test]
fn gpu_flag_never_falls_back_to_the_emulator() {
    let (ok, text) = run(&["--gpu", "--n", "30001", "--seed", "1"]);
    assert!(!text.contains("EMULATOR"), "{text}");
    if lookahead::Gpu::new(0).is_ok() {
        assert!(ok && text.contains("device: GPU 0"), "{text}");
    } else {
        assert!(!ok, "no GPU, yet --gpu passed:\n{text}");
        assert!(
            text.contains("error: --gpu asks for a CUDA GPU, and there is none here"),
            "{text}"
        );
    }
}

#[test]
fn rejects_bad_arguments() {
    let (ok, text) = run(&["--n", "many"]);
    assert!(!ok, "{text}");
    assert!(text.contains("error:"), "{text}");
}

/// A size whose vectors cannot fit in host memory is refused with the flag named, before
/// anything is allocated (not "memory allocation failed" or "capacity overflow").
#[test]
fn a_size_too_large_is_refused_before_allocating() {
    for n in ["100000000000", "18446744073709551615"] {
        let (ok, text) = run(&["--emulator", "--n", n]);
        assert!(!ok, "{text}");
        assert!(
            text.contains(&format!("error: --n {n}: needs")) && text.contains("use a smaller --n"),
            "{text}"
        );
        assert!(
            !text.contains("allocation") && !text.contains("overflow"),
            "{text}"
        );
    }
}
