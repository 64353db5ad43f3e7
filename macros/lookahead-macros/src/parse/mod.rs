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

/// `t` as a message shows it: its tokens without spaces (`x.part(a..b)`).
pub fn shown(t: &impl quote::ToTokens) -> String {
    t.to_token_stream().to_string().replace(' ', "")
}
