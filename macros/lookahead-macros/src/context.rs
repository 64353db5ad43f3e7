//! Where an attribute stands: whether a `#[kernel]` was written inside an `impl` or
//! `trait` block, which an attribute macro is not told (it gets the function's tokens only,
//! the same as for a free function). Read from the source file, for a diagnostic only: where
//! the span has no file or no position (a compiler before 1.88, a kernel a macro writes) the
//! answer is "not known", and the expansion's own errors stand.

use proc_macro2::Span;

/// `Some("impl")` or `Some("trait")` when the attribute at `span` stands directly in such a
/// block; `None` when it does not, or when that cannot be told.
pub fn enclosing_block(span: Span) -> Option<&'static str> {
    let file = span.local_file()?;
    let at = span.start();
    if at.line == 0 {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let line_start: usize = text
        .split_inclusive('\n')
        .take(at.line - 1)
        .map(str::len)
        .sum();
    let line = text[line_start..].lines().next()?;
    let column = line
        .char_indices()
        .nth(at.column)
        .map_or(line.len(), |(i, _)| i);
    innermost_block(&text[..line_start + column])
}

/// The kind of the innermost block still open at the end of `source` (a prefix of a Rust
/// file): `Some("impl")`, `Some("trait")`, or `None` for any other block or none. Comments,
/// strings and character literals are skipped; a block's kind is the first word of the text
/// since the previous `;`, `{` or `}`, past attributes, visibility, `unsafe` and `default`.
fn innermost_block(source: &str) -> Option<&'static str> {
    let s = source.as_bytes();
    let mut open: Vec<Option<&'static str>> = Vec::new();
    let mut header = String::new();
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        let word_before = i > 0 && (s[i - 1].is_ascii_alphanumeric() || s[i - 1] == b'_');
        i += match rest[0] {
            b'/' if rest.get(1) == Some(&b'/') => {
                rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())
            }
            b'/' if rest.get(1) == Some(&b'*') => block_comment(rest),
            b'"' => quoted(rest, b'"'),
            b'r' if !word_before && raw_string(rest).is_some() => raw_string(rest).unwrap_or(1),
            b'\'' => char_literal(rest),
            b'{' => {
                open.push(kind(&header));
                header.clear();
                1
            }
            b'}' => {
                open.pop();
                header.clear();
                1
            }
            b';' => {
                header.clear();
                1
            }
            c => {
                header.push(c as char);
                1
            }
        };
    }
    open.pop().flatten()
}

/// Length of the `/* */` comment (nested) at the start of `s`.
fn block_comment(s: &[u8]) -> usize {
    let (mut depth, mut i) = (0usize, 0);
    while i < s.len() {
        if s[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if s[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    s.len()
}

/// Length of the literal quoted by `q` at the start of `s`, escapes included.
fn quoted(s: &[u8], q: u8) -> usize {
    let mut i = 1;
    while i < s.len() && s[i] != q {
        i += if s[i] == b'\\' { 2 } else { 1 };
    }
    (i + 1).min(s.len())
}

/// Length of the raw string `r#*"..."#*` at the start of `s`, if one starts there.
fn raw_string(s: &[u8]) -> Option<usize> {
    let hashes = s[1..].iter().take_while(|&&c| c == b'#').count();
    if s.get(1 + hashes) != Some(&b'"') {
        return None;
    }
    let close: Vec<u8> = std::iter::once(b'"')
        .chain(std::iter::repeat_n(b'#', hashes))
        .collect();
    let body = 2 + hashes;
    let end = s[body..]
        .windows(close.len())
        .position(|w| w == close.as_slice());
    Some(end.map_or(s.len(), |e| body + e + close.len()))
}

/// Length of the character literal at the start of `s`, or 1 for a lifetime's quote.
fn char_literal(s: &[u8]) -> usize {
    if s.get(1) == Some(&b'\\') {
        return quoted(s, b'\'');
    }
    // One character (up to 4 bytes of UTF-8), then the closing quote.
    let width = s.get(1).map_or(1, |&c| match c {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    });
    if s.get(1 + width) == Some(&b'\'') {
        2 + width
    } else {
        1
    }
}

/// A block's kind from its header: the first word past attributes (`#[..]`), visibility
/// (`pub(..)`), `unsafe`, `default` and `auto`.
fn kind(header: &str) -> Option<&'static str> {
    let mut plain = String::new();
    let mut depth = 0usize;
    for c in header.chars() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let first = plain
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .find(|w| !w.is_empty() && !matches!(*w, "pub" | "unsafe" | "default" | "auto"))?;
    match first {
        "impl" => Some("impl"),
        "trait" => Some("trait"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::innermost_block;

    #[test]
    fn an_impl_or_trait_block_is_found_and_nothing_else() {
        let inside = [
            ("impl", "struct S;\nimpl S {\n    "),
            (
                "impl",
                "#[cfg(x)]\nunsafe impl<T: Copy> Tr for S<T> where T: Sized {\n    fn a() {}\n    ",
            ),
            (
                "trait",
                "pub(crate) trait T {\n    fn a() { let s = \"}\"; }\n    ",
            ),
            (
                "impl",
                "impl S { /* } { */ // }\n const C: char = '}';\n fn f<'a>(x: &'a u8) {}\n ",
            ),
            ("impl", "impl S { const R: &str = r#\"}\"#; "),
        ];
        for (kind, src) in inside {
            assert_eq!(innermost_block(src), Some(kind), "{src:?}");
        }
        let outside = [
            "",
            "mod m {\n    ",
            "impl S {}\n",
            "impl S { fn f() {\n        ",
            "fn f() -> impl Iterator<Item = u8> {\n    ",
            "trait T {}\nmod m { ",
        ];
        for src in outside {
            assert_eq!(innermost_block(src), None, "{src:?}");
        }
    }
}
