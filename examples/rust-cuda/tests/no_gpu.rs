//! Without a CUDA driver the program says so and exits with status 2, as Lookahead's other
//! programs do, instead of panicking inside cudarc. (With a driver it runs on the GPU, which
//! the GPU checks cover.)

use std::process::Command;

#[test]
fn without_a_driver_it_says_so_and_exits_with_2() {
    // SAFETY: only tries to dlopen the library.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_rust-cuda-example"))
        .args(["--seed", "1"])
        .output()
        .expect("starting rust-cuda-example");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("No CUDA GPU here: no CUDA driver found"),
        "{stdout}\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
