//! The tree's own rules, checked in CI: functions short enough to read at once (at most
//! [`MAX_FN_LINES`] lines outside tests), and comments and docs that speak of the code as it
//! is (no issue numbers, no lent machines, no documents outside the repository).

use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

/// The longest function allowed outside tests, in lines (signature to closing brace).
const MAX_FN_LINES: usize = 120;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// Every file under `dir` (relative to the root) whose name ends with one of `ends`.
/// A folder that is missing fails the test: a rule checked over nothing would pass.
fn files(dir: &str, ends: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let top = root().join(dir);
    assert!(
        top.is_dir(),
        "{} is not a folder of the tree",
        top.display()
    );
    let mut stack = vec![top];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if p.is_dir() {
                if !matches!(name, "target" | ".git" | "ui") {
                    stack.push(p);
                }
            } else if ends.iter().any(|x| name.ends_with(x)) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Functions longer than the limit, skipping tests (`#[test]` functions and `#[cfg(test)]`
/// modules).
struct LongFns<'a> {
    file: &'a Path,
    found: Vec<String>,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test") || (a.path().is_ident("cfg") && quote_free(a).contains("test"))
    })
}

fn quote_free(a: &syn::Attribute) -> String {
    match &a.meta {
        syn::Meta::List(l) => l.tokens.to_string(),
        _ => String::new(),
    }
}

impl LongFns<'_> {
    fn check(&mut self, name: &syn::Ident, span: proc_macro2::Span) {
        let lines = span.end().line - span.start().line + 1;
        if lines > MAX_FN_LINES {
            self.found.push(format!(
                "{}:{}: `{name}` is {lines} lines",
                self.file.display(),
                span.start().line
            ));
        }
    }
}

impl<'ast> Visit<'ast> for LongFns<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test(&f.attrs) {
            self.check(&f.sig.ident, f.span());
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            self.check(&f.sig.ident, f.span());
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

#[test]
fn no_function_outside_tests_is_longer_than_the_limit() {
    let mut long = Vec::new();
    for dir in [
        "gpu-kernels",
        "host",
        "macros",
        "examples",
        "tests/ptx-kernels/src",
        "tests/src",
    ] {
        for file in files(dir, &[".rs"]) {
            // Integration tests (a `tests/` folder) are tests.
            if file.components().any(|c| c.as_os_str() == "tests")
                && !file.starts_with(root().join("tests"))
            {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let mut v = LongFns {
                file: &file,
                found: Vec::new(),
            };
            v.visit_file(&ast);
            long.extend(v.found);
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
}

#[test]
fn comments_and_docs_speak_of_the_code_as_it_is() {
    let patterns = [
        "issue 1",
        "issue 2",
        "issue 3",
        "issue 4",
        "issue 5",
        "issue 6",
        "issue 7",
        "issue 8",
        "issue 9",
        "lent h100",
        "lent h200",
        "lent gpu",
        "the lent",
        "seed document",
        "shared/facts",
        "design 5",
    ];
    let mut found = Vec::new();
    let exts = [".rs", ".md", ".cu", ".cuh", ".sh", ".toml"];
    let dirs = [
        "gpu-kernels",
        "host",
        "macros",
        "examples",
        "tests",
        "docs",
        "experiments",
        "scripts",
    ];
    let mut all: Vec<PathBuf> = dirs.iter().flat_map(|d| files(d, &exts)).collect();
    all.extend(["README.md", "ARCHITECTURE.md"].map(|f| root().join(f)));
    for file in all {
        if file.ends_with("tests/tests/style.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            if let Some(p) = patterns.iter().find(|p| lower.contains(*p)) {
                found.push(format!(
                    "{}:{}: `{p}`: {}",
                    file.display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "say what the code does and measured (device, driver), not its history:\n{}",
        found.join("\n")
    );
}
