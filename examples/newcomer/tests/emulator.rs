//! Runs the newcomer program on the CPU emulator (no GPU needed): both kernels, checked
//! against the CPU reference on random inputs, must pass.

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

#[test]
fn rejects_bad_arguments() {
    let (ok, text) = run(&["--n", "many"]);
    assert!(!ok, "{text}");
    assert!(text.contains("error:"), "{text}");
}
