//! The link step: rustc hands the nvptx "linker" LLVM bitcode; this turns it into one
//! self-contained PTX file the way upstream's `llvm-bitcode-linker` does
//! (`llvm-link` -> `opt` internalize + O3 -> `llc`), plus libdevice when kernels need it.
//!
//! rustc's linker is [`LINKER_SCRIPT`], a shell script at a stable path (so rustc's flags and
//! cargo's fingerprints never change): it only keeps what rustc hands it, since rustc deletes
//! the bitcode objects afterwards, and writes a placeholder naming them where rustc expects
//! the PTX. Once the nested cargo has finished, the builder reads the placeholder cargo
//! reports as the crate's artifact and links, in its own process: no
//! build script runs a second time, and the link needs nothing from the environment.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tool::run;
use crate::BuildError;

/// rustc's `-C linker` for the device build. It copies the bitcode objects into
/// `<output>.link/`, writes its arguments there one per line (object paths pointing at the
/// copies, the paths of the other files it was given made absolute), and writes `<output>`
/// as a one-line placeholder that names the folder.
pub const LINKER_SCRIPT: &str = r#"#!/bin/sh
# rustc's nvptx linker in Lookahead's kernel builds: it keeps the bitcode and the arguments
# rustc hands it; the kernel builder links them into PTX once cargo has finished.
set -eu
out=
prev=
for arg in "$@"; do
    if [ "$prev" = "-o" ]; then out=$arg; fi
    prev=$arg
done
if [ -z "$out" ]; then
    echo "lookahead PTX linker: rustc passed no -o" >&2
    exit 1
fi
case $out in /*) ;; *) out=$PWD/$out ;; esac
request=$out.link
rm -rf "$request"
mkdir -p "$request"
n=0
for arg in "$@"; do
    if [ -f "$arg" ]; then
        case $arg in /*) ;; *) arg=$PWD/$arg ;; esac
        case $arg in
            *.o) n=$((n + 1)); cp "$arg" "$request/$n.o"; arg=$request/$n.o ;;
        esac
    fi
    printf '%s\n' "$arg" >>"$request/args"
done
printf 'lookahead-ptx-link-request %s\n' "$request" >"$out"
"#;

/// The first word of the placeholder [`LINKER_SCRIPT`] writes.
const PLACEHOLDER: &str = "lookahead-ptx-link-request";

/// Writes [`LINKER_SCRIPT`] to `<target_root>/lookahead-ptx-link` (when it differs) and
/// returns its path.
pub(crate) fn write_linker_script(target_root: &Path) -> Result<PathBuf, BuildError> {
    let script = target_root.join("lookahead-ptx-link");
    if fs::read_to_string(&script).ok().as_deref() != Some(LINKER_SCRIPT) {
        let tmp = target_root.join(format!("lookahead-ptx-link.{}", std::process::id()));
        fs::write(&tmp, LINKER_SCRIPT).map_err(|e| BuildError::io("writing", &tmp, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))
                .map_err(|e| BuildError::io("making executable", &tmp, e))?;
        }
        fs::rename(&tmp, &script).map_err(|e| BuildError::io("installing", &script, e))?;
    }
    Ok(script)
}

/// What the link needs besides rustc's request.
#[derive(Debug, Clone)]
pub(crate) struct LinkSettings {
    /// Directory of the LLVM tools matching rustc's LLVM.
    pub llvm_bin: PathBuf,
    /// libdevice, linked when the kernels reference `__nv_*` functions.
    pub libdevice: Option<PathBuf>,
    /// Functions the PTX may leave to the driver (`vprintf`, `malloc`, ...).
    pub allowed_externs: Vec<String>,
}

/// Links the request that the placeholder `artifact` (the crate's `.ptx` as cargo reports
/// it) names, unless it was linked already, and returns the PTX file.
pub(crate) fn link_artifact(
    artifact: &Path,
    settings: &LinkSettings,
) -> Result<PathBuf, BuildError> {
    let text = fs::read_to_string(artifact).map_err(|e| BuildError::io("reading", artifact, e))?;
    let request = text
        .strip_prefix(PLACEHOLDER)
        .map(|r| PathBuf::from(r.trim()))
        .ok_or_else(|| BuildError::ToolFailed {
            command: "the nested cargo".into(),
            status: "an artifact the builder's linker did not write".into(),
            stderr: format!(
                "{} is not a placeholder of lookahead-ptx-link",
                artifact.display()
            ),
        })?;
    let stem = artifact
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let linked = request.join(format!("{stem}.ptx"));
    if linked.exists() {
        return Ok(linked);
    }
    let args_file = request.join("args");
    let args =
        fs::read_to_string(&args_file).map_err(|e| BuildError::io("reading", &args_file, e))?;
    let req = LinkRequest::parse(args.lines().map(OsString::from)).map_err(|msg| {
        BuildError::ToolFailed {
            command: format!("linking {}", request.display()),
            status: "a request it cannot read".into(),
            stderr: msg,
        }
    })?;
    // Another build script may link the same request at the same time: each works in a
    // folder of its own, and the finished PTX is renamed into place.
    let work = request.join(format!("work-{}", std::process::id()));
    fs::create_dir_all(&work).map_err(|e| BuildError::io("creating", &work, e))?;
    let output = work.join(format!("{stem}.ptx"));
    link(&req, settings, &output)?;
    fs::rename(&output, &linked).map_err(|e| BuildError::io("installing", &linked, e))?;
    let _ = fs::remove_dir_all(&work);
    Ok(linked)
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

/// Links `req` into the PTX file `output`; scratch files go beside it.
fn link(req: &LinkRequest, settings: &LinkSettings, output: &Path) -> Result<(), BuildError> {
    let tool = |name: &str| settings.llvm_bin.join(name);
    let stem = output.with_extension("");
    let scratch = |suffix: &str| PathBuf::from(format!("{}.{suffix}", stem.display()));

    let linked = scratch("linked.bc");
    link_bitcode(req, settings, &tool, &linked, &scratch("ar"))?;
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
    // 32-bit shared, constant and local addresses, as the address-space pass's layout says
    // (a module without marked statics keeps rustc's layout: it has no pointers into those
    // spaces for the width to matter to).
    llc.arg("--nvptx-short-ptr");
    llc.arg(format!(
        "--mcpu={}",
        req.target_cpu.as_deref().unwrap_or_default()
    ));
    if !req.target_features.is_empty() {
        llc.arg(format!("--mattr={}", req.target_features.join(",")));
    }
    run(llc.arg(&optimized).arg("-o").arg(output))?;
    finish_ptx(output, &settings.allowed_externs)
}

/// Steps 1-3: the crate's own (fat-LTO'd) bitcode, the archives' bitcode it references
/// (compiler_builtins), and libdevice when the kernels call `__nv_*` math.
fn link_bitcode(
    req: &LinkRequest,
    settings: &LinkSettings,
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
    let libdevice = (settings.libdevice.clone())
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
/// functions (the allowed externs) is left for someone else to provide: no other function,
/// and no static declared in an `extern` block (OptiX's launch parameters are one).
fn finish_ptx(output: &Path, allowed: &[String]) -> Result<(), BuildError> {
    let ptx = fs::read_to_string(output).map_err(|e| BuildError::io("reading", output, e))?;
    let ptx = crate::ptx::apply_launch_bounds(&ptx).map_err(BuildError::LaunchBounds)?;
    fs::write(output, &ptx).map_err(|e| BuildError::io("writing", output, e))?;
    let statics = crate::ptx::unresolved_variables(&ptx)
        .into_iter()
        .map(|v| format!("{v} (a static)"));
    let unresolved: Vec<String> = crate::ptx::unresolved_functions(&ptx)
        .into_iter()
        .filter(|f| !allowed.contains(f))
        .chain(statics)
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
    fn the_linker_script_keeps_objects_and_arguments_and_writes_a_placeholder() {
        let dir =
            std::env::temp_dir().join(format!("lookahead-link-script-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("deps")).unwrap();
        let script = write_linker_script(&dir).unwrap();
        fs::write(dir.join("deps/k.rcgu.o"), b"BC\xC0\xDEbitcode").unwrap();
        fs::write(dir.join("deps/libcb.rlib"), b"archive").unwrap();
        let status = Command::new(&script)
            .current_dir(&dir)
            .args([
                "--export-symbol",
                "saxpy",
                "deps/k.rcgu.o",
                "deps/libcb.rlib",
            ])
            .args(["--target-cpu", "sm_80", "-o", "deps/k.ptx"])
            .status()
            .unwrap();
        assert!(status.success());
        // rustc deletes its objects after linking: the request keeps a copy.
        fs::remove_file(dir.join("deps/k.rcgu.o")).unwrap();
        let request = dir.join("deps/k.ptx.link");
        let placeholder = fs::read_to_string(dir.join("deps/k.ptx")).unwrap();
        assert_eq!(
            placeholder.trim(),
            format!("{PLACEHOLDER} {}", request.display())
        );
        let args = fs::read_to_string(request.join("args")).unwrap();
        let req = LinkRequest::parse(args.lines().map(OsString::from)).unwrap();
        assert_eq!(req.objects, [request.join("1.o")]);
        assert_eq!(fs::read(request.join("1.o")).unwrap(), b"BC\xC0\xDEbitcode");
        assert_eq!(req.archives, [dir.join("deps/libcb.rlib")]);
        assert_eq!(req.exports, ["saxpy"]);
        // The output is not used: the builder links into the request's folder.
        assert_eq!(req.output, Some(PathBuf::from("deps/k.ptx")));
        // A file the script did not write is refused, not linked.
        let settings = LinkSettings {
            llvm_bin: PathBuf::from("/nonexistent"),
            libdevice: None,
            allowed_externs: Vec::new(),
        };
        fs::write(dir.join("other.ptx"), ".version 8.0\n").unwrap();
        let err = link_artifact(&dir.join("other.ptx"), &settings).unwrap_err();
        assert!(err.to_string().contains("not a placeholder"), "{err}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn refuses_missing_output_or_cpu() {
        assert!(LinkRequest::parse(args("a.o --target-cpu sm_90")).is_err());
        assert!(LinkRequest::parse(args("a.o -o x.ptx")).is_err());
        assert!(LinkRequest::parse(args("a.o -o")).is_err());
    }
}
