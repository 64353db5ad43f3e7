//! `shared_array!`: a module-level `.shared` declaration with a unique name.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use std::sync::atomic::{AtomicUsize, Ordering};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Expr, Token, Type};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The most static shared memory a block may declare (`ptxas` refuses more): 48 KiB.
const MAX_STATIC_SHARED: usize = 48 * 1024;

struct Input {
    ty: Type,
    len: Expr,
}

impl Parse for Input {
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
        Ok(Input { ty, len })
    }
}

pub fn expand(input: TokenStream) -> TokenStream {
    let Input { ty, len } = match syn::parse2::<Input>(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let krate = std::env::var("CARGO_CRATE_NAME").unwrap_or_else(|_| "crate".into());
    let krate: String = krate
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let sym = format!("__lookahead_shared_{krate}_{n}");
    let modname = quote::format_ident!("__lookahead_shared_decl_{n}");
    let decl = format!(".shared .align {{align}} .b8 {sym}[{{size}}];");
    let too_big = format!(
        "shared_array!: a block's static shared memory is at most {MAX_STATIC_SHARED} bytes \
         (48 KiB), and this array is larger; use a smaller tile or fewer elements"
    );
    let check = quote_spanned! {len.span()=>
        const _: () = ::core::assert!(
            ::core::mem::size_of::<[#ty; #len]>() <= #MAX_STATIC_SHARED,
            #too_big
        );
    };
    quote! {{
        #check
        // `global_asm!` is an item: give it a module, so it is not in statement position.
        #[cfg(target_arch = "nvptx64")]
        #[allow(non_snake_case)]
        mod #modname {
            #[allow(unused_imports)]
            use super::*;
            ::core::arch::global_asm!(
                #decl,
                align = const if ::core::mem::align_of::<#ty>() > 16 { ::core::mem::align_of::<#ty>() } else { 16 },
                size = const if ::core::mem::size_of::<[#ty; #len]>() == 0 { 1 } else { ::core::mem::size_of::<[#ty; #len]>() },
            );
        }
        // SAFETY: the symbol is a `.shared` array of `N` elements of `T`, aligned for `T`.
        unsafe {
            ::lookahead_device::SharedArray::<#ty, { #len }>::from_generic_ptr(
                ::lookahead_device::__shared_generic_ptr!(
                    #sym,
                    ::core::concat!(::core::file!(), ":", ::core::line!(), ":", ::core::column!()),
                    #ty,
                    { #len }
                ) as *mut #ty,
            )
        }
    }}
}
