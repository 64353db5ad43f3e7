//! The programs' command lines, run as built: whatever can be checked without a GPU is
//! checked before one is looked for, with the flag named (exit status 2), and a failed run
//! leaves no results folder it made behind.

use std::process::{Command, Output};

fn run(bin: &str, args: &[&str]) -> (Output, String) {
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("starting the program");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

#[test]
fn ivf_search_checks_its_arguments_before_the_gpu() {
    let bin = env!("CARGO_BIN_EXE_ivf_search");
    for (args, want) in [
        (
            &["--fvecs", "/nonexistent"][..],
            "--fvecs /nonexistent: cannot be read (",
        ),
        (
            &["--vectors", "10", "--nlist", "1000"],
            "--nlist 1000: expected at most --vectors (10)",
        ),
        (
            &["--queries", "99999999999999999999999"],
            "99999999999999999999999 is too large for this option",
        ),
    ] {
        let (out, text) = run(bin, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(want), "{args:?}: {text}");
        assert!(!text.contains("CUDA"), "{args:?} looked for a GPU: {text}");
    }
}

/// Without a GPU the benchmark fails after opening `--out`: the folders it made for that are
/// removed again. The GPUs are hidden from it (`CUDA_VISIBLE_DEVICES` empty), so it fails
/// the same way on a machine that has one.
#[test]
fn ivf_bench_leaves_no_folder_behind_when_it_fails() {
    let top = std::env::temp_dir().join(format!("ivf_bench_out_{}", std::process::id()));
    let out_dir = top.join("new/dir");
    let out = Command::new(env!("CARGO_BIN_EXE_ivf_bench"))
        .args(["--out", out_dir.to_str().unwrap()])
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .expect("starting the program");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{text}");
    assert!(!top.exists(), "{} was left behind: {text}", top.display());
}
