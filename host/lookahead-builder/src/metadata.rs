//! What cargo says about the kernel crate: its library name, its root, the path
//! dependencies whose sources a kernel build depends on.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tool;
use crate::BuildError;

/// The kernel crate's library name, after checking (with `require_no_std`) that its root is
/// `#![no_std]`.
pub(crate) fn lib_name(crate_dir: &Path, require_no_std: bool) -> Result<String, BuildError> {
    let pkg = package(crate_dir)?;
    if require_no_std {
        check_no_std(&pkg.lib_root)?;
    }
    Ok(pkg.lib_name)
}

/// The kernel crate's library root (`src/lib.rs`, or what `[lib] path` says).
pub(crate) fn lib_root(crate_dir: &Path) -> Result<PathBuf, BuildError> {
    Ok(package(crate_dir)?.lib_root)
}

fn package(crate_dir: &Path) -> Result<LocalPackage, BuildError> {
    let crate_dir = fs::canonicalize(crate_dir)
        .map_err(|e| BuildError::io("opening kernel crate", crate_dir, e))?;
    let meta = package_metadata(&crate_dir)?;
    (meta.into_iter())
        .find(|p| p.manifest_dir == crate_dir)
        .ok_or_else(|| BuildError::ToolFailed {
            command: "cargo metadata".into(),
            status: "no package".into(),
            stderr: format!("no package with its manifest in {}", crate_dir.display()),
        })
}

/// A kernel crate is `#![no_std]` on every target, not only on the GPU: then its host build
/// (the type check of every kernel, and the emulator) refuses what the GPU build refuses
/// (`println!`, `Vec`, `String`, `format!`), instead of running code the GPU cannot.
fn check_no_std(root: &Path) -> Result<(), BuildError> {
    let text = fs::read_to_string(root).map_err(|e| BuildError::io("reading", root, e))?;
    let no_std = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or("").replace(' ', ""))
        .any(|l| l.starts_with("#![no_std]"));
    if no_std {
        Ok(())
    } else {
        Err(BuildError::NotNoStd {
            root: root.to_path_buf(),
        })
    }
}

#[derive(Debug)]
struct LocalPackage {
    manifest_dir: PathBuf,
    lib_name: String,
    lib_root: PathBuf,
    path_deps: Vec<PathBuf>,
}

/// Workspace packages seen from `crate_dir` (`cargo metadata --no-deps`).
fn package_metadata(crate_dir: &Path) -> Result<Vec<LocalPackage>, BuildError> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = tool::run(
        Command::new(cargo)
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--offline",
            ])
            .arg("--manifest-path")
            .arg(crate_dir.join("Cargo.toml")),
    )?;
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| BuildError::ToolFailed {
            command: "cargo metadata".into(),
            status: "unreadable output".into(),
            stderr: e.to_string(),
        })?;
    let mut packages = Vec::new();
    for pkg in json["packages"].as_array().into_iter().flatten() {
        let manifest = PathBuf::from(pkg["manifest_path"].as_str().unwrap_or_default());
        let manifest_dir = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
        let lib = pkg["targets"].as_array().into_iter().flatten().find(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "lib" || k == "cdylib" || k == "rlib"))
        });
        let lib_name = lib
            .and_then(|t| t["name"].as_str())
            .unwrap_or_else(|| pkg["name"].as_str().unwrap_or_default())
            .replace('-', "_");
        let lib_root = lib
            .and_then(|t| t["src_path"].as_str())
            .map(PathBuf::from)
            .unwrap_or_else(|| manifest_dir.join("src").join("lib.rs"));
        let path_deps = pkg["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["path"].as_str().map(PathBuf::from))
            .collect();
        packages.push(LocalPackage {
            manifest_dir,
            lib_name,
            lib_root,
            path_deps,
        });
    }
    Ok(packages)
}

/// The sources a kernel build depends on: the crate and its path dependencies
/// (device runtime, proc-macros), so editing any of them rebuilds the PTX.
pub(crate) fn source_paths(crate_dir: &Path) -> Vec<PathBuf> {
    let packages = package_metadata(crate_dir).unwrap_or_default();
    let mut todo = vec![crate_dir.to_path_buf()];
    let mut seen: Vec<PathBuf> = Vec::new();
    while let Some(dir) = todo.pop() {
        if seen.contains(&dir) {
            continue;
        }
        if let Some(pkg) = packages.iter().find(|p| p.manifest_dir == dir) {
            todo.extend(pkg.path_deps.iter().cloned());
        }
        seen.push(dir);
    }
    seen.iter()
        .flat_map(|d| [d.join("Cargo.toml"), d.join("src"), d.join("build.rs")])
        .filter(|p| p.exists())
        .collect()
}

#[cfg(test)]
mod no_std_tests {
    use super::*;

    fn root_with(text: &str) -> PathBuf {
        let dir = env::temp_dir().join(format!("lookahead-no-std-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("lib{}.rs", text.len()));
        fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_crate_root_must_be_no_std_on_every_target() {
        assert!(check_no_std(&root_with("//! k\n#![no_std]\n")).is_ok());
        assert!(check_no_std(&root_with(
            "#![cfg(target_arch = \"nvptx64\")]\n#![no_std]\n"
        ))
        .is_ok());
        let gpu_only = root_with("#![cfg_attr(target_arch = \"nvptx64\", no_std)]\n");
        let err = check_no_std(&gpu_only).unwrap_err().to_string();
        assert!(
            err.contains("is not `#![no_std]`") && err.contains("extern crate std"),
            "{err}"
        );
        assert!(check_no_std(&root_with("// #![no_std]\nfn f() {}\n")).is_err());
    }
}
