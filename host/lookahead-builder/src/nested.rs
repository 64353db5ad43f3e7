//! The nested `cargo rustc` that compiles a kernel crate for one architecture, and what it
//! reports back: the crate's artifact (the linker's placeholder), the compiler's warnings
//! (shown to the user, as cargo would show them) and its errors.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tool::describe;
use crate::{BuildError, DeviceOptions, DeviceToolchain, ToolchainSource, TARGET};

/// The nested `cargo rustc` that compiles the crate in `crate_dir` into `dir`, its
/// messages as JSON.
pub(crate) fn command(
    toolchain: &DeviceToolchain,
    device: &DeviceOptions,
    crate_dir: &Path,
    dir: &Path,
) -> Command {
    let build_std = if device.with_alloc {
        "-Zbuild-std=core,alloc"
    } else {
        "-Zbuild-std=core"
    };
    let mut cmd = Command::new(&toolchain.cargo);
    cmd.current_dir(crate_dir)
        .args(["rustc", "--lib", "--crate-type", "cdylib", "--release"])
        .args(["--target", TARGET, build_std, "--message-format=json"])
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(dir)
        // One fat-LTO'd bitcode module, whatever the crate's own release profile says.
        .args(["--config", "profile.release.lto=\"fat\""])
        .args(["--config", "profile.release.codegen-units=1"])
        .args(["--config", "profile.release.panic=\"abort\""])
        .args(["--config", "profile.release.opt-level=3"])
        .args(["--config", "profile.release.debug=false"])
        .args(["--config", "profile.release.incremental=false"])
        .args(["--config", "profile.release.debug-assertions=false"])
        .args(["--config", "profile.release.overflow-checks=false"])
        .args(&device.cargo_args);
    // After `--`, `cargo rustc` gives the flags to the kernel crate alone: a dependency
    // that enables the same feature itself would otherwise fail (E0636).
    cmd.arg("--")
        .args((device.crate_attrs.iter()).map(|a| format!("-Zcrate-attr={a}")));
    clean_env(&mut cmd, toolchain);
    cmd
}

/// What a successful nested build reported.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The crate's `.ptx` as cargo reports it (the linker's placeholder).
    pub artifact: Option<PathBuf>,
    /// The compiler's warnings, rendered.
    pub warnings: Vec<String>,
}

/// Runs the nested cargo; on failure the error holds the compiler's rendered errors.
pub(crate) fn run(cmd: &mut Command) -> Result<Outcome, BuildError> {
    let out = cmd.output().map_err(|e| BuildError::ToolFailed {
        command: describe(cmd),
        status: "an error starting it".into(),
        stderr: e.to_string(),
    })?;
    let mut outcome = Outcome::default();
    let mut errors = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        match msg["reason"].as_str() {
            Some("compiler-message") => {
                let diagnostic = &msg["message"];
                let rendered = diagnostic["rendered"].as_str().unwrap_or_default();
                match diagnostic["level"].as_str() {
                    Some("error") => errors.push(rendered.to_string()),
                    Some("warning") if !about_the_builders_flags(diagnostic) => {
                        outcome.warnings.push(rendered.to_string())
                    }
                    _ => {}
                }
            }
            Some("compiler-artifact") => {
                let files = msg["filenames"].as_array().into_iter().flatten();
                if let Some(ptx) = files
                    .filter_map(|f| f.as_str())
                    .find(|f| f.ends_with(".ptx"))
                {
                    outcome.artifact = Some(PathBuf::from(ptx));
                }
            }
            _ => {}
        }
    }
    if out.status.success() {
        return Ok(outcome);
    }
    errors.push(String::from_utf8_lossy(&out.stderr).into_owned());
    if errors.iter().any(|e| names_std_only_item(e)) {
        errors.push(NO_STD_HINT.to_string());
    }
    Err(BuildError::ToolFailed {
        command: describe(cmd),
        status: out.status.to_string(),
        stderr: errors.join("\n"),
    })
}

/// What the GPU build of a plain helper that uses the standard library fails with: the host
/// build (and so the emulator) has `std`, the GPU build does not.
const NO_STD_HINT: &str = "lookahead: kernel code is `no_std` on the GPU: `format!`, \
    `println!`, `vec!`, `Vec`, `String` and `Box` do not exist there. A plain function a kernel \
    calls is compiled for the GPU too, while the host build and the emulator, which have `std`, \
    accept it. Write values to an output slice and use arrays or slices the host passes in; \
    mark such helpers #[device_fn], and the host build refuses these items too, with the reason.";

/// Whether a rendered error is about an item that only the standard library has.
fn names_std_only_item(rendered: &str) -> bool {
    const MACROS: [&str; 6] = ["format", "println", "print", "eprintln", "vec", "dbg"];
    const TYPES: [&str; 3] = ["Vec", "String", "Box"];
    let first_line = rendered.lines().next().unwrap_or_default();
    MACROS
        .iter()
        .any(|m| first_line.contains(&format!("cannot find macro `{m}`")))
        || TYPES.iter().any(|t| {
            first_line.contains(&format!("cannot find type `{t}`"))
                || first_line.contains(&format!("undeclared type `{t}`"))
        })
}

/// A warning about what the builder itself asked for, not about the user's code: an
/// attribute it gave every crate (`-Zcrate-attr=no_std` is "unused" in a crate that says
/// `#![no_std]` itself), or the PTX ISA feature (`-Ctarget-feature=+ptx80`), which rustc
/// calls unstable in every crate.
fn about_the_builders_flags(diagnostic: &serde_json::Value) -> bool {
    let mut spans = diagnostic["spans"].as_array().into_iter().flatten();
    let message = diagnostic["message"].as_str().unwrap_or_default();
    spans.any(|s| {
        s["is_primary"].as_bool() == Some(true)
            && s["file_name"].as_str() == Some("<crate attribute>")
    }) || message.starts_with("unstable feature specified for `-Ctarget-feature`")
}

/// Shows the compiler's warnings as cargo shows a build's own: in a build script as
/// `cargo:warning=` lines (cargo prints those even when the build succeeds), elsewhere on
/// standard error. Each distinct warning once, though several architectures report it.
pub(crate) fn show_warnings<'a>(warnings: impl IntoIterator<Item = &'a String>) {
    let mut shown: Vec<&String> = Vec::new();
    for warning in warnings {
        if shown.contains(&warning) {
            continue;
        }
        shown.push(warning);
        for line in warning.trim_end().lines() {
            if crate::in_build_script() {
                println!("cargo:warning={line}");
            } else {
                eprintln!("{line}");
            }
        }
    }
}

/// The environment of a build script carries the outer build's settings; keep the ones
/// that are not about this build (jobserver, CARGO_HOME, PATH) and drop the rest.
fn clean_env(cmd: &mut Command, toolchain: &DeviceToolchain) {
    for var in [
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTDOC",
        "RUSTDOCFLAGS",
        "CARGO_ENCODED_RUSTDOCFLAGS",
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "CARGO_MANIFEST_DIR",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_INCREMENTAL",
        "OUT_DIR",
        "TARGET",
        "HOST",
        "NUM_JOBS",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "RUSTC_LINKER",
    ] {
        cmd.env_remove(var);
    }
    // Build-script variables describing the outer (host) build.
    for (var, _) in env::vars_os() {
        let name = var.to_string_lossy();
        if ["CARGO_CFG_", "CARGO_FEATURE_", "CARGO_PKG_", "DEP_"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            cmd.env_remove(&var);
        }
    }
    cmd.env("RUSTC", &toolchain.rustc)
        // Debian's stable rustc needs this for -Zbuild-std and the nightly-only kernel
        // features (abi_gpu_kernel, asm_experimental_arch); a nightly ignores it.
        .env("RUSTC_BOOTSTRAP", "1");
    if toolchain.source == ToolchainSource::RustupNightly {
        cmd.env("RUSTUP_TOOLCHAIN", "nightly");
    }
}

#[cfg(test)]
mod tests {
    use super::names_std_only_item;

    #[test]
    fn std_only_items_in_gpu_build_errors_are_recognised() {
        for e in [
            "error: cannot find macro `format` in this scope\n --> src/lib.rs:4:5",
            "error[E0412]: cannot find type `String` in this scope",
            "error[E0433]: failed to resolve: use of undeclared type `Vec`",
        ] {
            assert!(names_std_only_item(e), "{e}");
        }
        for e in [
            "error: cannot find macro `formatx` in this scope",
            "error[E0412]: cannot find type `Vector` in this scope",
            "error[E0308]: mismatched types\n note: expected `Vec<f32>`",
        ] {
            assert!(!names_std_only_item(e), "{e}");
        }
    }
}
