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
        .visible .entry saxpy(\n.param .f32 a\n)\n{\n{\nret;\n}\n}\n\
        .visible .entry reduce(\n.param .u64 p\n)\n{\nprefetch.global.L2 [%rd1];\nret;\n}\n";

    #[test]
    fn reads_directives_and_entries() {
        assert_eq!(isa_version(SAMPLE), Some("8.0"));
        assert_eq!(target(SAMPLE), Some("sm_90"));
        assert_eq!(entries(SAMPLE), ["saxpy", "reduce"]);
        assert_eq!(unresolved_functions(SAMPLE), ["__nv_expf", "abort"]);
    }

    #[test]
    fn isolates_one_entry_body() {
        let body = entry_body(SAMPLE, "reduce").unwrap();
        assert!(body.contains("prefetch.global.L2"));
        assert!(!entry_body(SAMPLE, "saxpy").unwrap().contains("prefetch"));
        assert!(entry_body(SAMPLE, "missing").is_none());
    }
}
