//! The link step: rustc hands the nvptx "linker" LLVM bitcode; this turns it into one
//! self-contained PTX file the way upstream's `llvm-bitcode-linker` does
//! (`llvm-link` -> `opt` internalize + O3 -> `llc`), plus libdevice when kernels need it.
//!
//! The builder makes rustc call the build-script binary itself as the linker (through a
//! small shim at a stable path, so rustc's flags and cargo's fingerprints never change);
//! [`crate::KernelBuilder::build_for_cargo`] notices the environment below and runs
//! [`link_from_args`] instead of building.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tool::run;
use crate::BuildError;

/// Set (to `1`) in the environment of the nested cargo: rustc's linker calls then link.
pub(crate) const LINK_MODE_VAR: &str = "LOOKAHEAD_PTX_LINK";
/// The build-script executable the shim forwards to.
pub(crate) const LINK_EXE_VAR: &str = "LOOKAHEAD_PTX_LINK_EXE";
/// Directory of the LLVM tools to link with.
pub(crate) const LLVM_BIN_VAR: &str = "LOOKAHEAD_PTX_LINK_LLVM_BIN";
/// libdevice to link when the kernels reference `__nv_*` functions (may be unset).
pub(crate) const LIBDEVICE_VAR: &str = "LOOKAHEAD_PTX_LINK_LIBDEVICE";
/// Comma-separated functions the PTX may leave to the driver (`vprintf`, `malloc`, ...).
pub(crate) const ALLOWED_EXTERNS_VAR: &str = "LOOKAHEAD_PTX_LINK_ALLOWED_EXTERNS";

/// True when this process was started by rustc as the nvptx linker: the nested build
/// sets `LINK_MODE_VAR`, and rustc passes arguments, which cargo never gives a build
/// script (the nested build runs build scripts too, with the same environment).
pub fn in_link_mode() -> bool {
    env::var_os(LINK_MODE_VAR).is_some_and(|v| v == "1") && env::args_os().len() > 1
}

/// What rustc asked the linker to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LinkRequest {
    pub objects: Vec<PathBuf>,
    pub archives: Vec<PathBuf>,
    pub exports: Vec<String>,
    pub target_cpu: Option<String>,
    pub target_features: Vec<String>,
    pub output: Option<PathBuf>,
}

impl LinkRequest {
    /// Parses the llbc-flavour command line rustc passes, for example
    /// `--export-symbol saxpy k.rcgu.o libcompiler_builtins.rlib --target-cpu sm_90
    /// --target-feature=+ptx80 -o k.ptx -O3`.
    pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, String> {
        let mut req = LinkRequest::default();
        let mut args = args.into_iter().map(|a| a.to_string_lossy().into_owned());
        while let Some(arg) = args.next() {
            let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
            match arg.as_str() {
                "-o" => req.output = Some(PathBuf::from(value("-o")?)),
                "--export-symbol" => req.exports.push(value("--export-symbol")?),
                "--target-cpu" => req.target_cpu = Some(value("--target-cpu")?),
                "--target-feature" => req.target_features.push(value("--target-feature")?),
                "-L" | "--target" | "--linker-plugin" => {
                    value(&arg)?;
                }
                _ if arg.starts_with("--target-feature=") => req
                    .target_features
                    .push(arg["--target-feature=".len()..].to_string()),
                _ if arg.starts_with("--export-symbol=") => req
                    .exports
                    .push(arg["--export-symbol=".len()..].to_string()),
                _ if arg.starts_with("--target-cpu=") => {
                    req.target_cpu = Some(arg["--target-cpu=".len()..].to_string())
                }
                // Optimisation level and debug flags: the pipeline below is fixed at O3.
                _ if arg.starts_with('-') => {}
                _ if arg.ends_with(".rlib") || arg.ends_with(".a") => {
                    req.archives.push(PathBuf::from(arg))
                }
                _ => req.objects.push(PathBuf::from(arg)),
            }
        }
        if req.output.is_none() {
            return Err("rustc passed no `-o` output".into());
        }
        if req.target_cpu.is_none() {
            return Err("rustc passed no `--target-cpu`; set -C target-cpu=sm_XX".into());
        }
        Ok(req)
    }
}

/// Entry point of link mode: parses `std::env::args`, links, and returns the exit code.
pub fn link_from_args() -> i32 {
    let result = LinkRequest::parse(env::args_os().skip(1))
        .map_err(|msg| format!("lookahead PTX linker: {msg}"))
        .and_then(|req| link(&req).map_err(|e| format!("lookahead PTX linker: {e}")));
    match result {
        Ok(()) => 0,
        Err(msg) => {
            eprintln!("{msg}");
            1
        }
    }
}

fn link(req: &LinkRequest) -> Result<(), BuildError> {
    let llvm_bin = PathBuf::from(
        env::var_os(LLVM_BIN_VAR).ok_or(BuildError::NotInBuildScript(
            "LOOKAHEAD_PTX_LINK_LLVM_BIN (set by the kernel builder)",
        ))?,
    );
    let tool = |name: &str| llvm_bin.join(name);
    let output = req.output.clone().expect("checked in parse");
    let stem = output.with_extension("");
    let scratch = |suffix: &str| PathBuf::from(format!("{}.{suffix}", stem.display()));

    let linked = scratch("linked.bc");
    link_bitcode(req, &tool, &linked, &scratch("ar"))?;
    move_address_spaces(&tool, &linked, &scratch("linked.ll"))?;

    // 4. Keep only the kernels' entry points public, optimise, drop the rest.
    let exports = scratch("exports.txt");
    fs::write(&exports, req.exports.join("\n"))
        .map_err(|e| BuildError::io("writing", &exports, e))?;
    let optimized = scratch("opt.bc");
    run(Command::new(tool("opt"))
        .arg(format!(
            "--internalize-public-api-file={}",
            exports.display()
        ))
        .arg("--passes=default<O3>,internalize,globaldce")
        .arg(&linked)
        .arg("-o")
        .arg(&optimized))?;

    // 5. Code generation; the PTX ISA version comes from rustc's target features
    //    (the builder passes -C target-feature=+ptxNN).
    let mut llc = Command::new(tool("llc"));
    llc.arg(format!(
        "--mcpu={}",
        req.target_cpu.as_deref().unwrap_or_default()
    ));
    if !req.target_features.is_empty() {
        llc.arg(format!("--mattr={}", req.target_features.join(",")));
    }
    run(llc.arg(&optimized).arg("-o").arg(&output))?;
    finish_ptx(&output)
}

/// Steps 1-3: the crate's own (fat-LTO'd) bitcode, the archives' bitcode it references
/// (compiler_builtins), and libdevice when the kernels call `__nv_*` math.
fn link_bitcode(
    req: &LinkRequest,
    tool: &dyn Fn(&str) -> PathBuf,
    linked: &Path,
    ar_dir: &Path,
) -> Result<(), BuildError> {
    run(Command::new(tool("llvm-link"))
        .args(&req.objects)
        .arg("-o")
        .arg(linked))?;
    let members = extract_bitcode_members(&tool("llvm-ar"), &req.archives, ar_dir)?;
    if !members.is_empty() {
        link_only_needed(&tool("llvm-link"), linked, &members)?;
    }
    let nm = run(Command::new(tool("llvm-nm"))
        .arg("--undefined-only")
        .arg("--format=just-symbols")
        .arg(linked))?;
    let nv_symbols: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter(|s| s.starts_with("__nv_"))
        .map(str::to_string)
        .collect();
    if nv_symbols.is_empty() {
        return Ok(());
    }
    let libdevice = env::var_os(LIBDEVICE_VAR)
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .ok_or_else(|| BuildError::NoLibdevice {
            symbols: nv_symbols
                .iter()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    link_only_needed(&tool("llvm-link"), linked, &[libdevice])
}

/// Links into `linked` only what it still needs from `inputs` (archive members, libdevice).
fn link_only_needed(llvm_link: &Path, linked: &Path, inputs: &[PathBuf]) -> Result<(), BuildError> {
    run(Command::new(llvm_link)
        .arg("--only-needed")
        .arg(linked)
        .args(inputs)
        .arg("-o")
        .arg(linked))?;
    Ok(())
}

/// Statics marked for shared or constant memory ([`crate::addrspace`]) move there, in the
/// linked module's IR, before the optimiser runs; a module without any is left as it is.
fn move_address_spaces(
    tool: &dyn Fn(&str) -> PathBuf,
    linked: &Path,
    ir_path: &Path,
) -> Result<(), BuildError> {
    let nm = run(Command::new(tool("llvm-nm"))
        .arg("--format=just-symbols")
        .arg(linked))?;
    let names = String::from_utf8_lossy(&nm.stdout);
    let marked = names.lines().any(|n| {
        n.starts_with(crate::addrspace::SHARED_PREFIX)
            || n.starts_with(crate::addrspace::CONSTANT_PREFIX)
    });
    if !marked {
        return Ok(());
    }
    run(Command::new(tool("llvm-dis"))
        .arg(linked)
        .arg("-o")
        .arg(ir_path))?;
    let ir = fs::read_to_string(ir_path).map_err(|e| BuildError::io("reading", ir_path, e))?;
    let moved = crate::addrspace::rewrite(&ir).map_err(BuildError::AddressSpace)?;
    fs::write(ir_path, moved).map_err(|e| BuildError::io("writing", ir_path, e))?;
    run(Command::new(tool("llvm-as"))
        .arg(ir_path)
        .arg("-o")
        .arg(linked))?;
    Ok(())
}

/// The launch bounds into directives, and the check that nothing but the driver's own
/// functions (the allowed externs) is left for someone else to provide.
fn finish_ptx(output: &Path) -> Result<(), BuildError> {
    let ptx = fs::read_to_string(output).map_err(|e| BuildError::io("reading", output, e))?;
    let ptx = crate::ptx::apply_launch_bounds(&ptx).map_err(BuildError::LaunchBounds)?;
    fs::write(output, &ptx).map_err(|e| BuildError::io("writing", output, e))?;
    let allowed = env::var(ALLOWED_EXTERNS_VAR).unwrap_or_default();
    let allowed: Vec<&str> = allowed.split(',').filter(|a| !a.is_empty()).collect();
    let unresolved: Vec<String> = crate::ptx::unresolved_functions(&ptx)
        .into_iter()
        .filter(|f| !allowed.contains(&f.as_str()))
        .collect();
    if !unresolved.is_empty() {
        return Err(BuildError::UnresolvedSymbols {
            ptx: output.to_path_buf(),
            symbols: unresolved.join(", "),
        });
    }
    Ok(())
}

/// Unpacks the bitcode members of `archives` into `dir` (rlibs also hold `lib.rmeta`,
/// which is not bitcode and is skipped).
fn extract_bitcode_members(
    llvm_ar: &Path,
    archives: &[PathBuf],
    dir: &Path,
) -> Result<Vec<PathBuf>, BuildError> {
    let mut members = Vec::new();
    for (i, archive) in archives.iter().enumerate() {
        let into = dir.join(i.to_string());
        let _ = fs::remove_dir_all(&into);
        fs::create_dir_all(&into).map_err(|e| BuildError::io("creating", &into, e))?;
        let archive =
            fs::canonicalize(archive).map_err(|e| BuildError::io("finding", archive, e))?;
        run(Command::new(llvm_ar)
            .arg("x")
            .arg(&archive)
            .current_dir(&into))?;
        let entries = fs::read_dir(&into).map_err(|e| BuildError::io("listing", &into, e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "o") && is_bitcode(&path) {
                members.push(path);
            }
        }
    }
    members.sort();
    Ok(members)
}

fn is_bitcode(path: &Path) -> bool {
    fs::read(path).is_ok_and(|b| b.starts_with(b"BC\xC0\xDE"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn parses_rustc_llbc_command_line() {
        let req = LinkRequest::parse(args(
            "--export-symbol saxpy --export-symbol reduce k.rcgu.o libcompiler_builtins-1.rlib \
             -L /x --target nvptx64-nvidia-cuda --target-cpu sm_90 \
             --target-feature=+ptx78,+ptx80 -L /y -o out/k.ptx -O3 --debug",
        ))
        .unwrap();
        assert_eq!(req.exports, ["saxpy", "reduce"]);
        assert_eq!(req.objects, [PathBuf::from("k.rcgu.o")]);
        assert_eq!(req.archives, [PathBuf::from("libcompiler_builtins-1.rlib")]);
        assert_eq!(req.target_cpu.as_deref(), Some("sm_90"));
        assert_eq!(req.target_features, ["+ptx78,+ptx80"]);
        assert_eq!(req.output, Some(PathBuf::from("out/k.ptx")));
    }

    #[test]
    fn refuses_missing_output_or_cpu() {
        assert!(LinkRequest::parse(args("a.o --target-cpu sm_90")).is_err());
        assert!(LinkRequest::parse(args("a.o -o x.ptx")).is_err());
        assert!(LinkRequest::parse(args("a.o -o")).is_err());
    }
}
