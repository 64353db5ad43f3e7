//! The README's "kernel crate of your own": a workspace outside this one, a kernel crate and a
//! host binary, that depends on the crates by version, patched to this checkout in the
//! workspace root's manifest (cargo reads `[patch]` nowhere else); the kernel crate builds its
//! kernels to PTX and the binary runs them on the emulator against the CPU. The template is
//! `tests/outside-crate/`.

use std::path::Path;
use std::process::Command;

#[test]
fn a_kernel_crate_outside_the_repository_builds_and_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap();
    let template = root.join("tests/outside-crate");
    let dir = std::env::temp_dir().join(format!("lookahead-outside-{}", std::process::id()));
    for d in ["my-kernels/src", "my-app/src"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let manifest = std::fs::read_to_string(template.join("Cargo.toml.in"))
        .unwrap()
        .replace("@ROOT@", root.to_str().unwrap());
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    for f in [
        "my-kernels/Cargo.toml",
        "my-kernels/build.rs",
        "my-kernels/src/lib.rs",
        "my-app/Cargo.toml",
        "my-app/src/main.rs",
    ] {
        std::fs::copy(template.join(f), dir.join(f)).unwrap();
    }
    // The workspace's lock file pins the same dependency versions, so nothing new is fetched.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    // Builds share the workspace's target folders: the device `core` is built once.
    let target = root.join("target");
    let out = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--offline", "-p", "my-app"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target.join("outside-crate"))
        .env("LOOKAHEAD_PTX_TARGET_DIR", target.join("lookahead-ptx"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("100 chains match the CPU"), "{stdout}");
}
