//! The input of `shared_array!(T; N)`.

use syn::parse::{Parse, ParseStream};
use syn::visit::Visit;
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
        if let Some(var) = runtime_variable(&len) {
            return Err(syn::Error::new_spanned(
                &var,
                format!(
                    "`shared_array!(..; {})`: the length must be a constant (a literal, or a \
                     `const` such as `const TILE: usize = 256;`), not the variable `{}`: \
                     shared memory is laid out when the kernel is compiled. For a length known \
                     only at launch, declare the largest you need and use part of it",
                    shown(&len),
                    shown(&var)
                ),
            ));
        }
        Ok(SharedArray { ty, len })
    }
}

/// A lower-case single name in `len` outside a call's function position: a local variable
/// (constants are upper case by convention; `size_of::<T>()` is a call).
fn runtime_variable(len: &Expr) -> Option<syn::ExprPath> {
    struct Finder(Option<syn::ExprPath>);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            c.args.iter().for_each(|a| self.visit_expr(a));
        }
        fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
            let lower = (p.path.get_ident())
                .is_some_and(|i| i.to_string().starts_with(|c: char| c.is_lowercase()));
            if lower && self.0.is_none() {
                self.0 = Some(p.clone());
            }
        }
    }
    let mut f = Finder(None);
    f.visit_expr(len);
    f.0
}
