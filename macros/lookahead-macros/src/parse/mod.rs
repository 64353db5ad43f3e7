//! From tokens to typed descriptions: each macro's input is parsed and checked here, and
//! every misuse becomes a `syn::Error` with the span of what is wrong. `generate` turns the
//! descriptions into code.

pub mod derive;
pub mod kernel;
pub mod level;
pub mod loops;
pub mod params;
pub mod pipeline;
pub mod prefetch;
pub mod shared;

use syn::{Expr, Lit};

/// Each option of an attribute's list with its name (`""` for a path that is not a single
/// identifier); an option given twice is an error at its second use.
pub fn keyed_options<I>(metas: I) -> syn::Result<Vec<(String, syn::Meta)>>
where
    I: IntoIterator<Item = syn::Meta>,
{
    let mut seen: Vec<(String, syn::Meta)> = Vec::new();
    for meta in metas {
        let key = (meta.path().get_ident())
            .map(|i| i.to_string())
            .unwrap_or_default();
        if seen.iter().any(|(k, _)| *k == key) {
            return Err(syn::Error::new(
                syn::spanned::Spanned::span(&meta),
                format!("`{key}` given twice"),
            ));
        }
        seen.push((key, meta));
    }
    Ok(seen)
}

/// Every error of `errs` as one (`None` when there is none), so that all are reported.
pub fn combine(errs: Vec<syn::Error>) -> Option<syn::Error> {
    let mut it = errs.into_iter();
    let mut first = it.next()?;
    for e in it {
        first.combine(e);
    }
    Some(first)
}

/// Whether `value` is a negative number: `-1` (a negation, or a literal syn read with its
/// sign).
pub fn is_negative(value: &Expr) -> bool {
    match value {
        Expr::Unary(u) => matches!(u.op, syn::UnOp::Neg(_)),
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_digits().starts_with('-'),
        Expr::Paren(p) => is_negative(&p.expr),
        Expr::Group(g) => is_negative(&g.expr),
        _ => false,
    }
}

/// `t` as a message shows it: its tokens without spaces (`x.part(a..b)`), except between
/// two words, which would otherwise run together (`x[i] as usize`, not `x[i]asusize`).
pub fn shown(t: &impl quote::ToTokens) -> String {
    let spaced = t.to_token_stream().to_string();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(spaced.len());
    let mut chars = spaced.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ' ' || (word(out.chars().last()) && word(chars.peek().copied())) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn messages_show_code_without_spaces_but_keep_words_apart() {
        let e: syn::Expr = syn::parse_quote!(Node::unpack(nodes[cur]).next as usize);
        assert_eq!(shown(&e), "Node::unpack(nodes[cur]).next as usize");
        let e: syn::Expr = syn::parse_quote!(x.part(a..b));
        assert_eq!(shown(&e), "x.part(a..b)");
        let e: syn::Expr = syn::parse_quote!(&mut y[i + 1]);
        assert_eq!(shown(&e), "&mut y[i+1]");
    }
}
