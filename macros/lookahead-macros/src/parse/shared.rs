//! The input of `shared_array!(T; N)`.

use syn::parse::{Parse, ParseStream};
use syn::{Expr, Token, Type};

pub struct SharedArray {
    pub ty: Type,
    pub len: Expr,
}

impl Parse for SharedArray {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let ty: Type = input.parse()?;
        input.parse::<Token![;]>().map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected `shared_array!(T; N)`, for example `shared_array!(f32; 256)`",
            )
        })?;
        let len: Expr = input.parse()?;
        if !input.is_empty() {
            return Err(
                input.error("unexpected tokens after the length; write `shared_array!(T; N)`")
            );
        }
        Ok(SharedArray { ty, len })
    }
}
