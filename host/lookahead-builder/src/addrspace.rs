//! Moves marked statics into the GPU's shared or constant memory at link time.
//!
//! rustc has no way to put a `static` in an address space: every static is an ordinary
//! global. A static exported under a name that starts with [`SHARED_PREFIX`] or
//! [`CONSTANT_PREFIX`] (what `#[address_space(shared)]` and `#[address_space(constant)]` of
//! `lookahead-cuda-std` emit) is moved here, in the linked module's LLVM IR, before the
//! optimiser runs: its definition gets address space 3 (`.shared`, no initial value, since
//! shared memory has none) or 4 (`.const`, keeping its value), and every use becomes an
//! `addrspacecast` of it to a generic pointer, which the backend turns into `cvta.shared` /
//! `cvta.const` or, once the optimiser sees through it, `ld.shared` / `st.shared`. The same
//! pass gives the module 32-bit shared, constant and local pointers ([`rewrite`]'s layout).

/// Exported names of statics that go to shared memory (`.shared`).
pub const SHARED_PREFIX: &str = "__lookahead_addrspace_shared__";
/// Exported names of statics that go to constant memory (`.const`).
pub const CONSTANT_PREFIX: &str = "__lookahead_addrspace_constant__";

/// Whether `ir` (LLVM IR text) defines or declares a marked static.
pub fn has_marked(ir: &str) -> bool {
    ir.lines().any(|l| marked_name(l).is_some())
}

/// The address space a global's name asks for, from its prefix.
fn space_of(name: &str) -> Option<u32> {
    if name.starts_with(SHARED_PREFIX) {
        Some(3)
    } else if name.starts_with(CONSTANT_PREFIX) {
        Some(4)
    } else {
        None
    }
}

/// The name of the marked global a line of IR defines or declares (`@name = ...`).
fn marked_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('@')?;
    let name = rest.split(" = ").next()?;
    space_of(name).map(|_| name)
}

/// Rewrites every marked global of `ir` into its address space and its uses into casts.
pub fn rewrite(ir: &str) -> Result<String, String> {
    let mut moved: Vec<(String, u32)> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    for line in ir.lines() {
        if let Some(layout) = line.strip_prefix("target datalayout = ") {
            lines.push(format!("target datalayout = {}", short_pointers(layout)));
            continue;
        }
        match marked_name(line) {
            Some(name) => {
                let space = space_of(name).expect("marked");
                lines.push(definition(line, name, space)?);
                moved.push((name.to_string(), space));
            }
            None => lines.push(line.to_string()),
        }
    }
    for (name, space) in &moved {
        let cast = format!("addrspacecast (ptr addrspace({space}) @{name} to ptr)");
        for line in lines.iter_mut() {
            if !line.starts_with(&format!("@{name} = ")) {
                *line = replace_uses(line, name, &cast);
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

/// Pointers into shared (3), constant (4) and local (5) memory are 32 bits wide, as NVRTC
/// and `clang -fcuda-short-ptr` make them (the windows are smaller than 4 GiB): a shared
/// address then takes one register, not two, and its arithmetic is 32-bit. The builder's
/// `llc` runs with `--nvptx-short-ptr` to match.
fn short_pointers(layout: &str) -> String {
    let quoted = layout.trim().trim_matches('"');
    let mut specs: Vec<&str> = quoted
        .split('-')
        .filter(|s| !["p3:", "p4:", "p5:"].iter().any(|p| s.starts_with(p)))
        .collect();
    let at = specs
        .iter()
        .position(|s| *s != "e" && *s != "E")
        .unwrap_or(specs.len());
    specs.splice(at..at, ["p3:32:32", "p4:32:32", "p5:32:32"]);
    format!("\"{}\"", specs.join("-"))
}

/// The new definition (or declaration) of global `name` in address space `space`.
fn definition(line: &str, name: &str, space: u32) -> Result<String, String> {
    let bad = || format!("cannot read the definition of `{name}`: {line}");
    let (before, rest) = [" global ", " constant "]
        .iter()
        .find_map(|k| line.split_once(k))
        .ok_or_else(bad)?;
    let (ty, after_ty) = split_type(rest.trim_start()).ok_or_else(bad)?;
    let align = line
        .split(", align ")
        .nth(1)
        .map(|a| a.split(|c: char| !c.is_ascii_digit()).next().unwrap_or("1"))
        .unwrap_or("1");
    if before.contains("external") {
        // A declaration: dynamic shared memory (`.extern .shared`), sized at launch.
        let align = align.parse::<u32>().unwrap_or(1).max(16);
        return Ok(format!(
            "@{name} = external addrspace({space}) global {ty}, align {align}"
        ));
    }
    let init = match space {
        3 => "undef".to_string(),
        _ => after_ty
            .split(", align ")
            .next()
            .unwrap_or("")
            .split(", section ")
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
    };
    let keyword = if space == 4 { "constant" } else { "global" };
    Ok(format!(
        "@{name} = internal addrspace({space}) {keyword} {ty} {init}, align {align}"
    ))
}

/// The first LLVM type of `s` and what follows it: `[256 x float]`, `<{ [8 x i8] }>`,
/// `{ i32, i32 }`, or a plain name (`i32`, `%T`).
fn split_type(s: &str) -> Option<(&str, &str)> {
    let open = s.chars().next()?;
    if !matches!(open, '[' | '{' | '<') {
        let end = s.find(' ').unwrap_or(s.len());
        return Some((&s[..end], &s[end..]));
    }
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '[' | '{' | '<' => depth += 1,
            ']' | '}' | '>' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[..=i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// `line` with each use of `@name` (not of a longer name) replaced by `cast`.
fn replace_uses(line: &str, name: &str, cast: &str) -> String {
    let needle = format!("@{name}");
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(&needle) {
        let after = &rest[at + needle.len()..];
        let whole = !after
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '$');
        out.push_str(&rest[..at]);
        out.push_str(if whole { cast } else { &needle });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const IR: &str = "\
@__lookahead_addrspace_shared__TILE_0 = global [256 x float] zeroinitializer, align 4
@__lookahead_addrspace_constant__K_1 = dso_local constant <{ [8 x i8] }> <{ [8 x i8] c\"\\01\\00\\00\\00\\02\\00\\00\\00\" }>, align 4
@__lookahead_addrspace_shared__dynamic = external global [0 x i8]
@other = global i32 0, align 4
define void @k(i64 %i) {
  %p = getelementptr inbounds [256 x float], ptr @__lookahead_addrspace_shared__TILE_0, i64 0, i64 %i
  store float 1.0, ptr %p, align 4
  %q = load i32, ptr @__lookahead_addrspace_constant__K_1, align 4
  %d = load i8, ptr @__lookahead_addrspace_shared__dynamic, align 1
  ret void
}
";

    #[test]
    fn marked_statics_move_and_their_uses_become_casts() {
        assert!(has_marked(IR));
        let out = rewrite(IR).unwrap();
        assert!(
            out.contains(
                "@__lookahead_addrspace_shared__TILE_0 = internal addrspace(3) \
                              global [256 x float] undef, align 4"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "@__lookahead_addrspace_constant__K_1 = internal addrspace(4) \
                              constant <{ [8 x i8] }> <{ [8 x i8] \
                              c\"\\01\\00\\00\\00\\02\\00\\00\\00\" }>, align 4"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "@__lookahead_addrspace_shared__dynamic = external addrspace(3) \
                              global [0 x i8], align 16"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "ptr addrspacecast (ptr addrspace(3) \
                              @__lookahead_addrspace_shared__TILE_0 to ptr), i64 0"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "load i32, ptr addrspacecast (ptr addrspace(4) \
                              @__lookahead_addrspace_constant__K_1 to ptr)"
            ),
            "{out}"
        );
        assert!(
            out.contains("@other = global i32 0, align 4"),
            "unmarked globals stay: {out}"
        );
    }

    #[test]
    fn shared_constant_and_local_pointers_become_32_bits() {
        let ir = "target datalayout = \"e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64\"\n";
        assert_eq!(
            rewrite(ir).unwrap(),
            "target datalayout = \"e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-i64:64-i128:128-\
             v16:16-v32:32-n16:32:64\"\n"
        );
        // Already short: unchanged.
        let short = rewrite(ir).unwrap();
        assert_eq!(rewrite(&short).unwrap(), short);
    }

    #[test]
    fn a_longer_name_is_not_a_use() {
        let line = "  %x = load i32, ptr @__lookahead_addrspace_shared__A_10, align 4";
        let out = replace_uses(line, "__lookahead_addrspace_shared__A_1", "CAST");
        assert_eq!(out, line);
        assert!(!has_marked("@x = global i32 0"));
    }
}
