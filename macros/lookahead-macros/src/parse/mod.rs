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
