//! `#[prefetch_next(into = shared([T; N]), stages = S, copy = K, of(name = target, ..))]`:
//! a loop whose iterations read tiles, rewritten into a pipeline that stages the tiles of
//! the next `S - 1` iterations into shared memory by asynchronous copies while the block
//! works on the current one (`lookahead_device::pipeline`). `parse` reads the options,
//! `generate` writes the prologue and the steady state.

mod generate;
mod parse;

use proc_macro2::Span;
use syn::{Attribute, Expr, ExprForLoop, Meta};

/// Whether a `#[prefetch_next]` attribute asks for a pipeline (it has `into = ..`).
pub fn is_pipeline(attr: &Attribute) -> bool {
    let Meta::List(l) = &attr.meta else {
        return false;
    };
    let mut found = false;
    let _ = l.parse_nested_meta(|m| {
        found |= m.path.is_ident("into");
        // Skip the option's value or list: only the keys matter here.
        if m.input.peek(syn::Token![=]) {
            let _: Expr = m.value()?.parse()?;
        } else if m.input.peek(syn::token::Paren) {
            let _: proc_macro2::Group = m.input.parse()?;
        }
        Ok(())
    });
    found
}

/// Rewrites the pipelined loop `f` annotated with `attr`.
pub fn rewrite(f: &ExprForLoop, attr: &Attribute, attr_span: Span) -> syn::Result<Expr> {
    let o = parse::options(attr)?;
    generate::pipelined_loop(f, &o, attr_span)
}
