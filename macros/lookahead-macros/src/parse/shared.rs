//! The input of `shared_array!(T; N)`.

use syn::parse::{Parse, ParseStream};
use syn::{Expr, Token, Type};

use super::{is_negative, shown};

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
        if is_negative(&len) {
            return Err(syn::Error::new_spanned(
                &len,
                format!(
                    "`shared_array!(..; {})`: the length is a number of elements, at least 1; \
                     write a constant such as `shared_array!(f32; 256)`",
                    shown(&len)
                ),
            ));
        }
        Ok(SharedArray { ty, len })
    }
}
