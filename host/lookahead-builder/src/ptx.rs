//! Reading facts out of PTX text: entry points, unresolved functions, the ISA version.
//! Used by the link step and by tests that check the emitted code.

use std::path::Path;
use std::process::Command;

use crate::tool::describe;
use crate::BuildError;

/// Names of the `.entry` points (kernels) in a PTX module.
///
/// ```
/// let ptx = ".visible .entry saxpy(\n.param .f32 a\n)\n{\nret;\n}";
/// assert_eq!(lookahead_builder::ptx::entries(ptx), ["saxpy"]);
/// ```
pub fn entries(ptx: &str) -> Vec<String> {
    declared_after(ptx, ".entry ")
}

/// Functions the module declares `.extern .func` (needed from elsewhere): a self-contained
/// module has none.
pub fn unresolved_functions(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter(|l| l.trim_start().starts_with(".extern .func"))
        .filter_map(|l| {
            let after = l.split(".func").nth(1)?;
            // `.extern .func (.param .b32 r) name(...)`: the name follows the return list.
            let after = match after.find(')') {
                Some(close) if after.trim_start().starts_with('(') => &after[close + 1..],
                _ => after,
            };
            Some(name_prefix(after.trim_start()))
        })
        .collect()
}

/// Variables the module declares `.extern .global` or `.extern .const` (to be provided by
/// someone else, as OptiX provides its launch parameters): a module the driver loads has
/// none. `.extern .shared` arrays (dynamic shared memory) are not counted.
pub fn unresolved_variables(ptx: &str) -> Vec<String> {
    ptx.lines()
        .map(str::trim_start)
        .filter_map(|l| {
            l.strip_prefix(".extern .global")
                .or_else(|| l.strip_prefix(".extern .const"))
        })
        .filter_map(|rest| {
            // `.align 8 .b8 PARAMS[64];`: the name is the last word, before `[` or `;`.
            let decl = rest.split(['[', ';']).next()?;
            decl.split_whitespace().last().map(name_prefix)
        })
        .collect()
}

/// The `.version` directive, for example `"8.0"`.
pub fn isa_version(ptx: &str) -> Option<&str> {
    ptx.lines()
        .find_map(|l| l.trim().strip_prefix(".version "))
        .map(str::trim)
}

/// The `.target` directive, for example `"sm_90"`.
pub fn target(ptx: &str) -> Option<&str> {
    ptx.lines()
        .find_map(|l| l.trim().strip_prefix(".target "))
        .map(|t| t.split(',').next().unwrap_or(t).trim())
}

/// The body of one `.entry` (from its line to the matching closing brace), for checking
/// which instructions a given kernel contains.
pub fn entry_body<'a>(ptx: &'a str, name: &str) -> Option<&'a str> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let open = start + ptx[start..].find('{')?;
    let mut depth = 0usize;
    for (i, c) in ptx[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&ptx[start..open + i + 1]);
                }
            }
            _ => {}
        }
    }
    None
}

/// The prefix of the static `#[kernel(launch_bounds(..))]` exports beside an entry: `[u32;
/// 2]`, the most threads per block and the blocks per multiprocessor (0: none asked).
pub const LAUNCH_BOUNDS_PREFIX: &str = "__lookahead_launch_bounds__";

/// Turns the launch-bounds statics `#[kernel]` exports into the directives of their entries
/// (`.maxntid N, 1, 1`, and `.minnctapersm M` when asked), and removes the statics: `ptxas`
/// then fits the kernel's registers to the bounds, as CUDA's `__launch_bounds__` does.
///
/// ```
/// let ptx = "// .globl\tk\n.visible .entry k(\n.param .u32 k_param_0\n)\n{\nret;\n}\n\
///            // .globl\t__lookahead_launch_bounds__k\n\
///            .visible .global .align 4 .b8 __lookahead_launch_bounds__k[8] = {0, 1, 0, 0, 2, 0, 0, 0};\n";
/// let out = lookahead_builder::ptx::apply_launch_bounds(ptx).unwrap();
/// assert!(out.contains(")\n\t.maxntid 256, 1, 1\n\t.minnctapersm 2\n{"));
/// assert!(!out.contains("__lookahead_launch_bounds__"));
/// ```
pub fn apply_launch_bounds(ptx: &str) -> Result<String, String> {
    let mut bounds = Vec::new();
    let mut kept = Vec::new();
    for line in ptx.lines() {
        if !line.contains(LAUNCH_BOUNDS_PREFIX) {
            kept.push(line);
            continue;
        }
        if line.trim_start().starts_with("//") {
            continue; // the `.globl` comment before the static
        }
        bounds.push(parse_bounds_line(line)?);
    }
    let mut out = kept.join("\n");
    if ptx.ends_with('\n') {
        out.push('\n');
    }
    for (entry, threads, blocks) in bounds {
        let start = out
            .find(&format!(".entry {entry}("))
            .ok_or_else(|| format!("launch bounds for `{entry}`, which is not an entry"))?;
        let close = start
            + out[start..]
                .find(')')
                .ok_or_else(|| format!("the entry `{entry}` has no parameter list"))?;
        let mut directives = format!("\n\t.maxntid {threads}, 1, 1");
        if blocks > 0 {
            directives.push_str(&format!("\n\t.minnctapersm {blocks}"));
        }
        out.insert_str(close + 1, &directives);
    }
    Ok(out)
}

/// `(entry, threads, blocks_per_sm)` from the PTX line of one launch-bounds static, whose
/// initialiser LLVM writes as bytes (`.b8 name[8]`) or words (`.u32 name[2]`), leaving out
/// trailing zeros.
fn parse_bounds_line(line: &str) -> Result<(String, u32, u32), String> {
    let bad = || format!("cannot read the launch bounds in `{}`", line.trim());
    let after = line.split(LAUNCH_BOUNDS_PREFIX).nth(1).ok_or_else(bad)?;
    let entry = name_prefix(after);
    let init = line.split_once('{').ok_or_else(bad)?.1;
    let init = init.split_once('}').ok_or_else(bad)?.0;
    let mut values = (init.split(','))
        .map(|v| v.trim().parse::<u32>().map_err(|_| bad()))
        .collect::<Result<Vec<u32>, String>>()?;
    let bytes = line.contains(".b8 ");
    let count = if bytes { 8 } else { 2 };
    if values.len() > count || values.iter().any(|&v| bytes && v > 255) {
        return Err(bad());
    }
    values.resize(count, 0);
    if bytes {
        let word = |i: usize| -> u32 { (0..4).map(|b| values[4 * i + b] << (8 * b)).sum() };
        Ok((entry, word(0), word(1)))
    } else {
        Ok((entry, values[0], values[1]))
    }
}

fn declared_after(ptx: &str, keyword: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| l.split_once(keyword).map(|(_, rest)| name_prefix(rest)))
        .collect()
}

fn name_prefix(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
        .collect()
}

/// Assembles `ptx_file` with `ptxas -arch=<arch>` and returns an error with its
/// diagnostics if it is rejected.
pub fn validate_with_ptxas(ptxas: &Path, ptx_file: &Path, arch: &str) -> Result<(), BuildError> {
    let mut cmd = Command::new(ptxas);
    cmd.arg(format!("-arch={arch}"))
        .arg(ptx_file)
        .arg("-o")
        .arg("/dev/null");
    let out = cmd.output().map_err(|e| BuildError::ToolFailed {
        command: describe(&cmd),
        status: "an error starting it".into(),
        stderr: e.to_string(),
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(BuildError::PtxasRejected {
            ptx: ptx_file.to_path_buf(),
            arch: arch.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "//\n.version 8.0\n.target sm_90\n.address_size 64\n\
        .extern .func (.param .b32 func_retval0) __nv_expf(.param .b32 x);\n\
        .extern .func abort();\n\
        .extern .global .align 8 .b8 PARAMS[64];\n.extern .const .align 4 .u32 table;\n\
        .extern .shared .align 16 .b8 dynamic[];\n\
        .visible .entry saxpy(\n.param .f32 a\n)\n{\n{\nret;\n}\n}\n\
        .visible .entry reduce(\n.param .u64 p\n)\n{\nprefetch.global.L2 [%rd1];\nret;\n}\n";

    #[test]
    fn reads_directives_and_entries() {
        assert_eq!(isa_version(SAMPLE), Some("8.0"));
        assert_eq!(target(SAMPLE), Some("sm_90"));
        assert_eq!(entries(SAMPLE), ["saxpy", "reduce"]);
        assert_eq!(unresolved_functions(SAMPLE), ["__nv_expf", "abort"]);
        assert_eq!(unresolved_variables(SAMPLE), ["PARAMS", "table"]);
    }

    #[test]
    fn isolates_one_entry_body() {
        let body = entry_body(SAMPLE, "reduce").unwrap();
        assert!(body.contains("prefetch.global.L2"));
        assert!(!entry_body(SAMPLE, "saxpy").unwrap().contains("prefetch"));
        assert!(entry_body(SAMPLE, "missing").is_none());
    }
}

#[cfg(test)]
mod launch_bounds_tests {
    use super::*;

    const ENTRY: &str = ".visible .entry k(\n\t.param .u32 k_param_0\n)\n{\n\tret;\n}\n";

    #[test]
    fn bytes_with_trailing_zeros_left_out_and_words_both_read() {
        for (init, want) in [
            (
                ".b8 __lookahead_launch_bounds__k[8] = {0, 1, 0, 0, 2};",
                (256, 2),
            ),
            (".b8 __lookahead_launch_bounds__k[8] = {128};", (128, 0)),
            (".u32 __lookahead_launch_bounds__k[2] = {512, 1};", (512, 1)),
        ] {
            let line = format!(".visible .global .align 4 {init}");
            let (entry, t, b) = parse_bounds_line(&line).unwrap();
            assert_eq!((entry.as_str(), t, b), ("k", want.0, want.1), "{init}");
        }
    }

    #[test]
    fn directives_go_after_the_parameters_and_the_static_goes() {
        let ptx = format!(
            "{ENTRY}\t// .globl\t__lookahead_launch_bounds__k\n.visible .global .align 4 .b8 __lookahead_launch_bounds__k[8] = {{128}};\n"
        );
        let out = apply_launch_bounds(&ptx).unwrap();
        assert!(out.contains(")\n\t.maxntid 128, 1, 1\n{"), "{out}");
        assert!(
            !out.contains("minnctapersm") && !out.contains(LAUNCH_BOUNDS_PREFIX),
            "{out}"
        );
        assert_eq!(
            apply_launch_bounds(ENTRY).unwrap(),
            ENTRY,
            "nothing asked, nothing changed"
        );
    }

    #[test]
    fn bounds_for_a_missing_entry_or_unreadable_values_are_errors() {
        let stray = ".visible .global .align 4 .b8 __lookahead_launch_bounds__gone[8] = {1};\n";
        assert!(apply_launch_bounds(stray).unwrap_err().contains("`gone`"));
        let garbled = format!("{ENTRY}.global .b8 __lookahead_launch_bounds__k[8] = {{x}};\n");
        assert!(apply_launch_bounds(&garbled).is_err());
    }
}
