//! The input of `#[prefetch_levels]`: the empty enum the levels fill in.

use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::{Attribute, Ident, ItemEnum, Visibility};

pub struct LevelEnum {
    /// Its attributes (documentation, derives).
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub ident: Ident,
}

impl LevelEnum {
    pub fn parse(attr: TokenStream, item: TokenStream) -> syn::Result<Self> {
        if !attr.is_empty() {
            return Err(syn::Error::new(
                attr.span(),
                "#[prefetch_levels] takes no options",
            ));
        }
        let e: ItemEnum = syn::parse2(item)?;
        if !e.variants.is_empty() || !e.generics.params.is_empty() {
            return Err(syn::Error::new(
                e.ident.span(),
                "#[prefetch_levels] goes on an empty enum without generics: it adds one variant \
                 per prefetch level",
            ));
        }
        Ok(LevelEnum {
            attrs: e.attrs,
            vis: e.vis,
            ident: e.ident,
        })
    }
}
